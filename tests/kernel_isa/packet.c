/*
 * HVX float instructions sharing packets, at the per-packet limits the assembler accepts
 * (qemu-hexagon-hvx/check-encodings.py --slots), and a compiler-scheduled chain of intrinsics
 * (see hvx_isa.h for the protocol).  An op named *_b runs the same packet as the op before it
 * and returns its other results.
 */
#include "hvx_isa.h"

#define PK(NAME, BODY, LO, HI, ...)                                           \
    ISA_FN(NAME)                                                              \
    {                                                                         \
        HVX_Vector lo, hi;                                                    \
        asm("r7 = #-1\n" BODY "\n%0 = " LO "\n%1 = " HI                       \
            : "=&v"(lo), "=&v"(hi)                                            \
            : "v"(in[0]), "v"(in[1]), "v"(in[2]), "v"(in[3]), "r"(in)         \
            : "r7", "r20", "r21", "q0", "v10", "v11", "v12", "memory");       \
        out[0] = lo;                                                          \
        out[1] = hi;                                                          \
    }

/* two VX (slots 2 and 3) beside two loads (slots 0 and 1) */
#define VX2 "{ v10.sf = vadd(%2.sf,%3.sf)\n v11.sf = vsub(%2.sf,%3.sf)\n" \
            "  r20 = memw(%6+#0)\n r21 = memw(%6+#4) }"
PK(pk_vx2, VX2, "v10", "v11")

/* VX_DV multiply, VS add and VA max */
#define MIX3 "{ v10.qf32 = vmpy(%2.sf,%3.sf)\n v11.qf32 = vadd(%4.sf,%5.sf)\n v12.sf = vmax(%2.sf,%4.sf) }"
PK(pk_mix3, MIX3, "v10", "v11")
PK(pk_mix3_b, MIX3, "v12", "v10")

/* four VA: compare, max and two min */
#define VA4 "{ q0 = vcmp.gt(%2.sf,%3.sf)\n v10.sf = vmax(%2.sf,%3.sf)\n" \
            "  v11.hf = vmin(%4.hf,%5.hf)\n v12.sf = vmin(%2.sf,%3.sf) }"
PK(pk_va4, VA4, "v10", "v11")
PK(pk_va4_b, VA4 "\nv11 = vand(q0,r7)", "v12", "v11")

/* a pair-producing qfloat multiply and a qfloat subtract beside two loads */
#define DV "{ v11:10.qf32 = vmpy(%2.hf,%3.hf)\n v12.qf32 = vsub(%4.sf,%5.sf)\n" \
           "  r20 = memw(%6+#0)\n r21 = memw(%6+#4) }"
PK(pk_dv, DV, "v10", "v11")
PK(pk_dv_b, DV, "v12", "v12")

/* one of each: VX, VS, VA and a load */
#define ALL "{ v10.sf = vadd(%2.sf,%3.sf)\n v11.qf32 = vadd(%4.sf,%5.sf)\n" \
            "  v12.sf = vmax(%2.sf,%3.sf)\n r20 = memw(%6+#0) }"
PK(pk_all, ALL, "v10", "v11")
PK(pk_all_b, ALL, "v12", "v12")

/* two VX in slots 2 and 3 push a VS qfloat add (or conversion) and a VA compare into 1 and 0 */
#define VX2VS "{ v10.sf = vadd(%2.sf,%3.sf)\n v11.sf = vsub(%2.sf,%3.sf)\n" \
              "  v12.qf32 = vadd(%4.sf,%5.sf)\n q0 = vcmp.gt(%2.sf,%3.sf) }"
PK(pk_vx2_vs, VX2VS, "v12", "v10")
#define VX2CONV "{ v10.sf = vadd(%2.sf,%3.sf)\n v11.sf = vsub(%2.sf,%3.sf)\n v12.sf = %5.qf32 }"
PK(pk_vx2_conv, VX2CONV, "v12", "v11")

/* the hf->sf accumulate beside a vector load */
#define ACC "v11:10 = vcombine(%5,%4)\n{ v11:10.sf += vmpy(%2.hf,%3.hf)\n v12 = vmem(%6+#0) }"
PK(pk_acc, ACC, "v10", "v11")

/*
 * The compiler schedules these, as it does llama.cpp's kernels: independent IEEE adds pair up
 * in slots 2 and 3, .sf max/min fill a packet, qfloat results feed .new stores.
 */
ISA_FN(cc_qf_chain)
{
    HVX_Vector hi = Q6_Vsf_vmax_VsfVsf(in[0], in[1]);
    HVX_Vector lo = Q6_Vsf_vmin_VsfVsf(in[2], in[3]);
    HVX_Vector p = Q6_Vqf32_vmpy_VsfVsf(hi, lo);
    HVX_Vector s = Q6_Vqf32_vadd_VsfVsf(Q6_Vsf_vmax_VsfVsf(in[0], in[2]), Q6_Vsf_vmin_VsfVsf(in[1], in[3]));
    out[0] = Q6_Vsf_equals_Vqf32(Q6_Vqf32_vadd_Vqf32Vqf32(p, s));
    out[1] = Q6_Vsf_equals_Vqf32(Q6_Vqf32_vsub_Vqf32Vsf(s, hi));
}

ISA_FN(cc_ieee_chain)
{
    HVX_Vector ab = Q6_Vsf_vadd_VsfVsf(in[0], in[1]);
    HVX_Vector cd = Q6_Vsf_vadd_VsfVsf(in[2], in[3]);
    HVX_Vector a_b = Q6_Vsf_vsub_VsfVsf(in[0], in[1]);
    HVX_Vector c_d = Q6_Vsf_vsub_VsfVsf(in[2], in[3]);
    out[0] = Q6_Vsf_vadd_VsfVsf(ab, cd);
    out[1] = Q6_Vsf_vsub_VsfVsf(a_b, c_d);
}

static const struct isa_insn table[] = {
    { "pk_vx2", pk_vx2 }, { "pk_mix3", pk_mix3 }, { "pk_mix3_b", pk_mix3_b },
    { "pk_va4", pk_va4 }, { "pk_va4_b", pk_va4_b }, { "pk_dv", pk_dv }, { "pk_dv_b", pk_dv_b },
    { "pk_all", pk_all }, { "pk_all_b", pk_all_b }, { "pk_vx2_vs", pk_vx2_vs },
    { "pk_vx2_conv", pk_vx2_conv }, { "pk_acc", pk_acc },
    { "cc_qf_chain", cc_qf_chain }, { "cc_ieee_chain", cc_ieee_chain },
};

ISA_PROGRAM(table)
