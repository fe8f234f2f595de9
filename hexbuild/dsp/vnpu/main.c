/* hexbuild virtual NPU: the DSP process of one FastRPC session. qemu-hexagon runs it as
 * `runtime FD`, FD being its end of a SOCK_SEQPACKET socket to the host library (the
 * libcdsprpc.so stand-in). The main thread serves the host's requests one after the other, as a
 * session's FastRPC calls are served on the DSP: it loads the skel (OPEN), calls it (INVOKE,
 * CLOSE), maps the host's buffers (MMAP, MUNMAP) and keeps the queues (QUEUE_*), handing their
 * packets to the queues' threads. It ends on EOF: the host closed the session.
 *
 * Environment (the host program's, passed through): ADSP_LIBRARY_PATH where skels are found,
 * HEXBUILD_VNPU_LOG=1 a protocol trace on stderr, HEXBUILD_VNPU_FARF the lowest FARF level shown
 * (low, medium, high, error (the default), fatal). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>
#include <HAP_farf.h>

#include "../runtime/sys.h"
#include "vnpu.h"
#include "wire.h"

int vnpu_open_skel(const char *uri, uint32_t len, uint64_t *handle);      /* session.c */
int vnpu_invoke(uint64_t handle, uint32_t sc, uint32_t n_bufs, const uint32_t *sizes, const uint8_t *in,
                size_t in_len, uint8_t **out, size_t *out_len);
int vnpu_close_handle(uint64_t handle);
extern int hx_farf_level;

static int sock;

/* The hexagon (32-bit) layouts of the kernel's socket structures. */
struct iov32 { const void *base; uint32_t len; };
struct msghdr32 {
    void *name; uint32_t namelen; struct iov32 *iov; uint32_t iovlen; void *control; uint32_t controllen;
    int32_t flags;
};
struct cmsg32 { uint32_t len; int32_t level, type; int32_t fds[4]; };
#define MSG_PEEK 2
#define MSG_NOSIGNAL 0x4000
#define MSG_CMSG_CLOEXEC 0x40000000
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define EINTR 4

int vnpu_send(uint32_t type, uint32_t seq, const void *a, size_t a_len, const void *b, size_t b_len,
              const void *c, size_t c_len) {
    struct vnpu_hdr h = { type, seq, (uint32_t) (a_len + b_len + c_len) };
    struct iov32 iov[4] = { { &h, sizeof h }, { a, a_len }, { b, b_len }, { c, c_len } };
    struct msghdr32 m = { 0 };
    m.iov = iov;
    m.iovlen = 4;
    /* one packet, whole or not at all; several threads may send at once */
    long r;
    do {
        r = hx_syscall6(HX_SYS_SENDMSG, sock, (long) &m, MSG_NOSIGNAL, 0, 0, 0);
    } while (r == -EINTR);
    return r < 0 ? -1 : 0;
}

static void reply(const struct vnpu_hdr *req, int32_t status, const void *body, size_t len) {
    VNPU_TRACE("reply to %u (seq %u): status 0x%x, %u bytes", (unsigned) req->type, (unsigned) req->seq,
               (unsigned) status, (unsigned) len);
    vnpu_send(req->type | VNPU_REPLY, req->seq, &status, sizeof status, body, len, NULL, 0);
}

static void serve_invoke(const struct vnpu_hdr *h, const uint8_t *body) {
    const struct vnpu_invoke_req *r = (const void *) body;
    uint8_t *out = NULL;
    size_t out_len = 0;
    int status = AEE_EBADPARM;
    if (h->len >= sizeof *r && r->n_bufs <= 255 * 2 && (h->len - sizeof *r) / 4 >= r->n_bufs) {
        const uint32_t *sizes = (const uint32_t *) (body + sizeof *r);
        size_t head = sizeof *r + 4u * r->n_bufs;
        status = vnpu_invoke(r->handle, r->sc, r->n_bufs, sizes, body + head, h->len - head, &out, &out_len);
    }
    reply(h, status, out, out_len);
    free(out);
}

static void serve_mmap(const struct vnpu_hdr *h, const uint8_t *body, int fd) {
    struct vnpu_mmap_req r;
    uint32_t addr = 0;
    int status;
    if (h->len < sizeof r || fd < 0) {
        status = fd < 0 ? AEE_EINVALIDFD : AEE_EBADPARM;
        if (fd >= 0) hx_close(fd);
    } else {
        memcpy(&r, body, sizeof r);
        status = vnpu_map_add(r.host_fd, fd, r.offset, r.size, &addr);
        VNPU_TRACE("MMAP host fd %d [%llu, +%llu) -> 0x%x (status 0x%x)", (int) r.host_fd,
                   (unsigned long long) r.offset, (unsigned long long) r.size, (unsigned) addr, (unsigned) status);
    }
    reply(h, status, &addr, sizeof addr);
}

static void serve_queue_packet(const struct vnpu_hdr *h, const uint8_t *body) {
    struct vnpu_queue_packet p;
    if (h->len < sizeof p) {
        vnpu_log("a queue packet of %u bytes, shorter than its header: dropped", (unsigned) h->len);
        return;
    }
    memcpy(&p, body, sizeof p);
    uint64_t need = sizeof p + (uint64_t) p.n_bufs * sizeof(struct vnpu_wire_buf) + p.msg_len;
    if (need != h->len || p.n_bufs > 64) {
        vnpu_log("a queue packet whose sizes do not add up (%u buffers, %u message bytes in %u): dropped",
                 (unsigned) p.n_bufs, (unsigned) p.msg_len, (unsigned) h->len);
        return;
    }
    struct vnpu_wire_buf bufs[64];
    memcpy(bufs, body + sizeof p, p.n_bufs * sizeof bufs[0]);
    vnpu_queue_packet(p.queue_id, p.flags, p.n_bufs, bufs, p.msg_len, body + sizeof p + p.n_bufs * sizeof bufs[0]);
}

