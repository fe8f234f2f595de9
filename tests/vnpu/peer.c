/* A host-side test peer of the virtual NPU's DSP runtime (hexbuild/dsp/vnpu): it starts the DSP
 * process as the host library does (a SOCK_SEQPACKET socketpair, the child's end as fd 3,
 * `QEMU -cpu CPU RUNTIME 3`) and speaks the wire protocol of issue 36 to it, as llama.cpp's host
 * library does through libcdsprpc.so: OPEN the skel, QUEUE_OPEN, MMAP the op-batch buffer, INVOKE
 * htp_iface_start, then per test case MMAP a buffer with its tensors, send the op batch as a
 * QUEUE_PACKET (the 0.3.28 format of htp-ops.h, compiled against the tree's own header), wait for
 * the skel's response packet, read the destination, INVOKE htp_iface_munmap and MUNMAP; at the
 * end INVOKE stop, QUEUE_CLOSE, MUNMAP, CLOSE and EOF. Before the cases it sends one packet that
 * names a buffer it never mapped, which the DSP must drop without ending the session.
 *
 *   peer run QEMU CPU RUNTIME CASES RESULTS   the kernel check's cases file in, its results file out
 *   peer open QEMU CPU RUNTIME URI            OPEN only: prints the status (bad-input tests)
 *   peer invoke QEMU CPU RUNTIME URI TEXT     OPEN, INVOKE method 2 (in: TEXT, out: 20 bytes), an
 *                                             unknown method, CLOSE (the loader's test skel)
 *
 * Cases and results are the kernel harness's files (hexbuild/dsp/harness/harness.c), so the tests
 * reuse hexbuild.kernels' case makers and references. Every step prints one line on stdout. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "htp-ops.h"
#include "../../hexbuild/dsp/vnpu/wire.h"

#define SC(method, nin, nout) (((uint32_t) (method) << 24) | ((uint32_t) (nin) << 16) | ((uint32_t) (nout) << 8))
#define QUEUE_ID 0x5151000000000007ull
#define MAX_SRC 6
#define TIMEOUT_MS 600000
#define DSPQUEUE_FLAGS (4 | 32)  /* FLUSH_SENDER | INVALIDATE_RECIPIENT, as llama.cpp sends it */

static int sock;
static uint32_t seq;
static uint8_t pending[65536];  /* a DSP -> host packet that arrived while a reply was awaited */
static ssize_t pending_len = -1;

static void die(const char *what) {
    printf("FAIL %s\n", what);
    exit(1);
}

static ssize_t recv_packet(uint8_t *buf, size_t cap, int timeout_ms) {
    struct pollfd p = { sock, POLLIN, 0 };
    if (poll(&p, 1, timeout_ms) != 1) die("no message from the DSP process in time");
    ssize_t n = recv(sock, buf, cap, 0);
    if (n <= 0) die("the DSP process closed its socket");
    return n;
}

/* One request; returns the reply's body (status first) in buf. */
static size_t request(uint32_t type, const void *body, size_t len, int fd, uint8_t *buf, size_t cap) {
    struct vnpu_hdr h = { type, ++seq, (uint32_t) len };
    struct iovec iov[2] = { { &h, sizeof h }, { (void *) body, len } };
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
    if (fd >= 0) {
        m.msg_control = cbuf;
        m.msg_controllen = sizeof cbuf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    if (sendmsg(sock, &m, MSG_NOSIGNAL) < 0) die("sendmsg");
    for (;;) {
        ssize_t n = recv_packet(buf, cap, TIMEOUT_MS);
        struct vnpu_hdr r;
        memcpy(&r, buf, sizeof r);
        if (r.type == VNPU_QUEUE_PACKET_DSP && pending_len < 0) {
            memcpy(pending, buf, (size_t) n);
            pending_len = n;
            continue;
        }
        if (r.type != (type | VNPU_REPLY) || r.seq != h.seq || r.len + sizeof r != (size_t) n) die("a reply out of order");
        memmove(buf, buf + sizeof r, r.len);
        return r.len;
    }
}

static int32_t status_of(const uint8_t *b) { int32_t s; memcpy(&s, b, 4); return s; }

static void send_packet(const void *body, size_t len) {
    struct vnpu_hdr h = { VNPU_QUEUE_PACKET, ++seq, (uint32_t) len };
    struct iovec iov[2] = { { &h, sizeof h }, { (void *) body, len } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
    if (sendmsg(sock, &m, MSG_NOSIGNAL) < 0) die("sendmsg");
}

static pid_t start_dsp(char **argv) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv)) die("socketpair");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(sv[1], 3);
        if (sv[0] != 3) close(sv[0]);
        if (sv[1] != 3) close(sv[1]);
        char *args[] = { argv[0], "-cpu", argv[1], argv[2], "3", NULL };
        execv(argv[0], args);
        _exit(127);
    }
    close(sv[1]);
    sock = sv[0];
    return pid;
}

