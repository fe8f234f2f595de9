/* hexbuild virtual NPU: what the skel imports from the SDK beyond ../runtime/hap.c, and the
 * runtime's own log lines.
 *   - HAP_mmap and friends map a host buffer by its fd: here every buffer the host shares is
 *     mapped already (MMAP, mem.c), so they return that mapping and unmapping is the host's MUNMAP.
 *   - Power, clocks, DCVS and ETM are accepted and said once to be not modelled. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <AEEStdErr.h>
#include <HAP_mem.h>

#include "../runtime/sys.h"
#include "vnpu.h"

int vnpu_tracing;

static void vlog(const char *prefix, const char *fmt, va_list ap) {
    char line[512];
    int n = snprintf(line, sizeof line, "%s", prefix);
    n += vsnprintf(line + n, sizeof line - (size_t) n - 1, fmt, ap);
    if (n > (int) sizeof line - 2) n = (int) sizeof line - 2;
    line[n++] = '\n';
    hx_write_all(2, line, (size_t) n);  /* one write: lines of several threads do not mix */
}

void vnpu_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("hexbuild-vnpu: ", fmt, ap);
    va_end(ap);
}

void vnpu_trace(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("hexbuild-vnpu: trace: dsp: ", fmt, ap);
    va_end(ap);
}

void vnpu_log_once(int *flag, const char *fmt, ...) {
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vlog("hexbuild-vnpu: ", fmt, ap);
    va_end(ap);
}

/* -- HAP_mmap: the host's buffers by fd -------------------------------------------------------- */
void *HAP_mmap2(void *addr, size_t len, int prot, int flags, int fd, long offset) {
    (void) addr; (void) prot; (void) flags;
    void *p = vnpu_map_addr(fd, (uint64_t) offset, len);
    if (!p) {
        vnpu_log("HAP_mmap: fd %d (offset %ld, %u bytes) is not a buffer the host mapped (fastrpc_mmap)", fd,
                 offset, (unsigned) len);
        return (void *) -1;
    }
    return p;
}

void *HAP_mmap(void *addr, int len, int prot, int flags, int fd, long offset) {
    return HAP_mmap2(addr, (size_t) (unsigned) len, prot, flags, fd, offset);
}

int HAP_munmap2(void *addr, size_t len) { (void) addr; (void) len; return 0; }
int HAP_munmap(void *addr, int len) { (void) addr; (void) len; return 0; }

int HAP_mmap_get(int fd, void **vaddr, uint64_t *paddr) {
    void *p = vnpu_map_addr(fd, 0, 0);
    if (!p) return AEE_ENOSUCHMAP;
    if (vaddr) *vaddr = p;
    if (paddr) *paddr = (uint64_t) (uintptr_t) p;  /* no IOMMU: the address is the address */
    return 0;
}
int HAP_mmap_put(int fd) { (void) fd; return 0; }

/* -- not modelled: accepted, said once ----------------------------------------------------------- */
static int power_said, etm_said;

int HAP_power_set(void *ctx, void *request) {
    (void) ctx; (void) request;
    vnpu_log_once(&power_said, "HAP_power_set: power, clocks and DCVS are not modelled (accepted)");
    return 0;
}

/* v79 skels mark their DCVS request's bus corners protected before HAP_power_set */
int HAP_set_dcvs_v3_protected_bus_corners(void *request, unsigned char protect) {
    (void) request; (void) protect;
    vnpu_log_once(&power_said, "HAP_power_set: power, clocks and DCVS are not modelled (accepted)");
    return 0;
}

int HAP_user_etm_enable(void) {
    vnpu_log_once(&etm_said, "HAP_user_etm_enable: ETM tracing is not modelled (accepted, nothing is traced)");
    return 0;
}
int HAP_user_etm_disable(void) { return 0; }
