/* The FastRPC user API (remote handles, invocation, session control), declared from the public FastRPC API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef REMOTE_H
#define REMOTE_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The 32-bit scalars word of an invocation: attributes, method index, buffer and handle counts. */
#define REMOTE_SCALARS_METHOD_ATTR(sc) (((sc) >> 29) & 0x7)
#define REMOTE_SCALARS_METHOD(sc)      (((sc) >> 24) & 0x1f)
#define REMOTE_SCALARS_INBUFS(sc)      (((sc) >> 16) & 0xff)
#define REMOTE_SCALARS_OUTBUFS(sc)     (((sc) >> 8) & 0xff)
#define REMOTE_SCALARS_INHANDLES(sc)   (((sc) >> 4) & 0x0f)
#define REMOTE_SCALARS_OUTHANDLES(sc)  ((sc) & 0x0f)
#define REMOTE_SCALARS_MAKEX(attr, method, nin, nout, noin, noout) \
    ((((uint32_t) (attr) & 0x7) << 29) | (((uint32_t) (method) & 0x1f) << 24) | \
     (((uint32_t) (nin) & 0xff) << 16) | (((uint32_t) (nout) & 0xff) << 8) | \
     (((uint32_t) (noin) & 0x0f) << 4) | ((uint32_t) (noout) & 0x0f))
#define REMOTE_SCALARS_MAKE(method, nin, nout) REMOTE_SCALARS_MAKEX(0, method, nin, nout, 0, 0)
#define REMOTE_SCALARS_LENGTH(sc) (REMOTE_SCALARS_INBUFS(sc) + REMOTE_SCALARS_OUTBUFS(sc) + \
                                   REMOTE_SCALARS_INHANDLES(sc) + REMOTE_SCALARS_OUTHANDLES(sc))

#define ADSP_DOMAIN_ID  0
#define MDSP_DOMAIN_ID  1
#define SDSP_DOMAIN_ID  2
#define CDSP_DOMAIN_ID  3
#define CDSP1_DOMAIN_ID 4

#define ADSP_DOMAIN_NAME  "adsp"
#define MDSP_DOMAIN_NAME  "mdsp"
#define SDSP_DOMAIN_NAME  "sdsp"
#define CDSP_DOMAIN_NAME  "cdsp"
#define CDSP1_DOMAIN_NAME "cdsp1"

#define ADSP_DOMAIN  "&_dom=adsp"
#define MDSP_DOMAIN  "&_dom=mdsp"
#define SDSP_DOMAIN  "&_dom=sdsp"
#define CDSP_DOMAIN  "&_dom=cdsp"
#define CDSP1_DOMAIN "&_dom=cdsp1"

#define MAX_DOMAIN_NAMELEN 12

/* A DSP domain: its id and the URI suffix that selects it (the SDK examples' domain.h lists them). */
typedef struct domain {
    int id;
    const char *uri;
} domain;

typedef uint32_t remote_handle;
typedef uint64_t remote_handle64;

typedef struct { void *pv; size_t nLen; } remote_buf;
typedef struct { int32_t fd; uint32_t offset; } remote_dma_handle;
typedef union {
    remote_buf buf;
    remote_handle h;
    remote_handle64 h64;
    remote_dma_handle dma;
} remote_arg;

/* remote_handle_control / remote_handle64_control request ids */
enum handle_control_req_id {
    DSPRPC_RESERVED,
    DSPRPC_CONTROL_LATENCY,
    DSPRPC_GET_DSP_INFO,
    DSPRPC_CONTROL_WAKELOCK,
    DSPRPC_GET_DOMAIN,
};

enum remote_rpc_latency_flags { RPC_DISABLE_QOS, RPC_PM_QOS, RPC_ADAPTIVE_QOS, RPC_POLL_QOS };
struct remote_rpc_control_latency { uint32_t enable; uint32_t latency; };

enum remote_dsp_attributes {
    DOMAIN_SUPPORT, UNSIGNED_PD_SUPPORT, HVX_SUPPORT_64B, HVX_SUPPORT_128B, VTCM_PAGE, VTCM_COUNT,
    ARCH_VER, HMX_SUPPORT_DEPTH, HMX_SUPPORT_SPATIAL, ASYNC_FASTRPC_SUPPORT, STATUS_NOTIFICATION_SUPPORT,
    MCID_MULTICAST,
};
typedef struct remote_dsp_capability {
    uint32_t domain;
    uint32_t attribute_ID;
    uint32_t capability;
} fastrpc_capability;

