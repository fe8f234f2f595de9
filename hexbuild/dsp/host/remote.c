/* hexbuild's stand-in libcdsprpc.so: remote handles (open, invoke, close) and buffer mappings.
 * A host handle is a small number naming (session, the skel's handle on the DSP): small because
 * llama.cpp's htp-drv.cpp calls remote_handle64_close through a pointer typed with a 32-bit
 * remote_handle, so only the low 32 bits of a handle reach close. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "vnpu_host.h"

_Static_assert(sizeof(remote_arg) == 2 * sizeof(void *), "remote_arg is {pv, nLen}");

#define MAX_HANDLES 1024
#define HANDLE_BASE 0x100 /* never 0: FastRPC's callers test handles against 0 and -1 */

struct handle {
    bool used;
    int edomain;
    uint64_t dsp_handle;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct handle g_handles[MAX_HANDLES];

static const char *const DOMAIN_NAMES[VNPU_NUM_DOMAINS] = {"adsp", "mdsp", "sdsp", "cdsp", "cdsp1", "gdsp0", "gdsp1",
                                                           NULL};

/* The domain (0..7) named by name[0..len), or -1. */
int vnpu_domain_from_name(const char *name, size_t len) {
    for (int d = 0; d < VNPU_NUM_DOMAINS; d++)
        if (DOMAIN_NAMES[d] && strlen(DOMAIN_NAMES[d]) == len && strncmp(name, DOMAIN_NAMES[d], len) == 0) return d;
    return -1;
}

const char *vnpu_domain_name(int domain) {
    return domain >= 0 && domain < VNPU_NUM_DOMAINS && DOMAIN_NAMES[domain] ? DOMAIN_NAMES[domain] : "?";
}

/* The value of "&key=" (or "?key=") in uri, copied into out; false if absent. */
static bool uri_param(const char *uri, const char *key, char *out, size_t outlen) {
    size_t klen = strlen(key);
    for (const char *p = strchr(uri, '?'); p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, key, klen) == 0 && p[1 + klen] == '=') {
            const char *v = p + 2 + klen;
            size_t n = strcspn(v, "&");
            if (n >= outlen) n = outlen - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return true;
        }
    }
    return false;
}

/* The effective domain a URI selects (FastRPC: "&_dom=NAME", "&_session=N"; default cdsp, 0). */
static int uri_edomain(const char *uri) {
    char v[32];
    int domain = CDSP_DOMAIN_ID, session = 0;
    if (uri_param(uri, "_dom", v, sizeof v)) {
        domain = vnpu_domain_from_name(v, strlen(v));
        if (domain < 0) return -1;
    }
    if (uri_param(uri, "_session", v, sizeof v)) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 0 || n >= VNPU_NUM_SESSIONS) return -1;
        session = (int) n;
    }
    return domain + VNPU_NUM_DOMAINS * session;
}

static struct handle *handle_get(remote_handle64 h) {
    uint32_t low = (uint32_t) h;
    if (low < HANDLE_BASE || low >= HANDLE_BASE + MAX_HANDLES) return NULL;
    struct handle *e = &g_handles[low - HANDLE_BASE];
    return e->used ? e : NULL;
}

/* The session of a handle (and the DSP's handle), or NULL. */
static struct vnpu_session *handle_session(remote_handle64 h, uint64_t *dsp_handle) {
    pthread_mutex_lock(&g_mu);
    struct handle *e = handle_get(h);
    struct vnpu_session *s = NULL;
    if (e) {
        s = vnpu_session_get(e->edomain);
        *dsp_handle = e->dsp_handle;
    }
    pthread_mutex_unlock(&g_mu);
    return s;
}

/* A session that can serve a call: running (started now if need be). add_handle counts a handle
 * on it in the same step, so that a concurrent close of its last other handle cannot stop it. */
static int session_for(int edomain, struct vnpu_session **out, bool add_handle) {
    struct vnpu_session *s = vnpu_session_get(edomain);
    if (!s) return AEE_EBADPARM;
    if (VNPU_DOMAIN_OF(edomain) != CDSP_DOMAIN_ID) {
        static int said;
        vnpu_say_once(said, "the virtual NPU has only the cdsp domain (asked for %s)",
                      vnpu_domain_name(VNPU_DOMAIN_OF(edomain)));
        return AEE_EINVALIDDOMAIN;
    }
    pthread_mutex_lock(&s->mu);
    int err = vnpu_session_start_locked(s);
    if (!err && add_handle) s->n_handles++;
    pthread_mutex_unlock(&s->mu);
    *out = s;
    return err;
}

