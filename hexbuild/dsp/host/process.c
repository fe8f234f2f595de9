/* hexbuild's stand-in libcdsprpc.so: a session's DSP process. `$HEXBUILD_VNPU_QEMU -cpu
 * $HEXBUILD_VNPU_CPU $HEXBUILD_VNPU_RUNTIME 3` with the child's end of a SOCK_SEQPACKET socketpair
 * as fd 3; an exec that fails is told back through a CLOEXEC pipe, so the caller gets one line and
 * AEE_ECONNREFUSED instead of a process that is not there. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vnpu_host.h"

static int launch_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int launch_failed(const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    vnpu_say("cannot start the DSP process: %s", what);
    return AEE_ECONNREFUSED;
}

int vnpu_spawn(int *sock_out, pid_t *pid_out) {
    const char *qemu = getenv("HEXBUILD_VNPU_QEMU");
    const char *runtime = getenv("HEXBUILD_VNPU_RUNTIME");
    const char *cpu = getenv("HEXBUILD_VNPU_CPU");
    if (!cpu || !*cpu) cpu = "v73";
    if (!qemu || !*qemu) return launch_failed("HEXBUILD_VNPU_QEMU is not set (the path of qemu-hexagon)");
    if (!runtime || !*runtime)
        return launch_failed("HEXBUILD_VNPU_RUNTIME is not set (the path of the virtual NPU's DSP runtime)");
    if (access(qemu, X_OK) != 0) return launch_failed("HEXBUILD_VNPU_QEMU=%s: %s", qemu, strerror(errno));
    if (access(runtime, R_OK) != 0) return launch_failed("HEXBUILD_VNPU_RUNTIME=%s: %s", runtime, strerror(errno));

    int sv[2], ep[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return launch_failed("socketpair: %s", strerror(errno));
    /* One message is one packet, bounded by the sender's buffer (212992 bytes by default): room for
     * INVOKE buffers of a few MiB both ways (the kernel caps it at net.core.wmem_max). */
    int sndbuf = 8 << 20;
    for (int i = 0; i < 2; i++) setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (pipe2(ep, O_CLOEXEC) != 0) {
        close(sv[0]);
        close(sv[1]);
        return launch_failed("pipe: %s", strerror(errno));
    }
    char *argv[] = {(char *) qemu, "-cpu", (char *) cpu, (char *) runtime, "3", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls from here on. The child's end becomes fd 3 (dup2 clears
         * CLOEXEC; if it is fd 3 already, clear it by hand). */
        int e;
        /* No core file: qemu-hexagon, dying of a skel's fault, would leave one in the program's
         * working directory (the install) with `ulimit -c unlimited` (the adb scripts' own): the
         * emulator's, as large as its memory. The runtime's fault line says where the skel faulted. */
        struct rlimit core;
        if (getrlimit(RLIMIT_CORE, &core) == 0) {
            core.rlim_cur = 0;
            setrlimit(RLIMIT_CORE, &core);
        }
        if (sv[1] == 3) e = fcntl(3, F_SETFD, 0);
        else e = dup2(sv[1], 3);
        if (e >= 0) execv(qemu, argv);
        e = errno;
        ssize_t w = write(ep[1], &e, sizeof e);
        (void) w;
        _exit(127);
    }
    int fork_errno = errno;
    close(sv[1]);
    close(ep[1]);
    if (pid < 0) {
        close(sv[0]);
        close(ep[0]);
        return launch_failed("fork: %s", strerror(fork_errno));
    }
    int child_errno = 0;
    ssize_t r;
    do r = read(ep[0], &child_errno, sizeof child_errno);
    while (r < 0 && errno == EINTR);
    close(ep[0]);
    if (r == (ssize_t) sizeof child_errno) {
        close(sv[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        return launch_failed("exec of %s: %s", qemu, strerror(child_errno));
    }
    *sock_out = sv[0];
    *pid_out = pid;
    vnpu_trace("DSP process %d: %s -cpu %s %s 3", (int) pid, qemu, cpu, runtime);
    return AEE_SUCCESS;
}

int vnpu_reap(pid_t pid, int wait_ms) {
    int status = 0;
    for (int waited = 0;; waited += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return 0; /* reaped elsewhere (SIGCHLD ignored, a handler) */
        if (waited >= wait_ms) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL); /* ours, by pid */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return -1;
}