/* remote_session_control request ids */
enum session_control_req_id {
    FASTRPC_RESERVED_1,
    FASTRPC_THREAD_PARAMS,
    DSPRPC_CONTROL_UNSIGNED_MODULE,
    FASTRPC_RESERVED_2,
    FASTRPC_RELATIVE_THREAD_PRIORITY,
    FASTRPC_RESERVED_3,
    FASTRPC_REMOTE_PROCESS_KILL,
    FASTRPC_SESSION_CLOSE,
    FASTRPC_CONTROL_PD_DUMP,
    FASTRPC_REMOTE_PROCESS_EXCEPTION,
    FASTRPC_REMOTE_PROCESS_TYPE,
    FASTRPC_REGISTER_STATUS_NOTIFICATIONS,
    FASTRPC_PD_INITMEM_SIZE,
    FASTRPC_RESERVE_NEW_SESSION,
    FASTRPC_GET_EFFECTIVE_DOMAIN_ID,
    FASTRPC_GET_URI,
};

struct remote_rpc_thread_params { int domain; int prio; int stack_size; };
struct remote_rpc_control_unsigned_module { int domain; int enable; };

typedef struct remote_rpc_reserve_new_session {
    char *domain_name;
    uint32_t domain_name_len;
    char *session_name;
    uint32_t session_name_len;
    uint32_t effective_domain_id;   /* out */
    uint32_t session_id;            /* out */
} remote_rpc_reserve_new_session_t;

typedef struct remote_rpc_effective_domain_id {
    char *domain_name;
    uint32_t domain_name_len;
    uint32_t session_id;
    uint32_t effective_domain_id;   /* out */
} remote_rpc_effective_domain_id_t;

typedef struct remote_rpc_get_uri {
    char *domain_name;
    uint32_t domain_name_len;
    uint32_t session_id;
    char *module_uri;
    uint32_t module_uri_len;
    char *uri;                      /* out, caller-allocated */
    uint32_t uri_len;
} remote_rpc_get_uri_t;

/* fastrpc_mmap flags */
enum fastrpc_map_flags {
    FASTRPC_MAP_STATIC,
    FASTRPC_MAP_RESERVED,
    FASTRPC_MAP_FD,
    FASTRPC_MAP_FD_DELAYED,
    FASTRPC_MAP_RESERVED_4, FASTRPC_MAP_RESERVED_5, FASTRPC_MAP_RESERVED_6, FASTRPC_MAP_RESERVED_7,
    FASTRPC_MAP_RESERVED_8, FASTRPC_MAP_RESERVED_9, FASTRPC_MAP_RESERVED_10, FASTRPC_MAP_RESERVED_11,
    FASTRPC_MAP_RESERVED_12, FASTRPC_MAP_RESERVED_13, FASTRPC_MAP_RESERVED_14, FASTRPC_MAP_RESERVED_15,
    FASTRPC_MAP_FD_NOMAP,
    FASTRPC_MAP_FD_DELAYED_EXTENDED,
    FASTRPC_MAP_MAX,
};

/* remote_system_request: the list of domains (newer FastRPC releases) */
#define FASTRPC_GET_DOMAINS 0
enum fastrpc_domain_type { FASTRPC_LPASS = 1, FASTRPC_CDSP, FASTRPC_MDSP, FASTRPC_SDSP, FASTRPC_NSP = FASTRPC_CDSP };
#define DOMAINS_LIST_FLAGS_SET_TYPE(flags, type) (((flags) & ~0xffu) | ((unsigned) (type) & 0xffu))
#define DOMAINS_LIST_FLAGS_GET_TYPE(flags) ((flags) & 0xffu)
typedef struct fastrpc_domain {
    int id;
    char name[MAX_DOMAIN_NAMELEN + 4];
    int type;
    int status;
    uint32_t card;
    uint32_t dev;
    int instance_id;     /* which CDSP of a SoC with several (0, 1, ...) */
} fastrpc_domain;
typedef struct system_req_domains {
    fastrpc_domain *domains;
    int max_domains;
    int num_domains;
    uint32_t flags;
} system_req_domains;
typedef struct system_req_payload {
    uint32_t id;
    union {
        system_req_domains sys;
    };
} system_req_payload;

int remote_handle_open(const char *name, remote_handle *ph);
int remote_handle64_open(const char *name, remote_handle64 *ph);
int remote_handle_invoke(remote_handle h, uint32_t scalars, remote_arg *pra);
int remote_handle64_invoke(remote_handle64 h, uint32_t scalars, remote_arg *pra);
int remote_handle_close(remote_handle h);
int remote_handle64_close(remote_handle64 h);
int remote_handle_control(uint32_t req, void *data, uint32_t datalen);
int remote_handle64_control(remote_handle64 h, uint32_t req, void *data, uint32_t datalen);
int remote_session_control(uint32_t req, void *data, uint32_t datalen);
int remote_system_request(system_req_payload *req);
int fastrpc_mmap(int domain, int fd, void *addr, int offset, size_t length, enum fastrpc_map_flags flags);
int fastrpc_munmap(int domain, int fd, void *addr, size_t length);

#ifdef __cplusplus
}
#endif
#endif /* REMOTE_H */
