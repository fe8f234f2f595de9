/* hexbuild DSP runtime: the math functions llama.cpp's HTP code calls (scalar paths: leftovers,
 * tables, setup). The float functions are computed in double and rounded once, so they are
 * correct to within an ulp; the double ones to within a few. */
#include <math.h>
#include <stdint.h>

union dbits { double d; uint64_t u; };
union fbits { float f; uint32_t u; };

#define LN2_HI  6.93147180369123816490e-01
#define LN2_LO  1.90821492927058770002e-10
#define INV_LN2 1.44269504088896338700e+00

static double scalbn_d(double x, int n) {
    while (n > 1000) { x *= 0x1p1000; n -= 1000; }
    while (n < -1000) { x *= 0x1p-1000; n += 1000; }
    union dbits p = { .u = (uint64_t) (1023 + n) << 52 };
    return x * p.d;
}

static double nearest_d(double x) {  /* round half away from zero, |x| < 2^52 */
    return x >= 0 ? (double) (int64_t) (x + 0.5) : -(double) (int64_t) (0.5 - x);
}

static double exp_d(double x) {
    if (x != x) return x;
    if (x > 709.78) return INFINITY;
    if (x < -745.2) return 0.0;
    double n = nearest_d(x * INV_LN2);
    double r = (x - n * LN2_HI) - n * LN2_LO;
    /* e^r for |r| <= 0.347: Taylor to r^12 (error below 1e-16 relative) */
    double p = 1.0 / 479001600.0;
    static const double c[] = { 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0,
                                1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0 };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) p = p * r + c[i];
    return scalbn_d(p, (int) n);
}

/* log(x) = e * ln 2 + log(m), m in [sqrt(2)/2, sqrt(2)); returns log(m) and sets *e. The parts
 * stay apart so that log2 of a power of two is exact (softmax's ALiBi takes floor(log2(n_head)):
 * log(8) / ln 2 is 2.9999999999999996 in double). */
