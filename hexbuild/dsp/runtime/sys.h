/* hexbuild DSP runtime: Linux system calls of a user-mode emulated Hexagon (trap0 #1, the number
 * in r6, arguments in r0-r5, the result in r0). Used only by this runtime: a DSP under QuRT has
 * no Linux, and the harness talks to its host through files. */
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
#define HX_SYS_MUNMAP        215
#define HX_SYS_MMAP          222

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
static inline void *hx_mmap_anon(size_t n) {
    /* PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS */
    long r = hx_syscall6(HX_SYS_MMAP, 0, (long) n, 3, 0x22, -1, 0);
    return (r < 0 && r > -4096) ? NULL : (void *) r;
}
struct hx_timespec { int32_t tv_sec; int32_t tv_nsec; };
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
