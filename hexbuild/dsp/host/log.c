/* hexbuild's stand-in libcdsprpc.so: its lines on stderr. Failures say one line that begins
 * "hexbuild-vnpu: "; HEXBUILD_VNPU_LOG=1 adds a protocol trace. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vnpu_host.h"

/* One write(2) per line, so lines of several threads and of the DSP process do not interleave. */
static void say_line(const char *prefix, const char *fmt, va_list ap) {
    char line[1024];
    int n = snprintf(line, sizeof line, "%s", prefix);
    int m = vsnprintf(line + n, sizeof line - (size_t) n - 1, fmt, ap);
    size_t len = (size_t) n + (m < 0 ? 0 : (size_t) m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void) w;
}

void vnpu_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_line("hexbuild-vnpu: ", fmt, ap);
    va_end(ap);
}

bool vnpu_tracing(void) {
    static int tracing = -1;
    int t = __atomic_load_n(&tracing, __ATOMIC_RELAXED);
    if (t < 0) {
        const char *v = getenv("HEXBUILD_VNPU_LOG");
        t = v && *v && strcmp(v, "0") != 0;
        __atomic_store_n(&tracing, t, __ATOMIC_RELAXED);
    }
    return t;
}

void vnpu_trace(const char *fmt, ...) {
    if (!vnpu_tracing()) return;
    va_list ap;
    va_start(ap, fmt);
    say_line("hexbuild-vnpu: trace: ", fmt, ap);
    va_end(ap);
}
