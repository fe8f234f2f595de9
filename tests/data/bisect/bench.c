/* A stand-in llama-bench for hexbuild's bisect tests, built by the llama-mini fixture tree: it
 * times real work through the tree's own libraries (llama_matmul_check, ggml's Q4_0 x Q8_0 dot
 * product) and prints llama-bench's JSONL records (-o jsonl), one per test it is asked for:
 * pp<P> when -p P > 0, tg<N> when -n N > 0. tokens/s = tokens / process CPU time of the fastest
 * chunk, so that other work on the machine moves the figure less than wall time would. No C library: _start reads
 * argc/argv from the stack and the system calls are made by hand (AArch64 Linux). */
#include "llama.h"

#define WORK_PER_TOKEN 20000

static long sys3(long nr, long a, long b, long c) {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

static char out[4096];
static int pos;

static void put(const char * s) {
    while (*s && pos < (int) sizeof(out) - 1) {
        out[pos++] = *s++;
    }
}

static void put_int(long v) {
    char digits[24];
    int n = 0;
    if (v < 0) {
        put("-");
        v = -v;
    }
    do {
        digits[n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v && n < 23);
    while (n) {
        char c[2] = { digits[--n], 0 };
        put(c);
    }
}

static void put_fixed3(double v) { /* v >= 0, three decimals */
    long whole = (long) v;
    long frac = (long) ((v - (double) whole) * 1000.0 + 0.5);
    if (frac >= 1000) {
        whole++;
        frac -= 1000;
    }
    put_int(whole);
    put(".");
    put(frac < 100 ? (frac < 10 ? "00" : "0") : "");
    put_int(frac);
}

static int eq(const char * a, const char * b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static long to_long(const char * s) {
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
    }
    return v;
}

static double cpu_seconds(void) {
    long ts[2];
    sys3(113 /* clock_gettime */, 2 /* CLOCK_PROCESS_CPUTIME_ID */, (long) ts, 0);
    return (double) ts[0] + (double) ts[1] / 1e9;
}

static volatile float sink;

/* The fastest of 8 chunks: what the kernel does when nothing else holds the core (the tests
 * run beside other work on two cores, where a chunk can take twice as long for no reason of its
 * own). */
static double run_tokens(long tokens) {
    const long chunk = tokens / 8 > 0 ? tokens / 8 : 1;
    double best = 0.0;
    for (long done = 0; done < tokens; done += chunk) {
        const double t0 = cpu_seconds();
        for (long t = 0; t < chunk; t++) {
            for (int w = 0; w < WORK_PER_TOKEN; w++) {
                sink += llama_matmul_check();
            }
        }
        const double dt = cpu_seconds() - t0;
        if (dt > 0 && (double) chunk / dt > best) {
            best = (double) chunk / dt;
        }
    }
    return best;
}

static void record(const char * model, long n_prompt, long n_gen, long threads, double ts) {
    put("{\"build_commit\": \"llama-mini\", \"build_number\": 1, \"backends\": \"HTP\", \"model_filename\": \"");
    put(model);
    put("\", \"model_type\": \"llama-mini Q4_0\", \"model_size\": 1, \"model_n_params\": 1, \"n_batch\": 2048, "
        "\"n_ubatch\": 512, \"n_threads\": ");
    put_int(threads);
    put(", \"type_k\": \"f16\", \"type_v\": \"f16\", \"n_prompt\": ");
    put_int(n_prompt);
    put(", \"n_gen\": ");
    put_int(n_gen);
    put(", \"n_depth\": 0, \"avg_ts\": ");
    put_fixed3(ts);
    put(", \"stddev_ts\": 0.000}\n");
}

int bench_main(long argc, char ** argv) {
    const char * model = "none";
    long n_prompt = 512, n_gen = 128, threads = 1;
    for (long i = 1; i + 1 < argc; i++) {
        if (eq(argv[i], "-m")) {
            model = argv[++i];
        } else if (eq(argv[i], "-p")) {
            n_prompt = to_long(argv[++i]);
        } else if (eq(argv[i], "-n")) {
            n_gen = to_long(argv[++i]);
        } else if (eq(argv[i], "-t")) {
            threads = to_long(argv[++i]);
        }
    }
    if (n_prompt > 0) {
        record(model, n_prompt, 0, threads, run_tokens(n_prompt / 16 + 1) * 16);
    }
    if (n_gen > 0) {
        record(model, 0, n_gen, threads, run_tokens(n_gen));
    }
    sys3(64 /* write */, 1, (long) out, pos);
    return 0;
}

__attribute__((noreturn)) void start_c(long * sp) {
    const int rc = bench_main(sp[0], (char **) (sp + 1));
    for (;;) {
        sys3(93 /* exit */, rc, 0, 0);
    }
}

__attribute__((naked, noreturn)) void _start(void) {
    __asm__ volatile("mov x0, sp\n\tbl start_c");
}
