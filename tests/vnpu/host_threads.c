/* Many threads on one session of hexbuild's libcdsprpc.so (hexbuild/dsp/host/), for
 * ThreadSanitizer: invokes from 8 threads, two queue writers and a reader on one queue, buffers
 * allocated, mapped, unmapped and freed meanwhile, then the DSP process crashes under a waiting
 * reader and an invoke. Run against tests/infra/vnpu_stub_dsp.py (HEXBUILD_VNPU_QEMU); prints
 * "ok" and exits 0, or names the first failed check and exits 1. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../hexbuild/dsp/include/AEEStdErr.h"
#include "../../hexbuild/dsp/include/dspqueue.h"
#include "../../hexbuild/dsp/include/remote.h"
#include "../../hexbuild/dsp/include/rpcmem.h"

#define SC(method, nin, nout) (((uint32_t) (method) << 24) | ((uint32_t) (nin) << 16) | ((uint32_t) (nout) << 8))
#define N_INVOKERS 8
#define N_INVOKES 40
#define N_WRITERS 2
#define N_PACKETS 50

static remote_handle64 h;
static dspqueue_t q;
static int shm_fd;
static int failed;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void check(int ok, const char *what, int err) {
    if (ok) return;
    pthread_mutex_lock(&fail_mu);
    if (!failed) fprintf(stderr, "host_threads: %s (0x%x)\n", what, (unsigned) err);
    failed = 1;
    pthread_mutex_unlock(&fail_mu);
}

static void *invoker(void *arg) {
    long id = (long) arg;
    for (int i = 0; i < N_INVOKES; i++) {
        char in[32], out[32], want[32];
        int n = snprintf(in, sizeof in, "thread %ld call %d", id, i);
        for (int k = 0; k < n; k++) want[k] = in[n - 1 - k];
        remote_arg a[2] = {{.buf = {in, (size_t) n}}, {.buf = {out, (size_t) n}}};
        int err = remote_handle64_invoke(h, SC(2, 1, 1), a);
        check(err == 0 && memcmp(out, want, (size_t) n) == 0, "an invoke's echo", err);
    }
    return NULL;
}

static void *writer(void *arg) {
    long id = (long) arg;
    for (int i = 0; i < N_PACKETS; i++) {
        struct dspqueue_buffer b = {.fd = (uint32_t) shm_fd, .size = 64, .offset = (uint32_t) (64 * id)};
        uint32_t msg = (uint32_t) (id << 16 | i);
        int err = dspqueue_write(q, 0, 1, &b, sizeof msg, (const uint8_t *) &msg, DSPQUEUE_TIMEOUT_NONE);
        check(err == 0, "a queue write", err);
    }
    return NULL;
}

static void *reader(void *arg) {
    (void) arg;
    int next[N_WRITERS] = {0};
    for (int i = 0; i < N_WRITERS * N_PACKETS; i++) {
        struct dspqueue_buffer b;
        uint32_t flags, nb, len;
        uint8_t msg[4];
        int err = dspqueue_read(q, &flags, 1, &nb, &b, sizeof msg, &len, msg, 10 * 1000 * 1000);
        check(err == 0 && nb == 1 && len == 4, "a queue read", err);
        if (err) return NULL;
        uint32_t v = (uint32_t) msg[0] << 24 | (uint32_t) msg[1] << 16 | (uint32_t) msg[2] << 8 | msg[3]; /* reversed */
        uint32_t w = v >> 16, k = v & 0xffff;
        /* each writer's packets come back in its order */
        check(w < N_WRITERS && (int) k == next[w]++, "the order of one writer's packets", (int) v);
        check(b.offset == 64 * w, "a response's buffer", (int) b.offset);
    }
    return NULL;
}

static void *mapper(void *arg) {
    (void) arg;
    for (int i = 0; i < 20; i++) {
        void *p = rpcmem_alloc2(RPCMEM_HEAP_ID_SYSTEM, RPCMEM_DEFAULT_FLAGS, 4096 * (size_t) (i + 1));
        int fd = rpcmem_to_fd(p);
        int err = fastrpc_mmap(CDSP_DOMAIN_ID, fd, p, 0, 4096 * (size_t) (i + 1), FASTRPC_MAP_FD);
        check(p && fd >= 0 && err == 0, "a map", err);
        err = fastrpc_munmap(CDSP_DOMAIN_ID, fd, p, 4096 * (size_t) (i + 1));
        check(err == 0, "an unmap", err);
        rpcmem_free(p);
    }
    return NULL;
}

static int waited;
static void *blocked_reader(void *arg) {
    (void) arg;
    struct dspqueue_buffer b;
    uint32_t flags, nb, len;
    uint8_t msg[4];
    __atomic_store_n(&waited, dspqueue_read(q, &flags, 1, &nb, &b, sizeof msg, &len, msg, DSPQUEUE_TIMEOUT_NONE),
                     __ATOMIC_SEQ_CST);
    return NULL;
}

int main(void) {
    int err = remote_handle64_open("file:///libstub.so?stub_skel_handle_invoke&_modver=1.0&_dom=cdsp", &h);
    check(err == 0, "open", err);
    void *shm = rpcmem_alloc(RPCMEM_HEAP_ID_SYSTEM, RPCMEM_DEFAULT_FLAGS, 1 << 16);
    shm_fd = rpcmem_to_fd(shm);
    err = fastrpc_mmap(CDSP_DOMAIN_ID, shm_fd, shm, 0, 1 << 16, FASTRPC_MAP_FD);
    check(err == 0, "map", err);
    err = dspqueue_create(CDSP_DOMAIN_ID, 0, 4096, 4096, NULL, NULL, NULL, &q);
    check(err == 0, "queue", err);
    if (failed) return 1;

    pthread_t t[N_INVOKERS + N_WRITERS + 2];
    int n = 0;
    for (long i = 0; i < N_INVOKERS; i++) pthread_create(&t[n++], NULL, invoker, (void *) i);
    for (long i = 0; i < N_WRITERS; i++) pthread_create(&t[n++], NULL, writer, (void *) i);
    pthread_create(&t[n++], NULL, reader, NULL);
    pthread_create(&t[n++], NULL, mapper, NULL);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);

    pthread_t br;
    pthread_create(&br, NULL, blocked_reader, NULL);
    usleep(200 * 1000);
    char x = 0;
    remote_arg a = {.buf = {&x, 1}};
    err = remote_handle64_invoke(h, SC(3, 1, 0), &a); /* the stub crashes */
    check(err == AEE_EINTERRUPTED, "the invoke the DSP process died under", err);
    pthread_join(br, NULL);
    check(waited == AEE_EINTERRUPTED, "the reader the DSP process died under", waited);
    check(dspqueue_close(q) == 0, "queue close", 0);
    check(remote_handle64_close(h) == 0, "close", 0);
    fastrpc_munmap(CDSP_DOMAIN_ID, shm_fd, shm, 1 << 16);
    rpcmem_free(shm);
    if (!failed) puts("ok");
    return failed;
}
