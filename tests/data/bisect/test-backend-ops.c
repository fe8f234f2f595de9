/* A stand-in test-backend-ops for hexbuild's bisect tests, built by the llama-mini fixture tree: it
 * checks the tree's own Q4_0 x Q8_0 dot product (ggml_vec_dot_q4_0_q8_0) against a reference
 * written here, on a few blocks, and prints test-backend-ops' console lines for the backend named
 * by -b (one case per block: "MUL_MAT(...): OK", or "[MUL_MAT] NMSE = ... > ...   MUL_MAT(...): FAIL"),
 * "n/m tests passed", "Backend X: OK|FAIL", "k/2 backends passed"; exit 1 on a failure. No C
 * library: _start reads argc/argv from the stack (AArch64 Linux). */
#include "llama.h"

#define CASES 8

static long sys3(long nr, long a, long b, long c) {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

static char out[8192];
static int pos;

static void put(const char * s) {
    while (*s && pos < (int) sizeof(out) - 1) {
        out[pos++] = *s++;
    }
}

static void put_int(long v) {
    char d[24];
    int n = 0;
    do {
        d[n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v && n < 23);
    while (n) {
        char c[2] = { d[--n], 0 };
        put(c);
    }
}

static void put_fixed6(double v) {
    long whole = (long) v;
    long frac = (long) ((v - (double) whole) * 1000000.0 + 0.5);
    put_int(whole);
    put(".");
    for (long p = 100000; p > 1 && frac < p; p /= 10) {
        put("0");
    }
    put_int(frac);
}

static int eq(const char * a, const char * b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static const float scales[3] = { 1.0f, 0.5f, 2.0f };
static const ggml_fp16_t scales_f16[3] = { 0x3c00, 0x3800, 0x4000 };

static float reference(const block_q4_0 * w, const block_q8_0 * a, int sw, int sa) {
    long acc = 0;
    for (int i = 0; i < QK4_0 / 2; i++) {
        acc += (long) ((w->qs[i] & 0x0f) - 8) * a->qs[i] + (long) ((w->qs[i] >> 4) - 8) * a->qs[i + QK4_0 / 2];
    }
    return scales[sw] * scales[sa] * (float) acc;
}

int ops_main(long argc, char ** argv) {
    const char * backend = "HTP0";
    for (long i = 1; i + 1 < argc; i++) {
        if (eq(argv[i], "-b")) {
            backend = argv[++i];
        }
    }
    put("Testing 2 devices\n\nBackend 1/2: ");
    put(backend);
    put("\n  Device description: llama-mini\n\n");
    unsigned seed = 12345;
    int passed = 0;
    for (int c = 0; c < CASES; c++) {
        block_q4_0 w;
        block_q8_0 a;
        const int sw = c % 3, sa = (c / 3) % 3;
        w.d = scales_f16[sw];
        a.d = scales_f16[sa];
        for (int i = 0; i < QK4_0 / 2; i++) {
            seed = seed * 1103515245u + 12345u;
            w.qs[i] = (uint8_t) (seed >> 16);
        }
        for (int i = 0; i < QK8_0; i++) {
            seed = seed * 1103515245u + 12345u;
            a.qs[i] = (int8_t) ((int) (seed >> 16) % 100);
        }
        const float want = reference(&w, &a, sw, sa);
        const float got = ggml_vec_dot_q4_0_q8_0(1, &w, &a);
        const double err = (double) (got - want) * (got - want) / ((double) want * want + 1e-9);
        if (err > 0.0005) {
            put("[MUL_MAT] NMSE = ");
            put_fixed6(err);
            put(" > 0.000500   ");
        } else {
            put("  ");
            passed++;
        }
        put("MUL_MAT(type_a=q4_0,type_b=f32,m=1,n=1,k=32,case=");
        put_int(c);
        put(err > 0.0005 ? "): FAIL\n" : "): OK\n");
    }
    put("  ");
    put_int(passed);
    put("/");
    put_int(CASES);
    put(" tests passed\n  Backend ");
    put(backend);
    put(passed == CASES ? ": OK\n" : ": FAIL\n");
    put("Backend 2/2: CPU\n  Skipping CPU backend\n");
    put(passed == CASES ? "2/2 backends passed\nOK\n" : "1/2 backends passed\nFAIL\n");
    sys3(64 /* write */, 1, (long) out, pos);
    return passed == CASES ? 0 : 1;
}

__attribute__((noreturn)) void start_c(long * sp) {
    const int rc = ops_main(sp[0], (char **) (sp + 1));
    for (;;) {
        sys3(93 /* exit */, rc, 0, 0);
    }
}

__attribute__((naked, noreturn)) void _start(void) {
    __asm__ volatile("mov x0, sp\n\tbl start_c");
}
