/* hexbuild DSP runtime: QuRT and the HTP code's worker pool for the kernel harness, on one
 * emulated hardware thread. The kernel check runs an op's worker jobs one after the other (the
 * ops split work by job index and share nothing between jobs until the call returns), so a worker
 * pool, threads and futexes need no scheduler here. (The virtual NPU has real threads instead:
 * ../vnpu/qurt.c.) */
#include <stdint.h>
#include <stdlib.h>

#include <AEEStdErr.h>
#include <qurt.h>

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
