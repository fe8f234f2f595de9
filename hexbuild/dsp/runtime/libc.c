/* hexbuild DSP runtime: the part of a C library that llama.cpp's HTP code and the harness call
 * (memory and string functions, formatted output, assert; the allocator is heap.c). Built with
 * -ffreestanding: nothing here may be turned back into a call to itself. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

#define NO_BUILTIN __attribute__((no_builtin))

NO_BUILTIN void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    if ((((uintptr_t) d | (uintptr_t) s) & 7) == 0) {
        for (; n >= 8; n -= 8, d += 8, s += 8) {
            *(uint64_t *) d = *(const uint64_t *) s;
        }
    }
    while (n--) {
        *d++ = *s++;
    }
    return dst;
}

NO_BUILTIN void *memmove(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d == s || n == 0) {
        return dst;
    }
    if (d < s || d >= s + n) {
        while (n--) {
            *d++ = *s++;
        }
    } else {
        d += n;
        s += n;
        while (n--) {
            *--d = *--s;
        }
    }
    return dst;
}

NO_BUILTIN void *memset(void *dst, int c, size_t n) {
    unsigned char *d = dst;
    if (((uintptr_t) d & 7) == 0 && n >= 8) {
        uint64_t v = (unsigned char) c;
        v |= v << 8;
        v |= v << 16;
        v |= v << 32;
        for (; n >= 8; n -= 8, d += 8) {
            *(uint64_t *) d = v;
        }
    }
    while (n--) {
        *d++ = (unsigned char) c;
    }
    return dst;
}

NO_BUILTIN int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (; n; n--, x++, y++) {
        if (*x != *y) {
            return *x - *y;
        }
    }
    return 0;
}

NO_BUILTIN void *memchr(const void *s, int c, size_t n) {
    const unsigned char *p = s;
    for (; n; n--, p++) {
        if (*p == (unsigned char) c) {
            return (void *) p;
        }
    }
    return NULL;
}

NO_BUILTIN size_t strlen(const char *s) {
    const char *p = s;
    while (*p) {
        p++;
    }
    return (size_t) (p - s);
}

NO_BUILTIN size_t strnlen(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i]) {
        i++;
    }
    return i;
}

NO_BUILTIN char *strcpy(char *restrict dst, const char *restrict src) {
    char *d = dst;
    while ((*d++ = *src++)) {
    }
    return dst;
}

NO_BUILTIN char *strncpy(char *restrict dst, const char *restrict src, size_t n) {
    size_t i = 0;
    for (; i < n && src[i]; i++) {
        dst[i] = src[i];
    }
    for (; i < n; i++) {
        dst[i] = 0;
    }
    return dst;
}

NO_BUILTIN char *strcat(char *restrict dst, const char *restrict src) {
    strcpy(dst + strlen(dst), src);
    return dst;
}

NO_BUILTIN char *strncat(char *restrict dst, const char *restrict src, size_t n) {
    char *d = dst + strlen(dst);
    while (n-- && *src) {
        *d++ = *src++;
    }
    *d = 0;
    return dst;
}

NO_BUILTIN int strcmp(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return (unsigned char) *a - (unsigned char) *b;
}

NO_BUILTIN int strncmp(const char *a, const char *b, size_t n) {
    for (; n; n--, a++, b++) {
        if (*a != *b || !*a) {
            return (unsigned char) *a - (unsigned char) *b;
        }
    }
    return 0;
}

NO_BUILTIN char *strchr(const char *s, int c) {
    for (;; s++) {
        if (*s == (char) c) {
            return (char *) s;
        }
        if (!*s) {
            return NULL;
        }
    }
}

NO_BUILTIN char *strrchr(const char *s, int c) {
    const char *last = NULL;
    for (;; s++) {
        if (*s == (char) c) {
            last = s;
        }
        if (!*s) {
            return (char *) last;
        }
    }
}

NO_BUILTIN size_t strcspn(const char *s, const char *reject) {
    size_t n = 0;
    while (s[n] && !strchr(reject, s[n])) {
        n++;
    }
    return n;
}

NO_BUILTIN char *strstr(const char *h, const char *n) {
    size_t len = strlen(n);
    for (; *h; h++) {
        if (strncmp(h, n, len) == 0) {
            return (char *) h;
        }
    }
    return len ? NULL : (char *) h;
}

size_t strlcpy(char *dst, const char *src, size_t n) {
    size_t len = strlen(src);
    if (n) {
        size_t k = len < n - 1 ? len : n - 1;
        memcpy(dst, src, k);
        dst[k] = 0;
    }
    return len;
}

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

void __assert_fail(const char *expr, const char *file, unsigned int line, const char *func) {
    fprintf(stderr, "%s:%u: %s: assertion failed: %s\n", file, line, func, expr);
    hx_exit(134);
}

int atoi(const char *s) {
    int neg = 0, v = 0;
    while (*s == ' ') s++;
    if (*s == '-' || *s == '+') neg = *s++ == '-';
    while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
    return neg ? -v : v;
}

extern char **environ;  /* start.c */

char *getenv(const char *name) {
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            return *e + n + 1;
        }
    }
    return NULL;
}

/* qsort: a heap sort (no recursion, no extra memory) */
static void swap_bytes(unsigned char *a, unsigned char *b, size_t n) {
    while (n--) {
        unsigned char t = *a;
        *a++ = *b;
        *b++ = t;
    }
}

static void sift(unsigned char *base, size_t size, size_t root, size_t n, int (*cmp)(const void *, const void *)) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0) child++;
        if (cmp(base + root * size, base + child * size) >= 0) return;
        swap_bytes(base + root * size, base + child * size, size);
        root = child;
    }
}

void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    unsigned char *b = base;
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift(b, size, i, n, cmp);
    for (size_t end = n - 1; end > 0; end--) {
        swap_bytes(b, b + end * size, size);
        sift(b, size, 0, end, cmp);
    }
}