static double log_parts(double x, int *ep) {
    union dbits v = { x };
    int e = 0;
    if ((v.u >> 52) == 0) {  /* subnormal */
        v.d = x * 0x1p54;
        e = -54;
    }
    e += (int) ((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & 0x000fffffffffffffull) | (1023ull << 52);  /* m in [1, 2) */
    double m = v.d;
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e++;
    }
    /* log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716 */
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double p = 1.0 / 23;
    for (int k = 21; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
    *ep = e;
    return 2.0 * s * p;
}

/* NaN, -inf, +inf or 0 for the arguments outside log's finite range; 1 when x is ordinary */
static int log_special(double x, double *r) {
    union dbits v = { x };
    if (x != x || x < 0) { *r = NAN; return 1; }
    if (x == 0) { *r = -INFINITY; return 1; }
    if (v.u >> 52 == 0x7ff) { *r = x; return 1; }
    return 0;
}

static double log_d(double x) {
    double r;
    int e;
    if (log_special(x, &r)) return r;
    double lm = log_parts(x, &e);
    return lm + e * LN2_HI + e * LN2_LO;
}

static double log2_d(double x) {
    double r;
    int e;
    if (log_special(x, &r)) return r;
    double lm = log_parts(x, &e);
    return e + lm * INV_LN2;
}

double exp(double x) { return exp_d(x); }
double log(double x) { return log_d(x); }
double log2(double x) { return log2_d(x); }
double log10(double x) { return log_d(x) * 0.43429448190325182765; }
double exp2(double x) { return exp_d(x * LN2_HI + x * LN2_LO); }

float expf(float x) { return (float) exp_d(x); }
float exp2f(float x) { return (float) exp_d((double) x * 6.93147180559945309417e-01); }
float expm1f(float x) { return (float) (fabs(x) < 1e-5 ? x + 0.5 * (double) x * x : exp_d(x) - 1.0); }
float logf(float x) { return (float) log_d(x); }
float log2f(float x) { return (float) log2_d(x); }
float log10f(float x) { return (float) (log_d(x) * 0.43429448190325182765); }
float log1pf(float x) { return (float) log_d(1.0 + (double) x); }

double fabs(double x) { union dbits v = { x }; v.u &= ~(1ull << 63); return v.d; }
float fabsf(float x) { union fbits v = { x }; v.u &= 0x7fffffffu; return v.f; }
float copysignf(float x, float y) {
    union fbits a = { x }, b = { y };
    a.u = (a.u & 0x7fffffffu) | (b.u & 0x80000000u);
    return a.f;
}
double copysign(double x, double y) {
    union dbits a = { x }, b = { y };
    a.u = (a.u & ~(1ull << 63)) | (b.u & (1ull << 63));
    return a.d;
}

double trunc(double x) {
    union dbits v = { x };
    int e = (int) ((v.u >> 52) & 0x7ff) - 1023;
    if (e >= 52) return x;
    if (e < 0) { v.u &= 1ull << 63; return v.d; }
    v.u &= ~((1ull << (52 - e)) - 1);
    return v.d;
}
double floor(double x) { double t = trunc(x); return (t > x) ? t - 1.0 : t; }
double ceil(double x) { double t = trunc(x); return (t < x) ? t + 1.0 : t; }
double round(double x) { return x >= 0 ? floor(x + 0.5) : -floor(0.5 - x); }
float truncf(float x) { return (float) trunc(x); }
float floorf(float x) { return (float) floor(x); }
float ceilf(float x) { return (float) ceil(x); }
float roundf(float x) { return (float) round(x); }
float rintf(float x) {  /* to nearest even */
    double f = floor(x), d = (double) x - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
    return (float) f;
}
long lrintf(float x) { return (long) rintf(x); }
long lroundf(float x) { return (long) roundf(x); }
double fmod(double x, double y) {
    if (y == 0 || x != x || y != y) return NAN;
    double q = trunc(x / y);
    return x - q * y;
}
float fmodf(float x, float y) { return (float) fmod(x, y); }
float fmaxf(float x, float y) { return x != x ? y : (y != y ? x : (x > y ? x : y)); }
float fminf(float x, float y) { return x != x ? y : (y != y ? x : (x < y ? x : y)); }
double fmax(double x, double y) { return x != x ? y : (y != y ? x : (x > y ? x : y)); }
double fmin(double x, double y) { return x != x ? y : (y != y ? x : (x < y ? x : y)); }
float ldexpf(float x, int e) { return (float) scalbn_d(x, e); }
double ldexp(double x, int e) { return scalbn_d(x, e); }

static double sqrt_d(double x) {
    if (x != x || x < 0) return NAN;
    if (x == 0 || x == INFINITY) return x;
    /* 1/sqrt by Newton from a float estimate, then one correction of the root */
    int e = 0;
    union dbits v = { x };
    int be = (int) ((v.u >> 52) & 0x7ff) - 1023;
    if ((v.u >> 52) == 0) { x *= 0x1p100; e = -50; be = (int) (((union dbits){ x }.u >> 52) & 0x7ff) - 1023; }
    int half = be / 2;
    x = scalbn_d(x, -2 * half);  /* now in [1, 4) */
    union fbits g = { (float) x };
    g.u = 0x5f3759dfu - (g.u >> 1);
    double y = g.f;
    for (int i = 0; i < 4; i++) y = y * (1.5 - 0.5 * x * y * y);
    double r = x * y;
    r = r + 0.5 * y * (x - r * r);
    return scalbn_d(r, half + e);
}
double sqrt(double x) { return sqrt_d(x); }
float sqrtf(float x) { return (float) sqrt_d(x); }

double pow(double x, double y) {
    if (y == 0) return 1.0;
    if (x == 1) return 1.0;
    if (x != x || y != y) return NAN;
    if (x == 0) return y > 0 ? 0.0 : INFINITY;
    if (x < 0) {
        double t = trunc(y);
        if (t != y) return NAN;
        double r = exp_d(y * log_d(-x));
        return fmod(t, 2.0) != 0.0 ? -r : r;
    }
    return exp_d(y * log_d(x));
}
float powf(float x, float y) { return (float) pow(x, y); }

/* sin and cos on [-pi/4, pi/4] after reduction by pi/2 in three parts: within 2 float ulps for
 * |x| < 2^17 (rope angles stay far below); larger arguments lose accuracy slowly */
#define PIO2_1  1.57079632673412561417e+00
#define PIO2_2  6.07710050650619224932e-11
#define PIO2_3  2.02226624879595063154e-21
#define TWO_OVER_PI 6.36619772367581382433e-01

static double sin_k(double r) {
    double r2 = r * r, p = -1.0 / 1307674368000.0;
    static const double c[] = { 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0,
                                1.0 / 120.0, -1.0 / 6.0, 1.0 };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) p = p * r2 + c[i];
    return r * p;
}
static double cos_k(double r) {
    double r2 = r * r, p = 1.0 / 20922789888000.0;
    static const double c[] = { -1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0,
                                -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0 };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) p = p * r2 + c[i];
    return p;
}
static double reduce(double x, int *q) {
    double n = nearest_d(x * TWO_OVER_PI);
    *q = (int) ((int64_t) n & 3);
    return ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3;
}
double sin(double x) {
    if (x != x || fabs(x) == INFINITY) return NAN;
    int q;
    double r = reduce(x, &q);
    switch (q) { case 0: return sin_k(r); case 1: return cos_k(r); case 2: return -sin_k(r); default: return -cos_k(r); }
}
double cos(double x) {
    if (x != x || fabs(x) == INFINITY) return NAN;
    int q;
    double r = reduce(x, &q);
    switch (q) { case 0: return cos_k(r); case 1: return -sin_k(r); case 2: return -cos_k(r); default: return sin_k(r); }
}
float sinf(float x) { return (float) sin(x); }
float cosf(float x) { return (float) cos(x); }
float tanf(float x) { return (float) (sin(x) / cos(x)); }