/* One line per session as it first opens, in the same HTPn names llama.cpp gives its devices
 * (device n is session n): what a FastRPC log on a phone would show, which the dispatch proof reads
 * where the backend's own "new session" line is not printed (0.3.28 opens before -lv applies). */
static void announce_open(struct vnpu_session *s, int ed, const char *uri) {
    pthread_mutex_lock(&s->mu);
    bool first = !s->announced;
    s->announced = true;
    int pid = (int) s->pid;
    pthread_mutex_unlock(&s->mu);
    if (!first) return;
    const char *lib = strstr(uri, "file:///");
    lib = lib ? lib + 8 : uri;
    int len = (int) strcspn(lib, "?");
    const char *cpu = getenv("HEXBUILD_VNPU_CPU");
    vnpu_say("HTP%d: session opened on the virtual NPU (%.*s on an emulated %s cDSP, pid %d)", VNPU_SESSION_OF(ed),
             len, lib, cpu && *cpu ? cpu : "v73", pid);
}

VNPU_API int remote_handle64_open(const char *name, remote_handle64 *ph) {
    if (!name || !ph) return AEE_EBADPARM;
    int ed = uri_edomain(name);
    if (ed < 0) {
        vnpu_say("remote_handle64_open: cannot tell the domain and session of \"%s\"", name);
        return AEE_EBADPARM;
    }
    struct vnpu_session *s;
    int err = session_for(ed, &s, true);
    if (err) return err;
    uint8_t *reply;
    size_t rlen;
    err = vnpu_request(s, VNPU_OPEN, name, strlen(name) + 1, -1, &reply, &rlen);
    if (!err) err = vnpu_reply_status(reply, rlen);
    uint64_t dsp_handle = 0;
    if (!err) {
        if (rlen < 12) err = AEE_EBADITEM;
        else memcpy(&dsp_handle, reply + 4, 8);
    }
    free(reply);
    int idx = -1;
    if (!err) {
        pthread_mutex_lock(&g_mu);
        for (int i = 0; i < MAX_HANDLES; i++) {
            if (!g_handles[i].used) {
                g_handles[i] = (struct handle){true, ed, dsp_handle};
                idx = i;
                break;
            }
        }
        pthread_mutex_unlock(&g_mu);
        if (idx < 0) {
            vnpu_say("remote_handle64_open: more than %d handles open", MAX_HANDLES);
            uint8_t *r2;
            size_t l2;
            if (!vnpu_request(s, VNPU_CLOSE, &dsp_handle, 8, -1, &r2, &l2)) free(r2);
            err = AEE_EOUTOFHANDLES;
        }
    }
    if (!err) announce_open(s, ed, name);
    if (err) {
        pthread_mutex_lock(&s->mu);
        bool last = --s->n_handles == 0;
        pthread_mutex_unlock(&s->mu);
        if (last) vnpu_session_stop(s);
        return err;
    }
    *ph = (remote_handle64) (HANDLE_BASE + idx);
    vnpu_trace("open %s: handle 0x%x (session %d, DSP handle 0x%llx)", name, (unsigned) (HANDLE_BASE + idx), VNPU_SESSION_OF(ed),
               (unsigned long long) dsp_handle);
    return AEE_SUCCESS;
}

