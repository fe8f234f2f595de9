/* hexbuild's stand-in libcdsprpc.so (the virtual NPU's host side): shared declarations.
 * Design and wire protocol: issue 36 (vnpu-spec). One DSP process (qemu-hexagon running hexbuild's
 * DSP runtime) per FastRPC session, reached over a SOCK_SEQPACKET socket. */
#ifndef VNPU_HOST_H
#define VNPU_HOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Quoted and relative, never through -I: hexbuild/dsp/include also holds the DSP's freestanding
 * libc headers, which must not shadow the host's. */
#include "../include/AEEStdErr.h"
#include "../include/dspqueue.h"
#include "../include/remote.h"
#include "../include/rpcmem.h"

#define VNPU_API __attribute__((visibility("default")))

/* qualcomm/fastrpc's numbering: effective domain = domain + NUM_DOMAINS * session. */
#define VNPU_NUM_DOMAINS  8
#define VNPU_NUM_SESSIONS 4
#define VNPU_NUM_EDOMAINS (VNPU_NUM_DOMAINS * VNPU_NUM_SESSIONS)
#define VNPU_DOMAIN_OF(ed)  ((ed) % VNPU_NUM_DOMAINS)
#define VNPU_SESSION_OF(ed) ((ed) / VNPU_NUM_DOMAINS)

/* Not in the SDK headers hexbuild carries (qualcomm/fastrpc inc/AEEStdErr.h). */
#ifndef AEE_ENOSESSION
#define AEE_ENOSESSION (AEE_EOFFSET + 0x08A)
#endif

/* ---- wire protocol: the one the DSP process reads (../vnpu/wire.h) ---- */
#include "../vnpu/wire.h"

/* ---- logging ---- */
/* One line on stderr, beginning "hexbuild-vnpu: ". */
void vnpu_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, only the first time for a given key (a static int the caller owns). */
#define vnpu_say_once(flag, ...) do { if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED)) vnpu_say(__VA_ARGS__); } while (0)
/* A protocol trace line when HEXBUILD_VNPU_LOG=1. */
bool vnpu_tracing(void);
void vnpu_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- rpcmem ---- */
/* The host mapping and size of an rpcmem block by its fd; false if the fd is not one. */
bool vnpu_rpcmem_lookup(int fd, void **base, size_t *size);

/* ---- sessions ---- */
struct vnpu_map {
    struct vnpu_map *next;
    int fd;
    void *host;       /* the host's view of the mapped range */
    bool own_mapping; /* host was mmapped here (fd not from rpcmem, no addr given) */
    size_t size;
    uint32_t dsp_addr;
};

struct vnpu_hqueue;

enum vnpu_state { VNPU_IDLE, VNPU_RUNNING, VNPU_CLOSING, VNPU_DEAD };

struct vnpu_session {
    int edomain;
    pthread_mutex_t mu;      /* state, pending, maps, queues, counters */
    pthread_cond_t cv;       /* replies arrived, state changed */
    pthread_mutex_t send_mu; /* one sender at a time; never held while taking mu */
    enum vnpu_state state;
    bool reserved;           /* FASTRPC_RESERVE_NEW_SESSION gave it out */
    int sock;
    pid_t pid;
    pthread_t reader;
    bool reader_started;
    uint32_t next_seq;
    struct vnpu_pending *pending;
    struct vnpu_map *maps;
    struct vnpu_hqueue *queues;
    int n_handles;
    uint64_t mapped_bytes, mapped_peak; /* fastrpc_mmap'd to the DSP now, and at most at once */
    bool announced;                     /* its "session opened" line was said */
};

struct vnpu_pending {
    struct vnpu_pending *next;
    uint32_t seq;
    bool done;
    uint8_t *reply; /* malloc'd body after the header, status first */
    size_t reply_len;
};

/* The session of an effective domain id, or NULL if the id is out of range. */
struct vnpu_session *vnpu_session_get(int edomain);
/* Starts the session's DSP process if it is not running. Call with s->mu held. */
int vnpu_session_start_locked(struct vnpu_session *s);
/* Sends a request and waits for its reply; *reply (malloc'd, status first) is the caller's to free.
 * fd >= 0 travels with it (SCM_RIGHTS). Returns AEE_SUCCESS or the transport's error (the DSP's
 * status is in the reply). */
int vnpu_request(struct vnpu_session *s, uint32_t type, const void *body, size_t len, int fd,
                 uint8_t **reply, size_t *reply_len);
/* Sends a message that has no reply (a queue packet); timeout_us as dspqueue_write's. */
int vnpu_send_noreply(struct vnpu_session *s, uint32_t type, const struct iovec *iov, int iovcnt,
                      uint32_t timeout_us);
/* Starts a DSP process (process.c): its socket and pid, or AEE_ECONNREFUSED and one line. */
int vnpu_spawn(int *sock, pid_t *pid);
/* Reaps pid, waiting up to wait_ms, then SIGKILLs it; the wait status, or -1 if it was killed. */
int vnpu_reap(pid_t pid, int wait_ms);
/* Ends the session's DSP process in order (its last handle closed). Call without s->mu. */
void vnpu_session_stop(struct vnpu_session *s);
/* The status at the front of a reply, or AEE_EBADITEM if the reply is too short. */
int vnpu_reply_status(const uint8_t *reply, size_t len);
/* The code every call on a session whose DSP process died returns. */
#define VNPU_E_DEAD AEE_EINTERRUPTED

/* A map of fd on the session (s->mu held), or NULL. */
struct vnpu_map *vnpu_map_find_locked(struct vnpu_session *s, int fd);

/* ---- queues (dspqueue.c; queue_rx.c on the session's reader thread) ---- */
struct vnpu_pkt {
    struct vnpu_pkt *next;
    uint8_t *body; /* owns the message; bufs and msg point into it */
    uint32_t flags, n_bufs, msg_len;
    const struct vnpu_wire_buf *bufs;
    const uint8_t *msg;
};

struct vnpu_hqueue {
    uint32_t magic;
    struct vnpu_hqueue *next; /* the session's list, under s->mu */
    struct vnpu_session *s;
    uint64_t id;
    dspqueue_callback_t packet_cb, error_cb;
    void *ctx;
    pthread_cond_t cv; /* with s->mu: a packet arrived, the queue ended or is closing */
    struct vnpu_pkt *head, *tail;
    uint64_t n_waiting, bytes_waiting;
    int readers;  /* threads inside read/peek */
    int callbacks; /* callbacks running (on the session's reader thread) */
    bool closing; /* dspqueue_close under way */
    int end_err;  /* != 0: the session's DSP process is gone */
};

/* A DSP->host queue packet (body after the header); takes ownership of body. */
void vnpu_queue_deliver(struct vnpu_session *s, uint8_t *body, size_t len);
/* The session's DSP process is gone (died, or stopped): wakes readers, calls error callbacks. */
void vnpu_queues_session_ended(struct vnpu_session *s, bool died);

/* ---- domains and handles (remote.c) ---- */
/* The domain (0..7) named by name[0..len), or -1; and a domain's name. */
int vnpu_domain_from_name(const char *name, size_t len);
const char *vnpu_domain_name(int domain);
/* The effective domain of a handle, or -1. */
int vnpu_handle_edomain(remote_handle64 h);

/* ---- DSP capabilities ---- */
/* "v73" -> 73 from HEXBUILD_VNPU_CPU (default v73). */
int vnpu_cpu_arch(void);

#endif /* VNPU_HOST_H */
