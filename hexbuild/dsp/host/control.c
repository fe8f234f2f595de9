/* hexbuild's stand-in libcdsprpc.so: remote_handle_control, remote_handle64_control,
 * remote_session_control, remote_system_request. Request ids and structs as qualcomm/fastrpc's;
 * what the virtual NPU does not model is accepted where FastRPC treats it as a hint (QoS latency,
 * wakelock, thread parameters), said once, and anything else is AEE_EUNSUPPORTED, said once. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnpu_host.h"

/* qualcomm/fastrpc inc/remote.h; not in the SDK headers hexbuild carries. */
struct vnpu_rpc_control_wakelock { uint32_t enable; };
struct vnpu_rpc_get_domain { int domain; };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

int vnpu_cpu_arch(void) {
    const char *cpu = getenv("HEXBUILD_VNPU_CPU");
    if (!cpu || !*cpu) cpu = "v73";
    if (*cpu == 'v' || *cpu == 'V') cpu++;
    int arch = atoi(cpu);
    return arch > 0 ? arch : 73;
}

/* fastrpc_get_cap: what the virtual cDSP is (the DSP runtime's VTCM and HVX units). */
static int dsp_capability(uint32_t edomain, uint32_t attribute, uint32_t *value) {
    if (edomain >= VNPU_NUM_EDOMAINS) return AEE_EBADPARM;
    bool cdsp = VNPU_DOMAIN_OF(edomain) == CDSP_DOMAIN_ID;
    int arch = vnpu_cpu_arch();
    switch (attribute) {
    case DOMAIN_SUPPORT: *value = cdsp; return AEE_SUCCESS;
    case UNSIGNED_PD_SUPPORT: *value = cdsp; return AEE_SUCCESS;
    case HVX_SUPPORT_64B: *value = 0; return AEE_SUCCESS;
    case HVX_SUPPORT_128B: *value = cdsp ? 4 : 0; return AEE_SUCCESS;
    case VTCM_PAGE: *value = cdsp ? 8u << 20 : 0; return AEE_SUCCESS;
    case VTCM_COUNT: *value = cdsp; return AEE_SUCCESS;
    /* "v73" -> 0x73, as the DSP reports it (llama.cpp reads the low byte as hex digits) */
    case ARCH_VER: *value = cdsp ? (uint32_t) ((arch / 10) << 4 | arch % 10) : 0; return AEE_SUCCESS;
    case HMX_SUPPORT_DEPTH: case HMX_SUPPORT_SPATIAL: *value = 0; return AEE_SUCCESS; /* no HMX emulated */
    case ASYNC_FASTRPC_SUPPORT: case STATUS_NOTIFICATION_SUPPORT: case MCID_MULTICAST:
        *value = 0;
        return AEE_SUCCESS;
    default: return AEE_EBADPARM;
    }
}

enum { CALL_HANDLE, CALL_HANDLE64, CALL_SESSION, CALL_SYSTEM };
static const char *const CALL_NAMES[] = {"remote_handle_control", "remote_handle64_control", "remote_session_control",
                                         "remote_system_request"};

static int unsupported(int which, uint32_t req) {
    static uint64_t said[4]; /* one bit per (call, request id < 63); bit 63 for every larger id */
    uint64_t bit = 1ull << (req < 63 ? req : 63);
    if (!(__atomic_fetch_or(&said[which], bit, __ATOMIC_RELAXED) & bit))
        vnpu_say("%s: request %u is not supported by the virtual NPU", CALL_NAMES[which], req);
    return AEE_EUNSUPPORTED;
}

static int handle_control(int which, int edomain, uint32_t req, void *data, uint32_t len) {
    switch (req) {
    case DSPRPC_CONTROL_LATENCY: /* a hint to the power manager: nothing to model */
        if (!data || len < sizeof(struct remote_rpc_control_latency)) return AEE_EBADPARM;
        return AEE_SUCCESS;
    case DSPRPC_GET_DSP_INFO: {
        struct remote_dsp_capability *cap = data;
        if (!cap || len < sizeof *cap) return AEE_EBADPARM;
        return dsp_capability(cap->domain, cap->attribute_ID, &cap->capability);
    }
    case DSPRPC_CONTROL_WAKELOCK:
        if (!data || len != sizeof(struct vnpu_rpc_control_wakelock)) return AEE_EBADPARM;
        return AEE_SUCCESS;
    case DSPRPC_GET_DOMAIN: {
        struct vnpu_rpc_get_domain *g = data;
        if (!g || len != sizeof *g || edomain < 0) return AEE_EBADPARM;
        g->domain = edomain;
        return AEE_SUCCESS;
    }
    default: return unsupported(which, req);
    }
}

VNPU_API int remote_handle_control(uint32_t req, void *data, uint32_t datalen) {
    return handle_control(CALL_HANDLE, -1, req, data, datalen);
}