double tanh(double x) {
    if (x != x) return x;
    if (x > 20) return 1.0;
    if (x < -20) return -1.0;
    if (fabs(x) < 1e-8) return x;
    double e = exp_d(2.0 * x);
    return (e - 1.0) / (e + 1.0);
}
float tanhf(float x) { return (float) tanh(x); }
float sinhf(float x) { double e = exp_d(x); return (float) (0.5 * (e - 1.0 / e)); }
float coshf(float x) { double e = exp_d(x); return (float) (0.5 * (e + 1.0 / e)); }

/* erf by its Taylor series near 0 and the continued fraction of erfc further out */
double erf(double x) {
    if (x != x) return x;
    double a = fabs(x), r;
    if (a < 2.5) {
        double term = a, sum = a, a2 = a * a;
        for (int n = 1; n < 60; n++) {
            term *= -a2 / n;
            double t = term / (2 * n + 1);
            sum += t;
            if (fabs(t) < 1e-17 * fabs(sum)) break;
        }
        r = sum * 1.12837916709551257390;
    } else if (a < 6) {
        double f = 0.0;
        for (int n = 60; n >= 1; n--) f = (n * 0.5) / (a + f);
        r = 1.0 - exp_d(-a * a) / (a + f) * 0.56418958354775628695;
    } else {
        r = 1.0;
    }
    return x < 0 ? -r : r;
}
float erff(float x) { return (float) erf(x); }
float atanf(float x) {  /* arctan by argument halving and its series */
    double v = x;
    int neg = v < 0, inv = 0;
    if (neg) v = -v;
    if (v > 1) { v = 1.0 / v; inv = 1; }
    for (int i = 0; i < 3; i++) v = v / (1.0 + sqrt_d(1.0 + v * v));
    double v2 = v * v, p = 0, term = v;
    for (int k = 0; k < 12; k++) { p += term / (2 * k + 1); term *= -v2; }
    p *= 8;
    if (inv) p = 1.57079632679489661923 - p;
    return (float) (neg ? -p : p);
}
float frexpf(float x, int *e) {
    if (x == 0 || x != x || fabsf(x) == INFINITY) { *e = 0; return x; }
    double v = x;
    int k = 0;
    while (fabs(v) >= 1.0) { v *= 0.5; k++; }
    while (fabs(v) < 0.5) { v *= 2.0; k--; }
    *e = k;
    return (float) v;
}