static int finish(pid_t pid) {
    close(sock);
    int st;
    waitpid(pid, &st, 0);
    printf("exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static uint64_t open_skel(const char *uri, int32_t *status) {
    uint8_t buf[64];
    size_t n = request(VNPU_OPEN, uri, strlen(uri) + 1, -1, buf, sizeof buf);
    uint64_t handle = 0;
    *status = status_of(buf);
    if (n >= 12) memcpy(&handle, buf + 4, 8);
    printf("OPEN status 0x%x\n", (unsigned) *status);
    return handle;
}

static int32_t invoke(uint64_t handle, uint32_t sc, const void *prim, uint32_t prim_len) {
    uint8_t msg[64], buf[64];
    uint32_t n_bufs = prim_len ? 1 : 0;
    memcpy(msg, &handle, 8);
    memcpy(msg + 8, &sc, 4);
    memcpy(msg + 12, &n_bufs, 4);
    memcpy(msg + 16, &prim_len, 4);
    memcpy(msg + 16 + 4 * n_bufs, prim, prim_len);
    request(VNPU_INVOKE, msg, 16 + 4 * n_bufs + prim_len, -1, buf, sizeof buf);
    return status_of(buf);
}

static uint32_t mmap_fd(int fd, uint64_t size) {
    struct vnpu_mmap_req r = { fd, 0, 0, size };
    uint8_t buf[64];
    request(VNPU_MMAP, &r, sizeof r, fd, buf, sizeof buf);
    uint32_t addr;
    memcpy(&addr, buf + 4, 4);
    if (status_of(buf)) die("MMAP");
    return addr;
}

static void simple(uint32_t type, const void *body, size_t len, const char *what) {
    uint8_t buf[64];
    request(type, body, len, -1, buf, sizeof buf);
    printf("%s status 0x%x\n", what, (unsigned) status_of(buf));
    if (status_of(buf)) exit(1);
}

struct case_tensor { uint32_t type, ne[4], nb[4], nbytes; };
struct case_head { uint32_t id; char op[32]; uint32_t n_threads, flags; int32_t params[16]; uint32_t n_src; };
struct result_head { uint32_t id; int32_t status; uint32_t nbytes, reserved; uint64_t ns, pcycles; };

#define OPS(X) X(MUL) X(ADD) X(SUB) X(DIV) X(MUL_MAT) X(MUL_MAT_ID) X(RMS_NORM) X(UNARY_SILU) X(SOFTMAX) X(ROPE) \
    X(SCALE) X(CPY) X(GET_ROWS) X(SET_ROWS)
static int op_code(const char *name) {
#define ROW(n) if (!strcmp(name, #n)) return HTP_OP_##n;
    OPS(ROW)
    return -1;
}

static size_t up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static void run_case(FILE *in, FILE *out, int shm_fd, uint8_t *shm, uint64_t handle) {
    struct case_head h;
    struct case_tensor t[MAX_SRC + 1];
    if (fread(&h, sizeof h, 1, in) != 1 || h.n_src > MAX_SRC || fread(t, sizeof t[0], h.n_src + 1, in) != h.n_src + 1)
        die("truncated cases file");
    size_t off[MAX_SRC + 1], total = 0;
    for (uint32_t i = 0; i <= h.n_src; i++) {
        off[i] = total;
        total = up(total + t[i].nbytes, 4096);
    }
    int fd = memfd_create("vnpu-tensors", 0);
    if (fd < 0 || ftruncate(fd, (off_t) total)) die("memfd");
    uint8_t *data = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    for (uint32_t i = 0; i < h.n_src; i++)
        if (fread(data + off[i], 1, t[i].nbytes, in) != t[i].nbytes) die("truncated cases file");
    memset(data + off[h.n_src], 0x7f, t[h.n_src].nbytes);  /* what the op never writes matches nothing */
    mmap_fd(fd, total);

    /* the op batch: one buffer, n_src + 1 tensors, one op, room for its profile */
    struct htp_opbatch_req req = { .id = h.id, .n_bufs = 1, .n_tensors = h.n_src + 1, .n_ops = 1 };
    struct htp_buf_desc *b = (void *) shm;
    struct htp_tensor *tens = (void *) (b + 1);
    struct htp_op_desc *op = (void *) (tens + h.n_src + 1);
    size_t batch = (uint8_t *) (op + 1) - shm + sizeof(struct htp_prof_desc);
    memset(shm, 0, batch);
    b->base = (uint64_t) (uintptr_t) data;
    b->size = total;
    b->fd = (uint32_t) fd;
    for (uint32_t i = 0; i <= h.n_src; i++) {
        tens[i] = (struct htp_tensor) { .data = (uint32_t) off[i], .size = t[i].nbytes, .type = (uint16_t) t[i].type, .bi = 0 };
        memcpy(tens[i].ne, t[i].ne, sizeof t[i].ne);
        memcpy(tens[i].nb, t[i].nb, sizeof t[i].nb);
    }
    int code = op_code(h.op);
    op->opcode = (uint32_t) code;
    op->flags = h.flags;
    memcpy(op->params, h.params, sizeof op->params);
    for (int i = 0; i < HTP_OP_MAX_INPUTS; i++) op->src[i] = i < (int) h.n_src ? (uint16_t) i : 0xffff;
    op->dst = (uint16_t) h.n_src;

    struct result_head r = { h.id, -1000, t[h.n_src].nbytes, 0, 0, 0 };
    if (code >= 0) {
        uint8_t msg[sizeof(struct vnpu_queue_packet) + sizeof(struct vnpu_wire_buf) + sizeof req];
        struct vnpu_queue_packet p = { QUEUE_ID, 0, 1, sizeof req };
        struct vnpu_wire_buf wb = { shm_fd, DSPQUEUE_FLAGS, 0, (uint32_t) batch };
        memcpy(msg, &p, sizeof p);
        memcpy(msg + sizeof p, &wb, sizeof wb);
        memcpy(msg + sizeof p + sizeof wb, &req, sizeof req);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        send_packet(msg, sizeof msg);
        uint8_t buf[65536];
        ssize_t n = pending_len >= 0 ? pending_len : recv_packet(buf, sizeof buf, TIMEOUT_MS);
        if (pending_len >= 0) memcpy(buf, pending, (size_t) n), pending_len = -1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        struct vnpu_hdr rh;
        struct vnpu_queue_packet rp;
        struct vnpu_wire_buf rb;
        struct htp_opbatch_rsp rsp;
        memcpy(&rh, buf, sizeof rh);
        memcpy(&rp, buf + sizeof rh, sizeof rp);
        memcpy(&rb, buf + sizeof rh + sizeof rp, sizeof rb);
        if (rh.type != VNPU_QUEUE_PACKET_DSP || rp.queue_id != QUEUE_ID || rp.n_bufs != 1 || rp.msg_len != sizeof rsp ||
            (size_t) n != sizeof rh + sizeof rp + sizeof rb + sizeof rsp)
            die("the DSP's response is not one buffer and an htp_opbatch_rsp");
        memcpy(&rsp, buf + sizeof rh + sizeof rp + sizeof rb, sizeof rsp);
        if (rb.fd != shm_fd || rb.offset != 0 || rsp.id != h.id) die("the response names another buffer or batch");
        r.status = rsp.status == HTP_STATUS_OK ? 0 : (int32_t) rsp.status;
        r.ns = (uint64_t) (t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t) (t1.tv_nsec - t0.tv_nsec);
        printf("case %u %s: response status %u in %.3f s\n", h.id, h.op, rsp.status, r.ns / 1e9);
    } else {
        r.nbytes = 0;
        printf("case %u %s: not an op of this peer\n", h.id, h.op);
    }
    fwrite(&r, sizeof r, 1, out);
    fwrite(data + off[h.n_src], 1, r.nbytes, out);

    uint32_t prim[2] = { (uint32_t) fd, 0 };  /* htp_iface_munmap(fd): the skel forgets its mapping */
    if (invoke(handle, SC(5, 1, 0), prim, 8)) die("htp_iface_munmap");
    int32_t hfd = fd;
    simple(VNPU_MUNMAP, &hfd, 4, "MUNMAP");
    munmap(data, total);
    close(fd);
}

static int run(char **argv) {
    FILE *in = fopen(argv[3], "rb"), *out = fopen(argv[4], "wb");
    char magic[4];
    uint32_t count;
    if (!in || !out || fread(magic, 4, 1, in) != 1 || memcmp(magic, "HXK1", 4) || fread(&count, 4, 1, in) != 1)
        die("cannot read the cases or write the results");
    fwrite("HXR1", 4, 1, out);
    fwrite(&count, 4, 1, out);
    pid_t pid = start_dsp(argv);
    int32_t status;
    char uri[256];  /* PEER_SKEL: another skel's name (libggml-htp-v79.so) */
    snprintf(uri, sizeof uri, "file:///%s?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0",
             getenv("PEER_SKEL") ? getenv("PEER_SKEL") : "libggml-htp-v73.so");
    uint64_t handle = open_skel(uri, &status);
    if (status) return finish(pid) | 1;
    uint64_t qid = QUEUE_ID;
    simple(VNPU_QUEUE_OPEN, &qid, 8, "QUEUE_OPEN");
    size_t shm_size = 1 << 20;
    int shm_fd = memfd_create("vnpu-opbatch", 0);
    if (shm_fd < 0 || ftruncate(shm_fd, (off_t) shm_size)) die("memfd");
    uint8_t *shm = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    printf("MMAP op-batch buffer at DSP 0x%x\n", (unsigned) mmap_fd(shm_fd, shm_size));
    /* start(sess_id, dsp_queue_id, n_hvx, use_hmx, max_vmem) packed as qaic packs it */
    uint8_t start[32] = { 0 };
    uint32_t n_hvx = getenv("PEER_NHVX") ? (uint32_t) atoi(getenv("PEER_NHVX")) : 0, use_hmx = 0;
    uint64_t max_vmem = 1u << 30;
    memcpy(start + 8, &qid, 8);
    memcpy(start + 16, &n_hvx, 4);
    memcpy(start + 20, &use_hmx, 4);
    memcpy(start + 24, &max_vmem, 8);
    status = invoke(handle, SC(2, 1, 0), start, sizeof start);
    printf("INVOKE start status 0x%x\n", (unsigned) status);
    if (status) return finish(pid) | 1;
    /* a packet naming a buffer the host never mapped: the DSP drops it, and the session goes on */
    uint8_t bad[sizeof(struct vnpu_queue_packet) + sizeof(struct vnpu_wire_buf) + 8] = { 0 };
    struct vnpu_queue_packet bp = { QUEUE_ID, 0, 1, 8 };
    struct vnpu_wire_buf bw = { 999, 0, 0, 64 };
    memcpy(bad, &bp, sizeof bp);
    memcpy(bad + sizeof bp, &bw, sizeof bw);
    send_packet(bad, sizeof bad);
    printf("sent a packet naming fd 999, never mapped\n");
    for (uint32_t c = 0; c < count; c++) run_case(in, out, shm_fd, shm, handle);
    printf("INVOKE stop status 0x%x\n", (unsigned) invoke(handle, SC(3, 0, 0), NULL, 0));
    simple(VNPU_QUEUE_CLOSE, &qid, 8, "QUEUE_CLOSE");
    int32_t hfd = shm_fd;
    simple(VNPU_MUNMAP, &hfd, 4, "MUNMAP");
    simple(VNPU_CLOSE, &handle, 8, "CLOSE");
    fclose(out);
    return finish(pid);
}

/* INVOKE method 2 with TEXT in and 20 bytes out, an unknown method, CLOSE. */
static int invoke_text(char **argv) {
    pid_t pid = start_dsp(argv);
    int32_t status;
    uint64_t handle = open_skel(argv[3], &status);
    if (status) return finish(pid) | 2;
    printf("OPEN handle 0x%llx\n", (unsigned long long) handle);
    const char *text = argv[4];
    uint32_t len = (uint32_t) strlen(text) + 1, out = 20, n = 2, sc = SC(2, 1, 1);
    uint8_t msg[4096], buf[4096];
    if (len > sizeof msg - 32) die("text too long");
    memcpy(msg, &handle, 8);
    memcpy(msg + 8, &sc, 4);
    memcpy(msg + 12, &n, 4);
    memcpy(msg + 16, &len, 4);
    memcpy(msg + 20, &out, 4);
    memcpy(msg + 24, text, len);
    size_t got = request(VNPU_INVOKE, msg, 24 + len, -1, buf, sizeof buf);
    uint32_t w[5] = { 0 };
    if (got == 4 + 20) memcpy(w, buf + 4, 20);
    printf("INVOKE status 0x%x, %u out bytes: %u %u %u %u %u\n", (unsigned) status_of(buf), (unsigned) got - 4, w[0],
           w[1], w[2], w[3], w[4]);
    printf("INVOKE method 9 status 0x%x\n", (unsigned) invoke(handle, SC(9, 0, 0), NULL, 0));
    printf("INVOKE unknown handle status 0x%x\n", (unsigned) invoke(handle + 1, SC(2, 0, 0), NULL, 0));
    simple(VNPU_CLOSE, &handle, 8, "CLOSE");
    return finish(pid);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 7 && !strcmp(argv[1], "run")) return run(argv + 2);
    if (argc == 6 && !strcmp(argv[1], "open")) {
        pid_t pid = start_dsp(argv + 2);
        int32_t status;
        open_skel(argv[5], &status);
        return finish(pid) | (status ? 2 : 0);
    }
    if (argc == 7 && !strcmp(argv[1], "invoke")) return invoke_text(argv + 2);
    fprintf(stderr, "usage: peer run QEMU CPU RUNTIME CASES RESULTS | peer open QEMU CPU RUNTIME URI | "
                    "peer invoke QEMU CPU RUNTIME URI TEXT\n");
    return 2;
}