VNPU_API int remote_handle64_control(remote_handle64 h, uint32_t req, void *data, uint32_t datalen) {
    int ed = vnpu_handle_edomain(h);
    if (ed < 0) return AEE_EBADHANDLE;
    return handle_control(CALL_HANDLE64, ed, req, data, datalen);
}

/* The domain named by name[0..len), or -1 (names may come with or without a NUL in len). */
static int named_domain(const char *name, uint32_t len) {
    if (!name || len == 0) return -1;
    size_t n = strnlen(name, len);
    return vnpu_domain_from_name(name, n);
}

VNPU_API int remote_session_control(uint32_t req, void *data, uint32_t datalen) {
    switch (req) {
    case FASTRPC_RESERVE_NEW_SESSION: {
        remote_rpc_reserve_new_session_t *n = data;
        if (!n || datalen != sizeof *n || !n->session_name || n->session_name_len == 0) return AEE_EBADPARM;
        int d = named_domain(n->domain_name, n->domain_name_len);
        if (d < 0) return AEE_EBADPARM;
        n->effective_domain_id = VNPU_NUM_EDOMAINS;
        n->session_id = VNPU_NUM_SESSIONS;
        /* Session 0 is the default one and is never reserved (as FastRPC). */
        pthread_mutex_lock(&g_mu);
        for (int j = 1; j < VNPU_NUM_SESSIONS; j++) {
            struct vnpu_session *s = vnpu_session_get(d + VNPU_NUM_DOMAINS * j);
            if (!s->reserved) {
                s->reserved = true;
                n->effective_domain_id = (uint32_t) s->edomain;
                n->session_id = (uint32_t) j;
                break;
            }
        }
        pthread_mutex_unlock(&g_mu);
        if (n->session_id == VNPU_NUM_SESSIONS) {
            vnpu_say("remote_session_control: no %s session left to reserve (FastRPC has %d per process)",
                     vnpu_domain_name(d), VNPU_NUM_SESSIONS);
            return AEE_ENOSESSION;
        }
        return AEE_SUCCESS;
    }
    case FASTRPC_GET_EFFECTIVE_DOMAIN_ID: {
        remote_rpc_effective_domain_id_t *e = data;
        if (!e || datalen != sizeof *e || e->session_id >= VNPU_NUM_SESSIONS) return AEE_EBADPARM;
        int d = named_domain(e->domain_name, e->domain_name_len);
        if (d < 0) return AEE_EBADPARM;
        e->effective_domain_id = (uint32_t) (d + VNPU_NUM_DOMAINS * (int) e->session_id);
        return AEE_SUCCESS;
    }
    case FASTRPC_GET_URI: {
        remote_rpc_get_uri_t *u = data;
        if (!u || datalen != sizeof *u || u->session_id >= VNPU_NUM_SESSIONS) return AEE_EBADPARM;
        int d = named_domain(u->domain_name, u->domain_name_len);
        if (d < 0 || !u->module_uri || u->module_uri_len == 0 || !u->uri || u->uri_len <= u->module_uri_len)
            return AEE_EBADPARM;
        int need = snprintf(u->uri, u->uri_len, "%.*s&_dom=%s&_session=%u", (int) u->module_uri_len, u->module_uri,
                            vnpu_domain_name(d), u->session_id);
        return need < 0 || (uint32_t) need >= u->uri_len ? AEE_EBADSIZE : AEE_SUCCESS;
    }
    case DSPRPC_CONTROL_UNSIGNED_MODULE: {
        /* Every skel runs unsigned here: there is nothing to sign it against. */
        struct remote_rpc_control_unsigned_module *u = data;
        if (!u || datalen != sizeof *u) return AEE_EBADPARM;
        return AEE_SUCCESS;
    }
    case FASTRPC_THREAD_PARAMS: case FASTRPC_RELATIVE_THREAD_PRIORITY: case FASTRPC_PD_INITMEM_SIZE: {
        if (!data) return AEE_EBADPARM;
        static int said;
        vnpu_say_once(said, "remote_session_control: DSP thread and memory parameters are accepted and not modelled");
        return AEE_SUCCESS;
    }
    default: return unsupported(CALL_SESSION, req);
    }
}

VNPU_API int remote_system_request(system_req_payload *req) {
    if (!req) return AEE_EBADPARM;
    if (req->id != FASTRPC_GET_DOMAINS) return unsupported(CALL_SYSTEM, req->id);
    system_req_domains *sys = &req->sys;
    sys->num_domains = 1; /* the one cDSP */
    if (sys->domains && sys->max_domains >= 1) {
        fastrpc_domain *d = &sys->domains[0];
        memset(d, 0, sizeof *d);
        d->id = CDSP_DOMAIN_ID;
        snprintf(d->name, sizeof d->name, "%s", CDSP_DOMAIN_NAME);
        d->type = FASTRPC_NSP;
        d->status = 1;
        d->instance_id = 0;
    }
    return AEE_SUCCESS;
}