static void serve(const struct vnpu_hdr *h, const uint8_t *body, int fd) {
    uint64_t u64 = 0;
    int32_t i32 = -1;
    if (h->len >= 8) memcpy(&u64, body, 8);
    if (h->len >= 4) memcpy(&i32, body, 4);
    VNPU_TRACE("request %u (seq %u, %u bytes)", (unsigned) h->type, (unsigned) h->seq, (unsigned) h->len);
    if (h->type != VNPU_MMAP && fd >= 0) hx_close(fd);
    switch (h->type) {
        case VNPU_OPEN: {
            uint64_t handle = 0;
            int status = vnpu_open_skel((const char *) body, h->len, &handle);
            reply(h, status, &handle, sizeof handle);
            break;
        }
        case VNPU_INVOKE: serve_invoke(h, body); break;
        case VNPU_CLOSE: reply(h, h->len >= 8 ? vnpu_close_handle(u64) : AEE_EBADPARM, NULL, 0); break;
        case VNPU_MMAP: serve_mmap(h, body, fd); break;
        case VNPU_MUNMAP: reply(h, h->len >= 4 ? vnpu_map_remove(i32) : AEE_EBADPARM, NULL, 0); break;
        case VNPU_QUEUE_OPEN: reply(h, h->len >= 8 ? vnpu_queue_open(u64) : AEE_EBADPARM, NULL, 0); break;
        case VNPU_QUEUE_CLOSE: reply(h, h->len >= 8 ? vnpu_queue_close(u64) : AEE_EBADPARM, NULL, 0); break;
        case VNPU_QUEUE_PACKET: serve_queue_packet(h, body); break;
        case VNPU_CLOSE_SESSION:
            reply(h, AEE_SUCCESS, NULL, 0);
            hx_exit(0);
        default:
            vnpu_log("a message of unknown type %u: %s", (unsigned) h->type,
                     h->type & VNPU_REPLY ? "ignored" : "refused");
            if (!(h->type & VNPU_REPLY)) reply(h, AEE_EUNSUPPORTED, NULL, 0);
            break;
    }
}

static void farf_level_from_env(void) {
    static const char *names[] = { "low", "medium", "high", "error", "fatal" };
    const char *v = getenv("HEXBUILD_VNPU_FARF");
    for (int i = 0; v && i < 5; i++) {
        if (strcmp(v, names[i]) == 0 || (v[0] == '0' + i && !v[1])) hx_farf_level = i;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        vnpu_log("usage: runtime SOCKET-FD (started by the host library, libcdsprpc.so)");
        return 2;
    }
    sock = atoi(argv[1]);
    vnpu_fault_handlers();
    const char *trace = getenv("HEXBUILD_VNPU_LOG");
    vnpu_tracing = trace && *trace && strcmp(trace, "0") != 0;
    farf_level_from_env();
    for (;;) {
        struct vnpu_hdr h;
        struct iov32 iov = { &h, sizeof h };
        struct msghdr32 m = { 0 };
        m.iov = &iov;
        m.iovlen = 1;
        /* the header first, left in the socket: it says how large the packet is */
        long n = hx_syscall6(HX_SYS_RECVMSG, sock, (long) &m, MSG_PEEK, 0, 0, 0);
        if (n == -EINTR) continue;
        if (n == 0) break;  /* EOF: the host closed the session */
        if (n < 0) {
            vnpu_log("reading the host's socket (fd %d) failed: error %ld", sock, -n);
            return 1;
        }
        uint32_t len = n >= (long) sizeof h ? h.len : 0;
        uint8_t *buf = malloc(sizeof h + len + 1);
        if (!buf) {
            vnpu_log("no memory for a message of %u bytes", (unsigned) len);
            return 1;
        }
        struct cmsg32 cm;
        memset(&cm, 0, sizeof cm);
        iov = (struct iov32) { buf, (uint32_t) sizeof h + len };
        m = (struct msghdr32) { 0 };
        m.iov = &iov;
        m.iovlen = 1;
        m.control = &cm;
        m.controllen = sizeof cm;
        do {
            n = hx_syscall6(HX_SYS_RECVMSG, sock, (long) &m, MSG_CMSG_CLOEXEC, 0, 0, 0);
        } while (n == -EINTR);
        int fd = -1;
        if (m.controllen >= 16 && cm.level == SOL_SOCKET && cm.type == SCM_RIGHTS) {
            fd = cm.fds[0];
            for (uint32_t i = 1; i < (cm.len - 12) / 4 && i < 4; i++) hx_close(cm.fds[i]);
        }
        if (n < (long) sizeof h || (uint32_t) n != sizeof h + h.len) {
            vnpu_log("a message of %ld bytes whose header says %u: dropped", n, (unsigned) (sizeof h + len));
            if (fd >= 0) hx_close(fd);
            free(buf);
            if (n <= 0) break;
            continue;
        }
        memcpy(&h, buf, sizeof h);
        buf[sizeof h + len] = 0;  /* an OPEN's uri may come without its NUL */
        serve(&h, buf + sizeof h, fd);
        free(buf);
    }
    VNPU_TRACE("the host closed the session: exiting");
    return 0;
}
