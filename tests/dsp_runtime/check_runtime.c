/* The DSP runtime's functions on the emulated DSP, for tests/test_dsp_runtime.py: reads float32
 * arguments from the file argv[1], writes each function's float32 results to argv[2], then the
 * integer helpers' and the half conversions' results, then a formatted line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

typedef float (*f1)(float);

static float f_pow2(float x) { return powf(x, 2.5f); }
static float f_log2d(float x) { return (float) log2((double) x); }
static float f_floord(float x) { return (float) floor((double) x); }

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int in = (int) hx_open(argv[1], HX_O_RDONLY, 0);
    int out = (int) hx_open(argv[2], HX_O_WRONLY | HX_O_CREAT | HX_O_TRUNC, 0644);
    uint32_t n;
    if (in < 0 || out < 0 || hx_read_all(in, &n, 4)) return 3;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    if (!x || !y || hx_read_all(in, x, n * sizeof(float))) return 4;
    const f1 fns[] = { expf, logf, sqrtf, sinf, cosf, tanhf, floorf, ceilf, exp2f, log2f, erff, f_pow2, f_log2d,
                       f_floord };
    for (unsigned k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        for (uint32_t i = 0; i < n; i++) y[i] = fns[k](x[i]);
        hx_write_all(out, y, n * sizeof(float));
    }
    /* integer helpers: the bit patterns of the arguments as dividends and divisors */
    uint32_t *u = (uint32_t *) x;
    for (uint32_t i = 0; i + 1 < n; i += 2) {
        uint32_t a = u[i], b = u[i + 1] >> (u[i] & 15);
        if (!b) b = 7;
        int32_t sa = (int32_t) a, sb = (int32_t) (b | 1u) * ((a & 1) ? -1 : 1);
        uint64_t la = ((uint64_t) a << 32) | u[i + 1], lb = (uint64_t) b * 3u + 1u;
        uint32_t r32[4] = { a / b, a % b, (uint32_t) (sa / sb), (uint32_t) (sa % sb) };
        uint64_t r64[2] = { la / lb, la % lb };
        hx_write_all(out, r32, sizeof r32);
        hx_write_all(out, r64, sizeof r64);
    }
    /* half <-> single through the compiler's helpers */
    for (uint32_t i = 0; i < n; i++) {
        __fp16 h = (__fp16) x[i];
        float back = (float) h;
        uint16_t bits;
        memcpy(&bits, &h, 2);
        hx_write_all(out, &bits, 2);
        hx_write_all(out, &back, 4);
    }
    char line[128];
    int len = snprintf(line, sizeof line, "%d|%u|%x|%s|%5.2f|%lld|%-4s|", -42, 42u, 0xbeefu, "dsp", 3.14159, -1234567890123ll, "ab");
    hx_write_all(out, line, (size_t) len);
    double q = 1.0 / 3.0;
    hx_write_all(out, &q, 8);
    return 0;
}
