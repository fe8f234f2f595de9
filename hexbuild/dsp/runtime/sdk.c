/* hexbuild DSP runtime: what HTP code takes from the DSP's SDK and QuRT, for one emulated
 * hardware thread. The kernel check runs an op's worker jobs one after the other (the ops split
 * work by job index and share nothing between jobs until the call returns), so a worker pool,
 * threads and futexes need no scheduler here. What is not modelled (power, clocks, ETM, PMU) is
 * accepted and reports success. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>
#include <HAP_compute_res.h>
#include <HAP_farf.h>
#include <HAP_perf.h>
#include <qurt.h>

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
    vsnprintf(msg, sizeof msg, format, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(stderr, "dsp: %s:%d: %s\n", base ? base + 1 : file, line, msg);
}

void HAP_debug(const char *msg, int level, const char *file, int line) { HAP_debug_v2(level, file, line, "%s", msg); }

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

/* -- compute resources: VTCM is a plain, aligned block of the heap ------------------------ */
#define VTCM_SIZE (8u << 20)
static void *vtcm;

static void *vtcm_block(void) {
    if (!vtcm) vtcm = memalign(1u << 20, VTCM_SIZE);
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

/* -- QuRT: one hardware thread ------------------------------------------------------------ */
int qurt_thread_create(qurt_thread_t *tid, qurt_thread_attr_t *attr, void (*entry)(void *), void *arg) {
    /* No scheduler: a thread runs to its end when created (the harness never waits on one). */
    (void) attr;
    static qurt_thread_t next = 2;
    *tid = next++;
    entry(arg);
    return 0;
}
int qurt_thread_join(unsigned int tid, int *status) { (void) tid; if (status) *status = 0; return 0; }
void qurt_thread_exit(int status) { (void) status; }
qurt_thread_t qurt_thread_get_id(void) { return 1; }
int qurt_thread_get_priority(qurt_thread_t t) { (void) t; return QURT_THREAD_ATTR_PRIORITY_DEFAULT; }
int qurt_thread_set_priority(qurt_thread_t t, unsigned short p) { (void) t; (void) p; return 0; }
void qurt_sleep(unsigned long long us) { (void) us; }
int qurt_futex_wait(void *lock, int val) { (void) lock; (void) val; return 0; }
int qurt_futex_wait_cancellable(void *lock, int val) { (void) lock; (void) val; return 0; }
int qurt_futex_wake(void *lock, int n) { (void) lock; (void) n; return 0; }
int qurt_hvx_lock(qurt_hvx_mode_t m) { (void) m; return 0; }
int qurt_hvx_unlock(void) { return 0; }
int qurt_hvx_try_lock(qurt_hvx_mode_t m) { (void) m; return 0; }
int qurt_hvx_get_mode(void) { return QURT_HVX_MODE_128B; }
int qurt_hvx_get_units(void) { return 4; }
int qurt_hvx_reserve(int n) { return n; }
int qurt_hvx_cancel_reserve(void) { return 0; }
int qurt_mem_cache_clean(qurt_addr_t a, qurt_size_t s, qurt_mem_cache_op_t op, qurt_mem_cache_type_t t) {
    (void) a; (void) s; (void) op; (void) t;
    return 0;
}

/* -- the worker pool of the HTP code: jobs 0..n-1 of a call, one after the other ------------ */
typedef void (*worker_callback_t)(unsigned int n, unsigned int i, void *);
typedef struct { worker_callback_t func; void *data; } worker_pool_job_t;

int worker_pool_init(void **ctx, uint32_t n) { (void) n; *ctx = (void *) 1; return 0; }
int worker_pool_init_with_stack_size(void **ctx, uint32_t n, uint32_t s) { (void) s; return worker_pool_init(ctx, n); }
void worker_pool_release(void **ctx) { *ctx = NULL; }
int worker_pool_run_func(void *ctx, worker_callback_t func, void *data, unsigned int n) {
    (void) ctx;
    for (unsigned int i = 0; i < n; i++) func(n, i, data);
    return 0;
}
int worker_pool_run_jobs(void *ctx, worker_pool_job_t *jobs, unsigned int n) {
    (void) ctx;
    for (unsigned int i = 0; i < n; i++) jobs[i].func(n, i, jobs[i].data);
    return 0;
}
int worker_pool_set_thread_priority(void *ctx, unsigned int p) { (void) ctx; (void) p; return 0; }
int worker_pool_get_thread_priority(void *ctx, unsigned int *p) { (void) ctx; *p = QURT_THREAD_ATTR_PRIORITY_DEFAULT; return 0; }
int worker_pool_retrieve_thread_id(void *ctx, unsigned int *tids) { (void) ctx; (void) tids; return 0; }
