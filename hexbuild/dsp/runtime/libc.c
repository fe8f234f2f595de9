/* hexbuild DSP runtime: the part of a C library that llama.cpp's HTP code and the harness call
 * (memory and string functions, assert, atoi, getenv, qsort; formatted output is stdio.c, the
 * allocator heap.c). Built with -ffreestanding: nothing here may be turned back into a call to
 * itself. */
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
