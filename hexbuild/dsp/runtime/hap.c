/* hexbuild DSP runtime: what HTP code takes from the DSP's SDK (HAP) in both of the runtime's
 * programs, the kernel harness and the virtual NPU: FARF logging, timers, and the compute resource
 * manager with its VTCM. What is not modelled (clocks, priorities of a resource) is accepted. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>
#include <HAP_compute_res.h>
#include <HAP_farf.h>
#include <HAP_perf.h>

#include "sys.h"

/* -- logging: FARF lines go to stderr with the file and line, as the DSP log shows them ----- */
int hx_farf_level = HAP_LEVEL_ERROR;

void HAP_debug_v2(int level, const char *file, int line, const char *format, ...) {
    if ((level & 0xf) < (hx_farf_level & 0xf)) {
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(msg, sizeof msg, format, ap);
    va_end(ap);
    /* many FARF formats end in a newline of their own */
    for (n = n < (int) sizeof msg ? n : (int) sizeof msg - 1; n > 0 && msg[n - 1] == '\n'; n--) msg[n - 1] = 0;
    const char *base = strrchr(file, '/');
    fprintf(stderr, "dsp: %s:%d: %s\n", base ? base + 1 : file, line, msg);
}

void HAP_debug(const char *msg, int level, const char *file, int line) { HAP_debug_v2(level, file, line, "%s", msg); }

/* A skel asks for every level at run time (the 0.3.28 one at open): on a phone those lines go to
 * the DSP's log, here they would flood the host program's output, so the level stays the
 * runtime's (the harness's argument, the virtual NPU's HEXBUILD_VNPU_FARF). */
int HAP_setFARFRuntimeLoggingParams(unsigned int mask, const char *files[], unsigned short n) {
    (void) mask; (void) files; (void) n;
    return 0;
}

/* -- timers: the emulator's monotonic clock, in the QTimer's 19.2 MHz ticks ----------------- */
uint64_t HAP_perf_get_qtimer_count(void) { return (uint64_t) (hx_monotonic_ns() * 192 / 10000); }
uint64_t HAP_perf_qtimer_count_to_us(uint64_t count) { return count * 10 / 192; }
uint64_t HAP_perf_get_time_us(void) { return (uint64_t) hx_monotonic_ns() / 1000; }
uint64_t HAP_perf_get_pcycles(void) {
    uint32_t lo, hi;
    __asm__ volatile("%0 = upcyclelo\n%1 = upcyclehi" : "=r"(lo), "=r"(hi));
    return ((uint64_t) hi << 32) | lo;
}
void HAP_timer_sleep(unsigned long long us) { (void) us; }

/* -- compute resources: VTCM is a plain, aligned block of the heap ------------------------
 * 8 MiB on a 2 MiB boundary, as v73's VTCM; made once and kept (a session acquires and releases
 * it around every batch). The emulator's user DMA and HVX treat it as ordinary memory. */
#define VTCM_SIZE  (8u << 20)
#define VTCM_ALIGN (2u << 20)
static void *vtcm;
static hx_lock_t vtcm_lock = HX_LOCK_INIT;

static void *vtcm_block(void) {
    hx_lock(&vtcm_lock);
    if (!vtcm) vtcm = memalign(VTCM_ALIGN, VTCM_SIZE);
    hx_unlock(&vtcm_lock);
    return vtcm;
}

int HAP_compute_res_attr_init(compute_res_attr_t *attr) { memset(attr, 0, sizeof *attr); return 0; }
int HAP_compute_res_attr_set_serialize(compute_res_attr_t *a, unsigned char b) { (void) a; (void) b; return 0; }
int HAP_compute_res_attr_set_cache_mode(compute_res_attr_t *a, unsigned char b) { (void) a; (void) b; return 0; }
int HAP_compute_res_attr_set_vtcm_param(compute_res_attr_t *a, unsigned int s, unsigned char p) {
    (void) p;
    a->attributes[0] = s;
    return 0;
}
int HAP_compute_res_attr_set_vtcm_param_v2(compute_res_attr_t *a, unsigned int s, unsigned int p, unsigned int m) {
    (void) p; (void) m;
    a->attributes[0] = s;
    return 0;
}
int HAP_compute_res_attr_set_hmx_param(compute_res_attr_t *a, unsigned char b) { (void) a; (void) b; return 0; }
int HAP_compute_res_attr_set_release_callback(compute_res_attr_t *a, HAP_compute_res_release_callback_t cb, void *c) {
    (void) a; (void) cb; (void) c;
    return 0;
}
void *HAP_compute_res_attr_get_vtcm_ptr(compute_res_attr_t *a) { (void) a; return vtcm_block(); }
int HAP_compute_res_attr_get_vtcm_ptr_v2(compute_res_attr_t *a, void **ptr, unsigned int *size) {
    (void) a;
    *ptr = vtcm_block();
    if (size) *size = VTCM_SIZE;
    return *ptr ? 0 : AEE_ENOMEMORY;
}
unsigned int HAP_compute_res_acquire(compute_res_attr_t *a, unsigned int t) { (void) a; (void) t; return 1; }
int HAP_compute_res_release(unsigned int c) { (void) c; return 0; }
int HAP_compute_res_acquire_cached(unsigned int c, unsigned int t) { (void) c; (void) t; return 0; }
int HAP_compute_res_release_cached(unsigned int c) { (void) c; return 0; }
int HAP_compute_res_update_priority(unsigned int c, unsigned short p) { (void) c; (void) p; return 0; }
int HAP_compute_res_query_VTCM(unsigned int app, unsigned int *total, void *layout, unsigned int *avail, void *al) {
    (void) app; (void) layout; (void) al;
    if (total) *total = VTCM_SIZE;
    if (avail) *avail = VTCM_SIZE;
    return 0;
}
int HAP_compute_res_hmx_lock(unsigned int c) { (void) c; return AEE_EUNSUPPORTED; }
int HAP_compute_res_hmx_unlock(unsigned int c) { (void) c; return AEE_EUNSUPPORTED; }

