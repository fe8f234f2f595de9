/* hexbuild DSP runtime: the program's entry and exit under a user-mode emulated Hexagon. The
 * Linux loader leaves argc at the stack pointer, then argv, a NULL, and the environment (which
 * qemu-hexagon passes through from its own). */
#include "sys.h"

int main(int argc, char **argv);
char **environ;

void hx_exit(int code) {
    hx_syscall6(HX_SYS_EXIT_GROUP, code, 0, 0, 0, 0, 0);
    for (;;) {
    }
}

void exit(int code) { hx_exit(code); }

void abort(void) {
    static const char msg[] = "abort\n";
    hx_write(2, msg, sizeof msg - 1);
    hx_exit(134);
}

__attribute__((used)) static void hx_start_c(long *sp) {
    int argc = (int) sp[0];
    char **argv = (char **) (sp + 1);
    environ = argv + argc + 1;
    hx_exit(main(argc, argv));
}

__attribute__((naked, noreturn)) void _start(void) {
    __asm__ volatile("r0 = r29\n"
                     "r29 = and(r29, #-128)\n"
                     "jump hx_start_c\n");
}

int hx_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        long w = hx_write(fd, p, n);
        if (w <= 0) {
            return -1;
        }
        p += w;
        n -= (size_t) w;
    }
    return 0;
}

int hx_read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        long r = hx_read(fd, p, n);
        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t) r;
    }
    return 0;
}
