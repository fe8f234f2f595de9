/* hexbuild virtual NPU: QuRT for the skel, with real threads. qemu-hexagon's linux-user mode runs
 * every guest thread as a host thread, so a QuRT thread is a Linux thread (clone) of the DSP
 * process, a QuRT futex is a Linux futex, and the skel's worker pool really runs its jobs in
 * parallel, racing as on the DSP.
 *
 * A thread's identity (qurt_thread_t) is its Linux thread id: what qurt_thread_get_id() returns
 * inside the thread is what qurt_thread_create() gave its creator. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>
#include <qurt.h>

#include "../runtime/sys.h"
#include "vnpu.h"

#define CLONE_THREAD_FLAGS 0x00050f00u   /* VM | FS | FILES | SIGHAND | THREAD | SYSVSEM */
#define CLONE_PARENT_SETTID 0x00100000u
#define CLONE_CHILD_CLEARTID 0x00200000u
#define DEFAULT_STACK (256u << 10)
#define QURT_EOK 0
#define QURT_EINVALID 4
#define QURT_ENOTHREAD 6
#define QURT_EFAILED 12

struct hx_thread {
    volatile int tid;            /* written by clone (PARENT_SETTID), zeroed and woken at exit */
    int id;                      /* the thread id, kept after exit */
    int status;                  /* qurt_thread_exit's argument */
    unsigned short prio;
    void (*entry)(void *);
    void *arg;
    void *own_stack;             /* a stack this runtime mapped (none when the caller gave one) */
    size_t own_size;
    struct hx_thread *next;
};

static hx_lock_t threads_lock = HX_LOCK_INIT;
static struct hx_thread *threads;
static unsigned short main_prio = QURT_THREAD_ATTR_PRIORITY_DEFAULT;

/* clone(flags, stack, parent_tid, child_tid, tls) as qemu-hexagon orders it. The child starts on
 * its new stack with the parent's registers (r0 = 0): it takes the function and its argument from
 * the top of that stack, calls it, and ends only itself (exit, not exit_group). Naked: the child
 * must not touch a frame of the parent's. */
__attribute__((naked)) static long clone_raw(unsigned long flags, void *stack, volatile int *ptid,
                                             volatile int *ctid, void *tls) {
    __asm__ volatile("r6 = #220\n"
                     "trap0(#1)\n"
                     "p0 = cmp.eq(r0, #0)\n"
                     "if (!p0) jumpr r31\n"
                     "r1 = memw(r29 + #0)\n"
                     "r0 = memw(r29 + #4)\n"
                     "callr r1\n"
                     "r0 = #0\n"
                     "r6 = #93\n"
                     "trap0(#1)\n");
}

static void thread_main(void *arg) {
    struct hx_thread *t = arg;
    t->entry(t->arg);
}

static struct hx_thread *find_locked(int id) {
    for (struct hx_thread *t = threads; t; t = t->next) {
        if (t->id == id) return t;
    }
    return NULL;
}

int qurt_thread_create(qurt_thread_t *tid, qurt_thread_attr_t *attr, void (*entry)(void *), void *arg) {
    struct hx_thread *t = calloc(1, sizeof *t);
    if (!t) return QURT_EFAILED;
    t->entry = entry;
    t->arg = arg;
    t->prio = attr ? attr->priority : QURT_THREAD_ATTR_PRIORITY_DEFAULT;
    unsigned char *stack = attr ? attr->stack_addr : NULL;
    size_t size = attr && attr->stack_addr ? attr->stack_size : 0;
    if (!stack || size < 4096) {
        size = attr && attr->stack_size > DEFAULT_STACK ? attr->stack_size : DEFAULT_STACK;
        stack = t->own_stack = hx_mmap_anon(size);
        t->own_size = size;
        if (!stack) {
            free(t);
            return QURT_EFAILED;
        }
    }
    uint32_t *top = (uint32_t *) (((uintptr_t) stack + size - 8) & ~(uintptr_t) 7);
    top[0] = (uint32_t) (uintptr_t) thread_main;
    top[1] = (uint32_t) (uintptr_t) t;
    /* on the list before it runs: the thread may look itself up at once */
    hx_lock(&threads_lock);
    t->next = threads;
    threads = t;
    long r = clone_raw(CLONE_THREAD_FLAGS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID, top, &t->tid, &t->tid, NULL);
    if (!hx_failed(r)) t->id = (int) r;
    else threads = t->next;
    hx_unlock(&threads_lock);
    if (hx_failed(r)) {
        vnpu_log("qurt_thread_create: clone failed (%ld)", r);
        if (t->own_stack) hx_munmap(t->own_stack, t->own_size);
        free(t);
        return QURT_EFAILED;
    }
    VNPU_TRACE("thread %ld started: '%s', %u-byte stack (%s)", r, attr ? attr->name : "", (unsigned) size,
               t->own_stack ? "the runtime's" : "the caller's");
    *tid = (qurt_thread_t) r;
    return QURT_EOK;
}