VNPU_API int remote_handle64_invoke(remote_handle64 h, uint32_t sc, remote_arg *pra) {
    uint64_t dsp_handle;
    struct vnpu_session *s = handle_session(h, &dsp_handle);
    if (!s) return AEE_EBADHANDLE;
    uint32_t nin = REMOTE_SCALARS_INBUFS(sc), nout = REMOTE_SCALARS_OUTBUFS(sc);
    if (REMOTE_SCALARS_INHANDLES(sc) || REMOTE_SCALARS_OUTHANDLES(sc)) {
        static int said;
        vnpu_say_once(said, "remote_handle64_invoke: handle arguments (scalars 0x%08x) are not supported", sc);
        return AEE_EUNSUPPORTED;
    }
    uint32_t nb = nin + nout;
    if (nb && !pra) return AEE_EBADPARM;
    size_t len = 16 + 4 * (size_t) nb, out_total = 0;
    for (uint32_t i = 0; i < nb; i++) {
        if (pra[i].buf.nLen > UINT32_MAX || (pra[i].buf.nLen && !pra[i].buf.pv)) return AEE_EBADPARM;
        if (i < nin) len += pra[i].buf.nLen;
        else out_total += pra[i].buf.nLen;
    }
    uint8_t *msg = malloc(len);
    if (!msg) return AEE_ENOMEMORY;
    memcpy(msg, &dsp_handle, 8);
    memcpy(msg + 8, &sc, 4);
    memcpy(msg + 12, &nb, 4);
    uint8_t *p = msg + 16;
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t n = (uint32_t) pra[i].buf.nLen;
        memcpy(p, &n, 4);
        p += 4;
    }
    for (uint32_t i = 0; i < nin; i++) {
        if (pra[i].buf.nLen) memcpy(p, pra[i].buf.pv, pra[i].buf.nLen);
        p += pra[i].buf.nLen;
    }
    uint8_t *reply;
    size_t rlen;
    int err = vnpu_request(s, VNPU_INVOKE, msg, len, -1, &reply, &rlen);
    free(msg);
    if (err) return err;
    err = vnpu_reply_status(reply, rlen);
    if (!err) {
        if (rlen != 4 + out_total) {
            vnpu_say("remote_handle64_invoke: the DSP answered %zu bytes of output, %zu were asked for", rlen - 4,
                     out_total);
            err = AEE_EBADITEM;
        } else {
            const uint8_t *q = reply + 4;
            for (uint32_t i = nin; i < nb; i++) {
                if (pra[i].buf.nLen) memcpy(pra[i].buf.pv, q, pra[i].buf.nLen);
                q += pra[i].buf.nLen;
            }
        }
    }
    free(reply);
    return err;
}

VNPU_API int remote_handle64_close(remote_handle64 h) {
    pthread_mutex_lock(&g_mu);
    struct handle *e = handle_get(h);
    struct handle copy = e ? *e : (struct handle){0};
    if (e) e->used = false;
    pthread_mutex_unlock(&g_mu);
    if (!e) return AEE_EBADHANDLE;
    struct vnpu_session *s = vnpu_session_get(copy.edomain);
    uint8_t *reply;
    size_t rlen;
    int err = vnpu_request(s, VNPU_CLOSE, &copy.dsp_handle, 8, -1, &reply, &rlen);
    if (!err) {
        err = vnpu_reply_status(reply, rlen);
        free(reply);
    } else if (err == VNPU_E_DEAD) {
        err = AEE_SUCCESS; /* the skel's state went with its process: the handle is released all the same */
    }
    pthread_mutex_lock(&s->mu);
    bool last = --s->n_handles == 0;
    pthread_mutex_unlock(&s->mu);
    /* FastRPC ends the DSP process with its last handle. */
    if (last) vnpu_session_stop(s);
    vnpu_trace("close handle 0x%x: 0x%x", (unsigned) (uint32_t) h, (unsigned) err);
    return err;
}

VNPU_API int remote_handle_open(const char *name, remote_handle *ph) {
    remote_handle64 h;
    if (!ph) return AEE_EBADPARM;
    int err = remote_handle64_open(name, &h);
    if (!err) *ph = (remote_handle) h;
    return err;
}

VNPU_API int remote_handle_invoke(remote_handle h, uint32_t sc, remote_arg *pra) {
    return remote_handle64_invoke(h, sc, pra);
}

VNPU_API int remote_handle_close(remote_handle h) { return remote_handle64_close(h); }

/* The effective domain of a handle (remote_handle64_control's DSPRPC_GET_DOMAIN), or -1. */
int vnpu_handle_edomain(remote_handle64 h) {
    pthread_mutex_lock(&g_mu);
    struct handle *e = handle_get(h);
    int ed = e ? e->edomain : -1;
    pthread_mutex_unlock(&g_mu);
    return ed;
}

/* ---- fastrpc_mmap / fastrpc_munmap ---- */

