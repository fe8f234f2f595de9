/* hexbuild's kernel harness: runs a llama.cpp tree's own HTP op entry points (op_matmul,
 * op_binary, ...) on the emulated DSP, case by case, from a file of cases the host wrote, and
 * writes each case's output tensor back for the host to compare with its reference.
 *
 * It is compiled against the tree's own headers. Two layouts of the op context exist:
 *   HXK_ABI 1 (up to the 0.3.20 tree): tensors inside the context by value (htp-msg.h);
 *   HXK_ABI 2 (0.3.28 on): pointers to tensor descriptors with size, flags and buffer index.
 * hxk_ops.h (written by hexbuild for the tree) lists the ops this build of the tree can run:
 *   HXK_OPS(X) X(NAME, entry_function) ...
 *
 * Cases file (little-endian): "HXK1", u32 count, then per case
 *   u32 id; char op[32]; u32 n_threads; u32 flags; i32 params[16]; u32 n_src;
 *   (n_src + 1) x { u32 type; u32 ne[4]; u32 nb[4]; u32 nbytes; }   the last one is dst
 *   the sources' bytes, one after the other; when flags has HXK_DST_INIT (the harness clears it
 *   before the op sees the flags) the destination's bytes follow: an op that writes part of its
 *   destination (SET_ROWS) leaves the rest as it was.
 * Results file: "HXR1", u32 count, then per case
 *   u32 id; i32 status; u32 nbytes; u32 reserved; u64 nanoseconds; u64 pcycles; dst bytes.
 * Before each case its index is written over RESULTS.progress: when the emulator dies, the host
 * knows which case killed it and starts again from the next one (argument FIRST). */
#pragma clang diagnostic ignored "-Wunused-variable"
#pragma clang diagnostic ignored "-Wunused-function"

#include <HAP_compute_res.h>
#include <HAP_farf.h>
#include <HAP_perf.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hex-dma.h"
#include "hvx-utils.h"
#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "htp-ctx.h"
#if HXK_ABI == 1
#include "htp-msg.h"
#endif
#include "htp-ops.h"

#include "../runtime/sys.h"
#include "hxk_ops.h"

void *hx_heap_mark(void);
void hx_heap_release(void *mark);
extern int hx_farf_level;

#define MAX_SRC     6
#define MAX_THREADS 8
/* a destination the op never writes keeps this pattern, which no reference matches */
#define UNWRITTEN   0x7f
#define HXK_DST_INIT (1u << 31)

struct case_tensor {
    uint32_t type, ne[4], nb[4], nbytes;
};

struct case_head {
    uint32_t id;
    char op[32];
    uint32_t n_threads, flags;
    int32_t params[16];
    uint32_t n_src;
};

struct result_head {
    uint32_t id;
    int32_t status;
    uint32_t nbytes, reserved;
    uint64_t ns, pcycles;
};

typedef int (*op_entry)(struct htp_ops_context *);

struct op_row {
    const char *name;
    int code;
    op_entry entry;
};

#define HXK_ROW(NAME, FUNC) { #NAME, HTP_OP_##NAME, FUNC },
static const struct op_row ops[] = { HXK_OPS(HXK_ROW) };

static const struct op_row *find_op(const char *name) {
    for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(ops[i].name, name) == 0) return &ops[i];
    }
    return NULL;
}

static void fail(const char *what) {
    fprintf(stderr, "hexbuild kernel harness: %s\n", what);
    hx_exit(3);
}

static uint64_t pcycles(void) {
    uint32_t lo, hi;
    __asm__ volatile("%0 = upcyclelo\n%1 = upcyclehi" : "=r"(lo), "=r"(hi));
    return ((uint64_t) hi << 32) | lo;
}

static struct htp_context ctx;

static void setup_context(void) {
    unsigned int vtcm_size = 0;
    void *vtcm = NULL;
    compute_res_attr_t attr;
    HAP_compute_res_query_VTCM(0, &vtcm_size, NULL, NULL, NULL);
    HAP_compute_res_attr_init(&attr);
    HAP_compute_res_attr_set_vtcm_param_v2(&attr, vtcm_size, vtcm_size, vtcm_size);
    if (HAP_compute_res_attr_get_vtcm_ptr_v2(&attr, &vtcm, &vtcm_size) != 0 || !vtcm) fail("no VTCM");
    memset(&ctx, 0, sizeof ctx);
    ctx.vtcm_base = vtcm;
    ctx.vtcm_size = vtcm_size;
    ctx.vtcm_rctx = 1;
    ctx.n_threads = MAX_THREADS;
    worker_pool_init(&ctx.worker_pool, MAX_THREADS);
    for (int i = 0; i < MAX_THREADS; i++) {
        ctx.dma[i] = dma_queue_create(256);
        if (!ctx.dma[i]) fail("no DMA queue");
    }
#ifdef HXK_DDR_SPAD
    /* main.c's persistent DDR scratchpad (MUL_MAT_ID's expert mappings), of main.c's size */
    ctx.ddr_spad_size = 512 * 1024;
    ctx.ddr_spad_base = memalign(128, ctx.ddr_spad_size);
    if (!ctx.ddr_spad_base) fail("no DDR scratchpad");
#endif
}

