/* hexbuild's stand-in libcdsprpc.so: the rest of libcdsprpc's exports (qualcomm/fastrpc
 * src/symbols.lst) that llama.cpp does not use. A program that calls one gets AEE_EUNSUPPORTED (or
 * the call's own failure value) and one line naming it, once; buffer registration, a hint that
 * spares FastRPC a copy, is accepted since invokes here always copy. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vnpu_host.h"

typedef uint64_t fastrpc_async_jobid;
struct fastrpc_async_descriptor;

#define UNSUPPORTED(name)                                                                \
    do {                                                                                 \
        static int said_;                                                                \
        vnpu_say_once(said_, "%s is not supported by the virtual NPU", name);            \
    } while (0)

VNPU_API int remote_mmap(int fd, uint32_t flags, uint32_t vaddrin, int size, uint32_t *vaddrout) {
    (void) fd, (void) flags, (void) vaddrin, (void) size, (void) vaddrout;
    UNSUPPORTED("remote_mmap (use fastrpc_mmap)");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_munmap(uint32_t vaddrout, int size) {
    (void) vaddrout, (void) size;
    UNSUPPORTED("remote_munmap (use fastrpc_munmap)");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_mmap64(int fd, uint32_t flags, uint64_t vaddrin, int64_t size, uint64_t *vaddrout) {
    (void) fd, (void) flags, (void) vaddrin, (void) size, (void) vaddrout;
    UNSUPPORTED("remote_mmap64 (use fastrpc_mmap)");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_munmap64(uint64_t vaddrout, int64_t size) {
    (void) vaddrout, (void) size;
    UNSUPPORTED("remote_munmap64 (use fastrpc_munmap)");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_mem_map(int domain, int fd, int flags, uint64_t virtAddr, size_t size, uint64_t *remoteVirtAddr) {
    (void) domain, (void) fd, (void) flags, (void) virtAddr, (void) size, (void) remoteVirtAddr;
    UNSUPPORTED("remote_mem_map (use fastrpc_mmap)");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_mem_unmap(int domain, uint64_t remoteVirtAddr, size_t size) {
    (void) domain, (void) remoteVirtAddr, (void) size;
    UNSUPPORTED("remote_mem_unmap (use fastrpc_munmap)");
    return AEE_EUNSUPPORTED;
}

VNPU_API void remote_register_buf(void *buf, int size, int fd) { (void) buf, (void) size, (void) fd; }
VNPU_API void remote_register_buf_attr(void *buf, int size, int fd, int attr) {
    (void) buf, (void) size, (void) fd, (void) attr;
}
VNPU_API void remote_register_buf_attr2(void *buf, size_t size, int fd, int attr) {
    (void) buf, (void) size, (void) fd, (void) attr;
}

VNPU_API int remote_register_dma_handle(int fd, uint32_t len) {
    (void) fd, (void) len;
    UNSUPPORTED("remote_register_dma_handle (DMA handle arguments)");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_register_dma_handle_attr(int fd, uint32_t len, uint32_t attr) {
    (void) fd, (void) len, (void) attr;
    UNSUPPORTED("remote_register_dma_handle_attr (DMA handle arguments)");
    return AEE_EUNSUPPORTED;
}

VNPU_API void *remote_register_fd(int fd, int size) {
    (void) fd, (void) size;
    UNSUPPORTED("remote_register_fd");
    return (void *) -1; /* its failure value */
}

VNPU_API void *remote_register_fd2(int fd, size_t size) {
    (void) fd, (void) size;
    UNSUPPORTED("remote_register_fd2");
    return (void *) -1;
}

VNPU_API int remote_set_mode(uint32_t mode) {
    (void) mode;
    UNSUPPORTED("remote_set_mode");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_handle_invoke_async(remote_handle h, struct fastrpc_async_descriptor *desc, uint32_t sc,
                                        remote_arg *pra) {
    (void) h, (void) desc, (void) sc, (void) pra;
    UNSUPPORTED("remote_handle_invoke_async");
    return AEE_EUNSUPPORTED;
}

VNPU_API int remote_handle64_invoke_async(remote_handle64 h, struct fastrpc_async_descriptor *desc, uint32_t sc,
                                          remote_arg *pra) {
    (void) h, (void) desc, (void) sc, (void) pra;
    UNSUPPORTED("remote_handle64_invoke_async");
    return AEE_EUNSUPPORTED;
}

VNPU_API int fastrpc_async_get_status(fastrpc_async_jobid jobid, int timeout_us, int *result) {
    (void) jobid, (void) timeout_us, (void) result;
    UNSUPPORTED("fastrpc_async_get_status");
    return AEE_EUNSUPPORTED;
}

VNPU_API int fastrpc_release_async_job(fastrpc_async_jobid jobid) {
    (void) jobid;
    UNSUPPORTED("fastrpc_release_async_job");
    return AEE_EUNSUPPORTED;
}

VNPU_API AEEResult dspqueue_request(void *req) {
    (void) req;
    UNSUPPORTED("dspqueue_request (multi-domain queues)");
    return AEE_EUNSUPPORTED;
}

/* The host's FARF: the message on stderr, as FastRPC's log goes to the system log. */
static void farf(int level, const char *file, int line, const char *format, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, format, ap);
    const char *base = file ? strrchr(file, '/') : NULL;
    char out[1200];
    int n = snprintf(out, sizeof out, "farf(%d): %s:%d: %s\n", level, base ? base + 1 : file ? file : "?", line, msg);
    if (n > (int) sizeof out - 1) n = (int) sizeof out - 1;
    ssize_t w = write(2, out, (size_t) n);
    (void) w;
}

VNPU_API void HAP_debug_v2(int level, const char *file, int line, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    farf(level, file, line, format, ap);
    va_end(ap);
}

VNPU_API void HAP_debug_runtime(int level, const char *file, int line, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    farf(level, file, line, format, ap);
    va_end(ap);
}
