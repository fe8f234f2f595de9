/*
 * Runs single HVX instructions for tests/test_kernel_isa.py under qemu-hexagon.
 *
 * A freestanding program (no libc): Linux system calls through trap0, the number in r6.
 *   stdin:  u32 op, u32 n, then n records of four 128-byte vectors a, b, c, d
 *   stdout: two 128-byte vectors lo, hi for each record
 * Op 0xffffffff writes the instruction names instead, one a line, in table order.
 *
 * Each instruction is inline assembly (its exact mnemonic), fed from a, b (and c, d):
 *   V_VV  lo = op(a, b)            V_V   lo = op(a)
 *   W_VV  hi:lo = op(a, b)         W_V   hi:lo = op(a)
 *   WACC  hi:lo = d:c; hi:lo += op(a, b)
 *   V_W   lo = op(b:a)
 *   Q_VV  lo = op(a, b) as bytes   QACC  q = c (bytes != 0); q op= (a, b); lo = q as bytes
 */

#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

typedef void (*isa_fn)(const HVX_Vector *in, HVX_Vector *out);

struct isa_insn {
    const char *name;
    isa_fn fn;
};

static long isa_syscall(long nr, long a, long b, long c)
{
    register long r0 asm("r0") = a;
    register long r1 asm("r1") = b;
    register long r2 asm("r2") = c;
    register long r6 asm("r6") = nr;
    asm volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

static int isa_read(void *buf, long len)
{
    char *p = buf;
    while (len > 0) {
        long got = isa_syscall(63, 0, (long)p, len);
        if (got <= 0) {
            return -1;
        }
        p += got;
        len -= got;
    }
    return 0;
}

static int isa_write(const void *buf, long len)
{
    const char *p = buf;
    while (len > 0) {
        long put = isa_syscall(64, 1, (long)p, len);
        if (put <= 0) {
            return -1;
        }
        p += put;
        len -= put;
    }
    return 0;
}

static HVX_Vector isa_in[4] __attribute__((aligned(128)));
static HVX_Vector isa_out[2] __attribute__((aligned(128)));

static int isa_main(const struct isa_insn *table, unsigned count)
{
    unsigned head[2];
    if (isa_read(head, sizeof(head))) {
        return 2;
    }
    if (head[0] == 0xffffffffu) {
        for (unsigned i = 0; i < count; i++) {
            long len = 0;
            while (table[i].name[len]) {
                len++;
            }
            if (isa_write(table[i].name, len) || isa_write("\n", 1)) {
                return 3;
            }
        }
        return 0;
    }
    if (head[0] >= count) {
        return 4;
    }
    for (unsigned n = 0; n < head[1]; n++) {
        if (isa_read(isa_in, sizeof(isa_in))) {
            return 5;
        }
        table[head[0]].fn(isa_in, isa_out);
        if (isa_write(isa_out, sizeof(isa_out))) {
            return 6;
        }
    }
    return 0;
}

#define ISA_PROGRAM(TABLE)                                                    \
    void _start(void)                                                         \
    {                                                                         \
        isa_syscall(93, isa_main(TABLE, sizeof(TABLE) / sizeof(TABLE[0])), 0, 0); \
        for (;;) {                                                            \
        }                                                                     \
    }

#define ISA_FN(NAME) static void NAME(const HVX_Vector *in, HVX_Vector *out)

#define V_VV(NAME, ASM)                                                       \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_Vector d;                                                         \
        asm(ASM : "=v"(d) : "v"(in[0]), "v"(in[1]));                          \
        out[0] = d;                                                           \
        out[1] = Q6_V_vzero();                                                \
    }

#define V_V(NAME, ASM)                                                        \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_Vector d;                                                         \
        asm(ASM : "=v"(d) : "v"(in[0]));                                      \
        out[0] = d;                                                           \
        out[1] = Q6_V_vzero();                                                \
    }

#define W_VV(NAME, ASM)                                                       \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_VectorPair d;                                                     \
        asm(ASM : "=v"(d) : "v"(in[0]), "v"(in[1]));                          \
        out[0] = Q6_V_lo_W(d);                                                \
        out[1] = Q6_V_hi_W(d);                                                \
    }

#define W_V(NAME, ASM)                                                        \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_VectorPair d;                                                     \
        asm(ASM : "=v"(d) : "v"(in[0]));                                      \
        out[0] = Q6_V_lo_W(d);                                                \
        out[1] = Q6_V_hi_W(d);                                                \
    }

#define WACC(NAME, ASM)                                                       \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_VectorPair x = Q6_W_vcombine_VV(in[3], in[2]);                    \
        asm(ASM : "+v"(x) : "v"(in[0]), "v"(in[1]));                          \
        out[0] = Q6_V_lo_W(x);                                                \
        out[1] = Q6_V_hi_W(x);                                                \
    }

#define V_W(NAME, ASM)                                                        \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_Vector d;                                                         \
        HVX_VectorPair u = Q6_W_vcombine_VV(in[1], in[0]);                    \
        asm(ASM : "=v"(d) : "v"(u));                                          \
        out[0] = d;                                                           \
        out[1] = Q6_V_vzero();                                                \
    }

/* ASM writes q0 from %1 and %2 */
#define Q_VV(NAME, ASM)                                                       \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_Vector d;                                                         \
        asm("r7 = #-1\n" ASM "\n%0 = vand(q0,r7)"                             \
            : "=v"(d) : "v"(in[0]), "v"(in[1]) : "r7", "q0");                 \
        out[0] = d;                                                           \
        out[1] = Q6_V_vzero();                                                \
    }

/* ASM updates q0, which starts from the bytes of c */
#define QACC(NAME, ASM)                                                       \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_Vector d;                                                         \
        asm("r7 = #-1\nq0 = vand(%3,r7)\n" ASM "\n%0 = vand(q0,r7)"           \
            : "=v"(d) : "v"(in[0]), "v"(in[1]), "v"(in[2]) : "r7", "q0");     \
        out[0] = d;                                                           \
        out[1] = Q6_V_vzero();                                                \
    }