int qurt_thread_join(unsigned int tid, int *status) {
    hx_lock(&threads_lock);
    struct hx_thread *t = find_locked((int) tid);
    hx_unlock(&threads_lock);
    if (!t) return QURT_ENOTHREAD;
    for (int v; (v = t->tid) != 0;) {
        hx_futex(&t->tid, HX_FUTEX_WAIT, v, NULL);  /* shared: the exit's wake is */
    }
    if (status) *status = t->status;
    VNPU_TRACE("thread %d joined", t->id);
    hx_lock(&threads_lock);
    for (struct hx_thread **p = &threads; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    hx_unlock(&threads_lock);
    if (t->own_stack) hx_munmap(t->own_stack, t->own_size);
    free(t);
    return QURT_EOK;
}

void qurt_thread_exit(int status) {
    int self = (int) hx_gettid();
    hx_lock(&threads_lock);
    struct hx_thread *t = find_locked(self);
    if (t) t->status = status;
    hx_unlock(&threads_lock);
    if (!t) hx_exit(status);  /* the process's first thread: QuRT would end the process too */
    hx_syscall6(HX_SYS_EXIT, 0, 0, 0, 0, 0, 0);
    for (;;) {
    }
}

qurt_thread_t qurt_thread_get_id(void) { return (qurt_thread_t) hx_gettid(); }

/* Priorities are kept and reported (the skel sets its workers' from its own), not scheduled: the
 * host's scheduler runs the threads. */
int qurt_thread_get_priority(qurt_thread_t id) {
    hx_lock(&threads_lock);
    struct hx_thread *t = find_locked((int) id);
    int p = t ? t->prio : main_prio;
    hx_unlock(&threads_lock);
    return p;
}

int qurt_thread_set_priority(qurt_thread_t id, unsigned short prio) {
    hx_lock(&threads_lock);
    struct hx_thread *t = find_locked((int) id);
    if (t) t->prio = prio;
    else main_prio = prio;
    hx_unlock(&threads_lock);
    return QURT_EOK;
}

void qurt_sleep(unsigned long long us) { hx_sleep_us(us); }

/* QuRT's futexes are process-private words, as Linux's private futexes are. */
int qurt_futex_wait(void *lock, int val) {
    long r = hx_futex_wait(lock, val);
    return r == 0 || r == -11 /* EAGAIN: the value had changed */ || r == -4 /* EINTR */ ? 0 : (int) r;
}
int qurt_futex_wait_cancellable(void *lock, int val) { return qurt_futex_wait(lock, val); }
int qurt_futex_wake(void *lock, int n) {
    long r = hx_futex_wake(lock, n);
    return r < 0 ? (int) r : 0;
}

/* The hardware a v73 cDSP reports: 6 hardware threads, 4 HVX contexts of 128 bytes (QuRT puts
 * the 128-byte count in bits 8-15). The skel sizes its worker pool from them; the host's cores
 * run the threads. */
int qurt_sysenv_get_max_hw_threads(qurt_sysenv_max_hthreads_t *m) {
    m->max_hthreads = 6;
    return QURT_EOK;
}
int qurt_hvx_get_units(void) { return 4 << 8; }
int qurt_hvx_lock(qurt_hvx_mode_t m) { (void) m; return QURT_EOK; }
int qurt_hvx_unlock(void) { return QURT_EOK; }
int qurt_hvx_try_lock(qurt_hvx_mode_t m) { (void) m; return QURT_EOK; }
int qurt_hvx_get_mode(void) { return QURT_HVX_MODE_128B; }
int qurt_hvx_reserve(int n) { return n; }
int qurt_hvx_cancel_reserve(void) { return QURT_EOK; }

/* The emulator has no caches to clean: memory is coherent between the threads and with the host. */
int qurt_mem_cache_clean(qurt_addr_t a, qurt_size_t s, qurt_mem_cache_op_t op, qurt_mem_cache_type_t t) {
    (void) a; (void) s; (void) op; (void) t;
    return QURT_EOK;
}

/* No performance counters: reads are 0, said once, never a made-up figure. */
static int pmu_said;
void qurt_pmu_set(int reg, unsigned int v) {
    (void) reg; (void) v;
    vnpu_log_once(&pmu_said, "the PMU is not modelled: its counters read 0");
}
unsigned int qurt_pmu_get(int reg) {
    (void) reg;
    vnpu_log_once(&pmu_said, "the PMU is not modelled: its counters read 0");
    return 0;
}
void qurt_pmu_enable(int enable) {
    (void) enable;
    vnpu_log_once(&pmu_said, "the PMU is not modelled: its counters read 0");
}
int qurt_pmu_get_pmucnt(unsigned int *buf) {
    memset(buf, 0, 8 * sizeof *buf);
    vnpu_log_once(&pmu_said, "the PMU is not modelled: its counters read 0");
    return QURT_EOK;
}