static int run_case(const struct op_row *op, const struct case_head *h, struct case_tensor *t, uint8_t **data) {
    struct htp_ops_context octx;
    memset(&octx, 0, sizeof octx);
    octx.ctx = &ctx;
    octx.op = op->code;
    octx.flags = h->flags;
    octx.n_threads = h->n_threads;
    memcpy(octx.op_params, h->params, sizeof octx.op_params < sizeof h->params ? sizeof octx.op_params : sizeof h->params);
#if HXK_ABI == 1
    struct htp_tensor *slots[] = { &octx.src0, &octx.src1, &octx.src2, &octx.src3, &octx.src4 };
    for (uint32_t i = 0; i <= h->n_src; i++) {
        struct htp_tensor *dt = i == h->n_src ? &octx.dst : slots[i];
        dt->data = (uint32_t) data[i];
        dt->type = t[i].type;
        memcpy(dt->ne, t[i].ne, sizeof dt->ne);
        memcpy(dt->nb, t[i].nb, sizeof dt->nb);
    }
#else
    static struct htp_tensor tens[MAX_SRC + 1];
    memset(tens, 0, sizeof tens);
    for (uint32_t i = 0; i <= h->n_src; i++) {
        tens[i].data = (uint32_t) data[i];
        tens[i].size = t[i].nbytes;
        tens[i].type = (uint16_t) t[i].type;
        memcpy(tens[i].ne, t[i].ne, sizeof tens[i].ne);
        memcpy(tens[i].nb, t[i].nb, sizeof tens[i].nb);
        if (i < h->n_src) octx.src[i] = &tens[i];
    }
    octx.dst = &tens[h->n_src];
#endif
    return op->entry(&octx);
}

int main(int argc, char **argv) {
    if (argc < 3) fail("usage: harness CASES RESULTS [FIRST [FARF-LEVEL]]");
    uint32_t first = argc > 3 ? (uint32_t) atoi(argv[3]) : 0;
    if (argc > 4) hx_farf_level = atoi(argv[4]);
    int in = (int) hx_open(argv[1], HX_O_RDONLY, 0);
    int out = (int) hx_open(argv[2], HX_O_WRONLY | HX_O_CREAT | HX_O_TRUNC, 0644);
    char progress_path[512];
    snprintf(progress_path, sizeof progress_path, "%s.progress", argv[2]);
    int progress = (int) hx_open(progress_path, HX_O_WRONLY | HX_O_CREAT | HX_O_TRUNC, 0644);
    if (in < 0) fail("cannot open the cases file");
    if (out < 0 || progress < 0) fail("cannot create the results file");
    char magic[4];
    uint32_t count;
    if (hx_read_all(in, magic, 4) || memcmp(magic, "HXK1", 4) || hx_read_all(in, &count, 4)) fail("not a cases file");
    if (hx_write_all(out, "HXR1", 4) || hx_write_all(out, &count, 4)) fail("cannot write results");
    setup_context();
    for (uint32_t c = 0; c < count; c++) {
        struct case_head h;
        struct case_tensor t[MAX_SRC + 1];
        uint8_t *data[MAX_SRC + 1];
        void *mark = hx_heap_mark();
        if (hx_read_all(in, &h, sizeof h)) fail("truncated cases file");
        h.op[sizeof h.op - 1] = 0;
        if (h.n_src > MAX_SRC) fail("too many sources in a case");
        if (h.n_threads < 1) h.n_threads = 1;
        if (h.n_threads > MAX_THREADS) h.n_threads = MAX_THREADS;
        if (hx_read_all(in, t, sizeof t[0] * (h.n_src + 1))) fail("truncated cases file");
        for (uint32_t i = 0; i <= h.n_src; i++) {
            data[i] = memalign(128, t[i].nbytes + 128);
            if (!data[i]) fail("out of memory");
            if (i < h.n_src || (h.flags & HXK_DST_INIT)) {
                if (hx_read_all(in, data[i], t[i].nbytes)) fail("truncated cases file");
            } else {
                memset(data[i], UNWRITTEN, t[i].nbytes);
            }
        }
        h.flags &= ~HXK_DST_INIT;
        if (c < first) {
            hx_heap_release(mark);
            continue;
        }
        char line[16];
        int n = snprintf(line, sizeof line, "%-10u\n", c);
        hx_pwrite(progress, line, (size_t) n, 0);
        struct result_head r = { h.id, 0, t[h.n_src].nbytes, 0, 0, 0 };
        const struct op_row *op = find_op(h.op);
        if (!op) {
            r.status = -1000;  /* this build of the tree has no such op */
            r.nbytes = 0;
        } else {
            uint64_t c0 = pcycles();
            int64_t t0 = hx_monotonic_ns();
            r.status = run_case(op, &h, t, data);
            r.ns = (uint64_t) (hx_monotonic_ns() - t0);
            r.pcycles = pcycles() - c0;
        }
        if (hx_write_all(out, &r, sizeof r) || hx_write_all(out, data[h.n_src], r.nbytes)) fail("cannot write results");
        hx_heap_release(mark);
    }
    hx_close(progress);
    hx_close(out);
    hx_close(in);
    return 0;
}
