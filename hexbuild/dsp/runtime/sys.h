/* hexbuild DSP runtime: Linux system calls of a user-mode emulated Hexagon (trap0 #1, the number
 * in r6, arguments in r0-r5, the result in r0; numbers from the generic 32-bit table that
 * qemu-hexagon uses). Used only by this runtime: a DSP under QuRT has no Linux, and the harness
 * and the virtual NPU talk to their host through files and a socket. */
#ifndef HEXBUILD_DSP_SYS_H
#define HEXBUILD_DSP_SYS_H
#include <stddef.h>
#include <stdint.h>

#define HX_SYS_OPENAT        56
#define HX_SYS_CLOSE         57
#define HX_SYS_READ          63
#define HX_SYS_PWRITE64      68
#define HX_SYS_WRITE         64
#define HX_SYS_EXIT_GROUP    94
#define HX_SYS_CLOCK_GETTIME 113
#define HX_SYS_EXIT          93
#define HX_SYS_FUTEX         98
#define HX_SYS_NANOSLEEP     101
#define HX_SYS_SCHED_YIELD   124
#define HX_SYS_GETTID        178
#define HX_SYS_SENDMSG       211
#define HX_SYS_RECVMSG       212
#define HX_SYS_MUNMAP        215
#define HX_SYS_CLONE         220
#define HX_SYS_MMAP          222   /* mmap2: the offset counts 4096-byte pages */
#define HX_SYS_MPROTECT      226

static inline long hx_syscall6(long n, long a, long b, long c, long d, long e, long f) {
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r4 __asm__("r4") = e;
    register long r5 __asm__("r5") = f;
    register long r6 __asm__("r6") = n;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5), "r"(r6) : "memory");
    return r0;
}

static inline long hx_read(int fd, void *buf, size_t n) { return hx_syscall6(HX_SYS_READ, fd, (long) buf, (long) n, 0, 0, 0); }
static inline long hx_write(int fd, const void *buf, size_t n) { return hx_syscall6(HX_SYS_WRITE, fd, (long) buf, (long) n, 0, 0, 0); }
static inline long hx_pwrite(int fd, const void *buf, size_t n, long offset) {
    /* 64-bit offset in an aligned register pair (r3 is skipped) */
    return hx_syscall6(HX_SYS_PWRITE64, fd, (long) buf, (long) n, 0, offset, 0);
}
static inline long hx_close(int fd) { return hx_syscall6(HX_SYS_CLOSE, fd, 0, 0, 0, 0, 0); }
/* AT_FDCWD is -100; flags as in Linux's generic ABI */
#define HX_O_RDONLY 0
#define HX_O_WRONLY 1
#define HX_O_CREAT  0100
#define HX_O_TRUNC  01000
static inline long hx_open(const char *path, int flags, int mode) {
    return hx_syscall6(HX_SYS_OPENAT, -100, (long) path, flags, mode, 0, 0);
}
#define HX_PROT_RW     3
#define HX_PROT_RWX    7
#define HX_MAP_SHARED  0x01
#define HX_MAP_PRIVATE 0x02
#define HX_MAP_ANON    0x20
static inline int hx_failed(long r) { return r < 0 && r > -4096; }
static inline void *hx_mmap(size_t n, int prot, int flags, int fd, uint32_t page_offset) {
    long r = hx_syscall6(HX_SYS_MMAP, 0, (long) n, prot, flags, fd, (long) page_offset);
    return hx_failed(r) ? NULL : (void *) r;
}
static inline void *hx_mmap_anon(size_t n) { return hx_mmap(n, HX_PROT_RW, HX_MAP_PRIVATE | HX_MAP_ANON, -1, 0); }
static inline long hx_munmap(void *p, size_t n) { return hx_syscall6(HX_SYS_MUNMAP, (long) p, (long) n, 0, 0, 0, 0); }
static inline long hx_gettid(void) { return hx_syscall6(HX_SYS_GETTID, 0, 0, 0, 0, 0, 0); }

/* Futexes. The private ones are for words only this process's threads touch (locks, the worker
 * pool's counters); a thread's exit clears and wakes its tid word with a shared wake, so joins
 * wait with the shared operation (a private wait would never see that wake). */
#define HX_FUTEX_WAIT         0
#define HX_FUTEX_WAKE         1
#define HX_FUTEX_PRIVATE      128
static inline long hx_futex(volatile void *addr, int op, int val, const void *timeout) {
    return hx_syscall6(HX_SYS_FUTEX, (long) addr, op, val, (long) timeout, 0, 0);
}
static inline long hx_futex_wait(volatile void *addr, int val) {
    return hx_futex(addr, HX_FUTEX_WAIT | HX_FUTEX_PRIVATE, val, NULL);
}
static inline long hx_futex_wake(volatile void *addr, int n) {
    return hx_futex(addr, HX_FUTEX_WAKE | HX_FUTEX_PRIVATE, n, NULL);
}

/* A lock for the runtime's shared state (the heap, the virtual NPU's tables): free 0, taken 1,
 * taken with waiters 2 (Drepper, "Futexes are tricky"). Uncontended, it is one atomic exchange;
 * the single-threaded kernel harness never makes a system call for it. */
typedef struct { volatile int v; } hx_lock_t;
#define HX_LOCK_INIT { 0 }
static inline void hx_lock(hx_lock_t *l) {
    int c = 0;
    if (__atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        return;
    }
    if (c != 2) {
        c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
    }
    while (c != 0) {
        hx_futex_wait(&l->v, 2);
        c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
    }
}
static inline void hx_unlock(hx_lock_t *l) {
    if (__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) != 1) {
        hx_futex_wake(&l->v, 1);
    }
}
struct hx_timespec { int32_t tv_sec; int32_t tv_nsec; };
static inline void hx_sleep_us(uint64_t us) {
    struct hx_timespec ts = { (int32_t) (us / 1000000u), (int32_t) (us % 1000000u) * 1000 };
    hx_syscall6(HX_SYS_NANOSLEEP, (long) &ts, 0, 0, 0, 0, 0);
}
static inline int64_t hx_monotonic_ns(void) {
    struct hx_timespec ts;
    if (hx_syscall6(HX_SYS_CLOCK_GETTIME, 1, (long) &ts, 0, 0, 0, 0) != 0) {
        return 0;
    }
    return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
void hx_exit(int code) __attribute__((noreturn));
/* Write all of buf (a pipe or a file may take less at once). */
int hx_write_all(int fd, const void *buf, size_t n);
int hx_read_all(int fd, void *buf, size_t n);
#endif
