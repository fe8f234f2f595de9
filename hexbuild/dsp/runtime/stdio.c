/* hexbuild DSP runtime: formatted output (the printf family, and stdout/stderr as the emulated
 * process's descriptors 1 and 2), for the HTP code's FARF lines and the runtime's own messages.
 * Integers, strings, characters, pointers and fixed-point floats: what those messages use. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sys.h"

/* -- formatted output ------------------------------------------------------------------------ */
struct out { char *buf; size_t cap, len; };

static void put(struct out *o, char c) {
    if (o->len + 1 < o->cap) {
        o->buf[o->len] = c;
    }
    o->len++;
}

static void put_str(struct out *o, const char *s, int width, int left, int prec) {
    size_t n = strlen(s);
    if (prec >= 0 && (size_t) prec < n) {
        n = (size_t) prec;
    }
    int pad = width > (int) n ? width - (int) n : 0;
    if (!left) while (pad-- > 0) put(o, ' ');
    for (size_t i = 0; i < n; i++) put(o, s[i]);
    if (left) while (pad-- > 0) put(o, ' ');
}

static void put_uint(struct out *o, unsigned long long v, unsigned base, int upper, int neg, int width, int left,
                     int zero) {
    char tmp[24];
    int n = 0;
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    do {
        unsigned long long q = v / base;
        tmp[n++] = digits[v - q * base];
        v = q;
    } while (v);
    int total = n + neg;
    int pad = width > total ? width - total : 0;
    if (!left && !zero) while (pad-- > 0) put(o, ' ');
    if (neg) put(o, '-');
    if (!left && zero) while (pad-- > 0) put(o, '0');
    while (n) put(o, tmp[--n]);
    if (left) while (pad-- > 0) put(o, ' ');
}

static void put_float(struct out *o, double v, int prec, int width, int left) {
    char tmp[64];
    struct out t = { tmp, sizeof tmp, 0 };
    if (prec < 0) prec = 6;
    if (prec > 9) prec = 9;
    if (v != v) {
        put_str(o, "nan", width, left, -1);
        return;
    }
    int neg = v < 0;
    if (neg) v = -v;
    if (v > 1e18) {
        put_str(o, neg ? "-inf" : "inf", width, left, -1);
        return;
    }
    unsigned long long scale = 1;
    for (int i = 0; i < prec; i++) scale *= 10;
    unsigned long long ip = (unsigned long long) v;
    unsigned long long fp = (unsigned long long) ((v - (double) ip) * (double) scale + 0.5);
    if (fp >= scale) {
        ip++;
        fp -= scale;
    }
    if (neg) put(&t, '-');
    put_uint(&t, ip, 10, 0, 0, 0, 0, 0);
    if (prec) {
        put(&t, '.');
        put_uint(&t, fp, 10, 0, 0, prec, 0, 1);
    }
    tmp[t.len < sizeof tmp ? t.len : sizeof tmp - 1] = 0;
    put_str(o, tmp, width, left, -1);
}

int vsnprintf(char *buf, size_t cap, const char *fmt, va_list ap) {
    struct out o = { buf, cap, 0 };
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            put(&o, *fmt);
            continue;
        }
        fmt++;
        int left = 0, zero = 0, width = 0, prec = -1, lng = 0;
        for (;; fmt++) {
            if (*fmt == '-') left = 1;
            else if (*fmt == '0') zero = 1;
            else if (*fmt == '+' || *fmt == ' ' || *fmt == '#') continue;
            else break;
        }
        if (*fmt == '*') { width = va_arg(ap, int); fmt++; }
        while (*fmt >= '0' && *fmt <= '9') width = width * 10 + (*fmt++ - '0');
        if (*fmt == '.') {
            fmt++;
            prec = 0;
            if (*fmt == '*') { prec = va_arg(ap, int); fmt++; }
            while (*fmt >= '0' && *fmt <= '9') prec = prec * 10 + (*fmt++ - '0');
        }
        while (*fmt == 'l' || *fmt == 'h' || *fmt == 'z' || *fmt == 't' || *fmt == 'j') {
            if (*fmt == 'l') lng++;
            if (*fmt == 'j') lng = 2;
            fmt++;
        }
        switch (*fmt) {
            case 'd': case 'i': {
                long long v = lng >= 2 ? va_arg(ap, long long) : va_arg(ap, int);
                put_uint(&o, v < 0 ? 0ull - (unsigned long long) v : (unsigned long long) v, 10, 0, v < 0, width,
                         left, zero);
                break;
            }
            case 'u': case 'x': case 'X': case 'o': {
                unsigned long long v = lng >= 2 ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned int);
                put_uint(&o, v, *fmt == 'u' ? 10 : *fmt == 'o' ? 8 : 16, *fmt == 'X', 0, width, left, zero);
                break;
            }
            case 'p':
                put(&o, '0');
                put(&o, 'x');
                put_uint(&o, (uintptr_t) va_arg(ap, void *), 16, 0, 0, 0, 0, 0);
                break;
            case 'c': put(&o, (char) va_arg(ap, int)); break;
            case 's': {
                const char *s = va_arg(ap, const char *);
                put_str(&o, s ? s : "(null)", width, left, prec);
                break;
            }
            case 'f': case 'F': case 'e': case 'g': case 'G': case 'E':
                put_float(&o, va_arg(ap, double), prec, width, left);
                break;
            case '%': put(&o, '%'); break;
            case 0: fmt--; break;
            default: put(&o, '%'); put(&o, *fmt); break;
        }
    }
    if (cap) {
        buf[o.len < cap ? o.len : cap - 1] = 0;
    }
    return (int) o.len;
}

int snprintf(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

int sprintf(char *buf, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, (size_t) 1 << 20, fmt, ap);
    va_end(ap);
    return n;
}

/* stdout and stderr are the emulated process's own descriptors 1 and 2 */
struct _FILE { int fd; };
static struct _FILE files[3] = { { 0 }, { 1 }, { 2 } };
FILE *stdin = &files[0], *stdout = &files[1], *stderr = &files[2];

int vfprintf(FILE *f, const char *fmt, va_list ap) {
    char line[1024];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    hx_write_all(f->fd, line, (size_t) (n < (int) sizeof line ? n : (int) sizeof line - 1));
    return n;
}

int fprintf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(f, fmt, ap);
    va_end(ap);
    return n;
}

int vprintf(const char *fmt, va_list ap) { return vfprintf(stdout, fmt, ap); }

int printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(stdout, fmt, ap);
    va_end(ap);
    return n;
}

int puts(const char *s) {
    hx_write_all(1, s, strlen(s));
    hx_write_all(1, "\n", 1);
    return 0;
}

int putchar(int c) {
    char ch = (char) c;
    hx_write_all(1, &ch, 1);
    return c;
}
