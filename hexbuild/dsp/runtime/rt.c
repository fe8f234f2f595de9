/* hexbuild DSP runtime: the compiler's helper functions for Hexagon (what compiler-rt's Hexagon
 * builtins provide on a real DSP): integer division, double division, and the half-precision
 * conversions. Written with shifts and compares only: a '/' here would call itself. */
#include <stdint.h>

static inline uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *rem) {
    if (d == 0) {
        *rem = n;
        return 0xffffffffu;
    }
    if (n < d) {
        *rem = n;
        return 0;
    }
    int shift = __builtin_clz(d) - __builtin_clz(n);
    uint32_t q = 0;
    d <<= shift;
    for (; shift >= 0; shift--, d >>= 1) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1;
        }
    }
    *rem = n;
    return q;
}

static inline uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *rem) {
    if (d == 0) {
        *rem = n;
        return ~0ull;
    }
    if (n < d) {
        *rem = n;
        return 0;
    }
    int shift = __builtin_clzll(d) - __builtin_clzll(n);
    uint64_t q = 0;
    d <<= shift;
    for (; shift >= 0; shift--, d >>= 1) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1;
        }
    }
    *rem = n;
    return q;
}

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d) { uint32_t r; return udivmod32(n, d, &r); }
uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d) { uint32_t r; udivmod32(n, d, &r); return r; }

int32_t __hexagon_divsi3(int32_t n, int32_t d) {
    uint32_t r, q = udivmod32(n < 0 ? 0u - (uint32_t) n : (uint32_t) n, d < 0 ? 0u - (uint32_t) d : (uint32_t) d, &r);
    return (n < 0) != (d < 0) ? (int32_t) (0u - q) : (int32_t) q;
}

int32_t __hexagon_modsi3(int32_t n, int32_t d) {
    uint32_t r;
    udivmod32(n < 0 ? 0u - (uint32_t) n : (uint32_t) n, d < 0 ? 0u - (uint32_t) d : (uint32_t) d, &r);
    return n < 0 ? (int32_t) (0u - r) : (int32_t) r;
}

uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d) { uint64_t r; return udivmod64(n, d, &r); }
uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d) { uint64_t r; udivmod64(n, d, &r); return r; }

int64_t __hexagon_divdi3(int64_t n, int64_t d) {
    uint64_t r, q = udivmod64(n < 0 ? 0ull - (uint64_t) n : (uint64_t) n, d < 0 ? 0ull - (uint64_t) d : (uint64_t) d, &r);
    return (n < 0) != (d < 0) ? (int64_t) (0ull - q) : (int64_t) q;
}

int64_t __hexagon_moddi3(int64_t n, int64_t d) {
    uint64_t r;
    udivmod64(n < 0 ? 0ull - (uint64_t) n : (uint64_t) n, d < 0 ? 0ull - (uint64_t) d : (uint64_t) d, &r);
    return n < 0 ? (int64_t) (0ull - r) : (int64_t) r;
}

/* Double division: a float reciprocal estimate refined by Newton's method in double (each step
 * doubles the correct bits: 24 -> 48 -> full), then one correction of the quotient. */
union dbits { double d; uint64_t u; };

double __hexagon_divdf3(double a, double b) {
    union dbits ua = { a }, ub = { b };
    uint64_t ea = (ua.u >> 52) & 0x7ff, eb = (ub.u >> 52) & 0x7ff;
    uint64_t sign = (ua.u ^ ub.u) & (1ull << 63);
    if (a != a || b != b || (ea == 0x7ff && eb == 0x7ff) || (a == 0 && b == 0)) {
        union dbits n = { .u = 0x7ff8000000000000ull };
        return n.d;
    }
    if (ea == 0x7ff || b == 0) {
        union dbits r = { .u = sign | 0x7ff0000000000000ull };
        return r.d;
    }
    if (eb == 0x7ff || a == 0) {
        union dbits r = { .u = sign };
        return r.d;
    }
    /* Scale b into [1, 2) so that its reciprocal is a normal float, whatever b's exponent. */
    int64_t eb_unbiased = (int64_t) eb - 1023;
    if (eb == 0) {  /* subnormal b: normalise first */
        union dbits t = { .d = b * 4503599627370496.0 };  /* 2^52 */
        eb_unbiased = (int64_t) ((t.u >> 52) & 0x7ff) - 1023 - 52;
        ub.u = t.u;
    }
    union dbits m = { .u = (ub.u & 0x800fffffffffffffull) | (1023ull << 52) };
    double bm = m.d;  /* b = bm * 2^eb_unbiased */
    double y = (double) (1.0f / (float) bm);
    y = y * (2.0 - bm * y);
    y = y * (2.0 - bm * y);
    double q = a * y;
    double r = a - q * bm;
    q = q + r * y;
    /* q = a / bm; divide by 2^eb_unbiased in steps that stay in range */
    while (eb_unbiased > 0) {
        int s = eb_unbiased > 1000 ? 1000 : (int) eb_unbiased;
        union dbits p = { .u = (uint64_t) (1023 - s) << 52 };
        q *= p.d;
        eb_unbiased -= s;
    }
    while (eb_unbiased < 0) {
        int s = eb_unbiased < -1000 ? 1000 : (int) -eb_unbiased;
        union dbits p = { .u = (uint64_t) (1023 + s) << 52 };
        q *= p.d;
        eb_unbiased += s;
    }
    return q;
}

/* IEEE half <-> single, round to nearest even, as the hardware converts. */
union fbits { float f; uint32_t u; };

float __extendhfsf2(uint16_t h) {
    uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    union fbits r;
    if (exp == 0x1f) {
        r.u = sign | 0x7f800000u | (mant << 13);
    } else if (exp) {
        r.u = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant) {
        int shift = __builtin_clz(mant) - 21;  /* bring the leading 1 to bit 10 */
        mant = (mant << shift) & 0x3ff;
        r.u = sign | ((uint32_t) (113 - shift) << 23) | (mant << 13);
    } else {
        r.u = sign;
    }
    return r.f;
}

uint16_t __truncsfhf2(float f) {
    union fbits v = { f };
    uint32_t sign = (v.u >> 16) & 0x8000;
    uint32_t exp = (v.u >> 23) & 0xff, mant = v.u & 0x7fffff;
    if (exp == 0xff) {
        return (uint16_t) (sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    }
    int e = (int) exp - 127 + 15;
    if (e >= 0x1f) {
        return (uint16_t) (sign | 0x7c00);
    }
    uint32_t m, shift;
    if (e <= 0) {  /* subnormal half, or zero */
        if (e < -10) {
            return (uint16_t) sign;
        }
        m = mant | 0x800000;
        shift = (uint32_t) (14 - e);
        e = 0;
    } else {
        m = mant;
        shift = 13;
    }
    uint32_t out = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (out & 1))) {
        out++;
    }
    /* a carry out of the mantissa moves into the exponent, which is what we want */
    return (uint16_t) (sign | (((uint32_t) e << 10) + out));
}