VNPU_API int fastrpc_mmap(int domain, int fd, void *addr, int offset, size_t length, enum fastrpc_map_flags flags) {
    /* As qualcomm/fastrpc: a whole fd from offset 0, one of the defined map flags. */
    if (fd < 0 || offset != 0 || length == 0 || (int) flags < 0 || flags >= FASTRPC_MAP_MAX ||
        flags == FASTRPC_MAP_RESERVED)
        return AEE_EBADPARM;
    if (domain == -1) domain = CDSP_DOMAIN_ID;
    struct vnpu_session *s;
    int err = session_for(domain, &s, false);
    if (err) return err;
    struct stat st;
    if (fstat(fd, &st) != 0) return AEE_EBADPARM;
    if ((uint64_t) length > (uint64_t) st.st_size) {
        vnpu_say("fastrpc_mmap: fd %d holds %lld bytes, %zu were asked for", fd, (long long) st.st_size, length);
        return AEE_EBADPARM;
    }
    struct vnpu_map *m = calloc(1, sizeof *m);
    if (!m) return AEE_ENOMEMORY;
    m->fd = fd;
    m->size = length;
    void *base;
    size_t bsize;
    if (addr) m->host = addr;
    else if (vnpu_rpcmem_lookup(fd, &base, &bsize)) m->host = base;
    else {
        m->host = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m->host == MAP_FAILED) {
            free(m);
            return AEE_EMMAP;
        }
        m->own_mapping = true;
    }
    pthread_mutex_lock(&s->mu);
    bool dup = vnpu_map_find_locked(s, fd) != NULL;
    if (!dup) { /* listed before the reply, so a racing second map of the fd is refused */
        m->next = s->maps;
        s->maps = m;
    }
    pthread_mutex_unlock(&s->mu);
    if (dup) {
        if (m->own_mapping) munmap(m->host, length);
        free(m);
        return AEE_EALREADY;
    }
    struct {
        int32_t host_fd;
        uint32_t flags;
        uint64_t offset, size;
    } __attribute__((packed)) body = {fd, (uint32_t) flags, 0, length};
    uint8_t *reply;
    size_t rlen;
    err = vnpu_request(s, VNPU_MMAP, &body, sizeof body, fd, &reply, &rlen);
    if (!err) {
        err = vnpu_reply_status(reply, rlen);
        if (!err && rlen >= 8) memcpy(&m->dsp_addr, reply + 4, 4);
        free(reply);
    }
    if (err) {
        pthread_mutex_lock(&s->mu);
        for (struct vnpu_map **pp = &s->maps; *pp; pp = &(*pp)->next)
            if (*pp == m) {
                *pp = m->next;
                break;
            }
        pthread_mutex_unlock(&s->mu);
        if (m->own_mapping) munmap(m->host, length);
        free(m);
        return err;
    }
    pthread_mutex_lock(&s->mu);
    s->mapped_bytes += length;
    if (s->mapped_bytes > s->mapped_peak) s->mapped_peak = s->mapped_bytes;
    pthread_mutex_unlock(&s->mu);
    vnpu_trace("fastrpc_mmap session %d fd %d %zu bytes: DSP address 0x%08x", VNPU_SESSION_OF(domain), fd, length,
               m->dsp_addr);
    return AEE_SUCCESS;
}

VNPU_API int fastrpc_munmap(int domain, int fd, void *addr, size_t length) {
    (void) addr;
    (void) length;
    if (domain == -1) domain = CDSP_DOMAIN_ID;
    struct vnpu_session *s = vnpu_session_get(domain);
    if (!s || fd < 0) return AEE_EBADPARM;
    pthread_mutex_lock(&s->mu);
    struct vnpu_map *m = NULL;
    for (struct vnpu_map **pp = &s->maps; *pp; pp = &(*pp)->next) {
        if ((*pp)->fd == fd) {
            m = *pp;
            *pp = m->next;
            s->mapped_bytes -= m->size;
            break;
        }
    }
    bool running = s->state == VNPU_RUNNING;
    pthread_mutex_unlock(&s->mu);
    if (!m) return AEE_ENOSUCHMAP;
    int err = AEE_SUCCESS;
    if (running) {
        int32_t body = fd;
        uint8_t *reply;
        size_t rlen;
        err = vnpu_request(s, VNPU_MUNMAP, &body, sizeof body, -1, &reply, &rlen);
        if (!err) {
            err = vnpu_reply_status(reply, rlen);
            free(reply);
        }
    }
    if (m->own_mapping) munmap(m->host, m->size);
    free(m);
    return err;
}
