/* qfloat (.qf32/.qf16) arithmetic and conversions to IEEE (see hvx_isa.h) */
#include "hvx_isa.h"

V_VV(vadd_qf32, "%0.qf32 = vadd(%1.qf32,%2.qf32)")
V_VV(vadd_sf, "%0.qf32 = vadd(%1.sf,%2.sf)")
V_VV(vadd_qf32_mix, "%0.qf32 = vadd(%1.qf32,%2.sf)")
V_VV(vsub_qf32, "%0.qf32 = vsub(%1.qf32,%2.qf32)")
V_VV(vsub_sf, "%0.qf32 = vsub(%1.sf,%2.sf)")
V_VV(vsub_qf32_mix, "%0.qf32 = vsub(%1.qf32,%2.sf)")
V_VV(vadd_qf16, "%0.qf16 = vadd(%1.qf16,%2.qf16)")
V_VV(vadd_hf, "%0.qf16 = vadd(%1.hf,%2.hf)")
V_VV(vadd_qf16_mix, "%0.qf16 = vadd(%1.qf16,%2.hf)")
V_VV(vsub_qf16, "%0.qf16 = vsub(%1.qf16,%2.qf16)")
V_VV(vsub_hf, "%0.qf16 = vsub(%1.hf,%2.hf)")
V_VV(vsub_qf16_mix, "%0.qf16 = vsub(%1.qf16,%2.hf)")
V_VV(vmpy_qf32, "%0.qf32 = vmpy(%1.qf32,%2.qf32)")
V_VV(vmpy_qf32_sf, "%0.qf32 = vmpy(%1.sf,%2.sf)")
V_VV(vmpy_qf16, "%0.qf16 = vmpy(%1.qf16,%2.qf16)")
V_VV(vmpy_qf16_hf, "%0.qf16 = vmpy(%1.hf,%2.hf)")
V_VV(vmpy_qf16_mix_hf, "%0.qf16 = vmpy(%1.qf16,%2.hf)")
W_VV(vmpy_qf32_qf16, "%0.qf32 = vmpy(%1.qf16,%2.qf16)")
W_VV(vmpy_qf32_hf, "%0.qf32 = vmpy(%1.hf,%2.hf)")
W_VV(vmpy_qf32_mix_hf, "%0.qf32 = vmpy(%1.qf16,%2.hf)")
V_V(vconv_sf_qf32, "%0.sf = %1.qf32")
V_V(vconv_hf_qf16, "%0.hf = %1.qf16")
V_W(vconv_hf_qf32, "%0.hf = %1.qf32")

static const struct isa_insn table[] = {
    { "vadd_qf32", vadd_qf32 }, { "vadd_sf", vadd_sf }, { "vadd_qf32_mix", vadd_qf32_mix },
    { "vsub_qf32", vsub_qf32 }, { "vsub_sf", vsub_sf }, { "vsub_qf32_mix", vsub_qf32_mix },
    { "vadd_qf16", vadd_qf16 }, { "vadd_hf", vadd_hf }, { "vadd_qf16_mix", vadd_qf16_mix },
    { "vsub_qf16", vsub_qf16 }, { "vsub_hf", vsub_hf }, { "vsub_qf16_mix", vsub_qf16_mix },
    { "vmpy_qf32", vmpy_qf32 }, { "vmpy_qf32_sf", vmpy_qf32_sf }, { "vmpy_qf16", vmpy_qf16 },
    { "vmpy_qf16_hf", vmpy_qf16_hf }, { "vmpy_qf16_mix_hf", vmpy_qf16_mix_hf },
    { "vmpy_qf32_qf16", vmpy_qf32_qf16 }, { "vmpy_qf32_hf", vmpy_qf32_hf },
    { "vmpy_qf32_mix_hf", vmpy_qf32_mix_hf },
    { "vconv_sf_qf32", vconv_sf_qf32 }, { "vconv_hf_qf16", vconv_hf_qf16 },
    { "vconv_hf_qf32", vconv_hf_qf32 },
};

ISA_PROGRAM(table)
