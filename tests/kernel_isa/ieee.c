/* IEEE .sf/.hf arithmetic, min/max, sign and move (see hvx_isa.h) */
#include "hvx_isa.h"

V_VV(vadd_sf_sf, "%0.sf = vadd(%1.sf,%2.sf)")
V_VV(vsub_sf_sf, "%0.sf = vsub(%1.sf,%2.sf)")
V_VV(vmpy_sf_sf, "%0.sf = vmpy(%1.sf,%2.sf)")
V_VV(vadd_hf_hf, "%0.hf = vadd(%1.hf,%2.hf)")
V_VV(vsub_hf_hf, "%0.hf = vsub(%1.hf,%2.hf)")
V_VV(vmpy_hf_hf, "%0.hf = vmpy(%1.hf,%2.hf)")
W_VV(vadd_sf_hf, "%0.sf = vadd(%1.hf,%2.hf)")
W_VV(vsub_sf_hf, "%0.sf = vsub(%1.hf,%2.hf)")
W_VV(vmpy_sf_hf, "%0.sf = vmpy(%1.hf,%2.hf)")
WACC(vmpy_sf_hf_acc, "%0.sf += vmpy(%1.hf,%2.hf)")
V_VV(vfmax_sf, "%0.sf = vfmax(%1.sf,%2.sf)")
V_VV(vfmin_sf, "%0.sf = vfmin(%1.sf,%2.sf)")
V_VV(vfmax_hf, "%0.hf = vfmax(%1.hf,%2.hf)")
V_VV(vfmin_hf, "%0.hf = vfmin(%1.hf,%2.hf)")
V_V(vfneg_sf, "%0.sf = vfneg(%1.sf)")
V_V(vfneg_hf, "%0.hf = vfneg(%1.hf)")
V_V(vabs_sf, "%0.sf = vabs(%1.sf)")
V_V(vabs_hf, "%0.hf = vabs(%1.hf)")
V_V(vassign_fp, "%0.w = vfmv(%1.w)")

static const struct isa_insn table[] = {
    { "vadd_sf_sf", vadd_sf_sf }, { "vsub_sf_sf", vsub_sf_sf }, { "vmpy_sf_sf", vmpy_sf_sf },
    { "vadd_hf_hf", vadd_hf_hf }, { "vsub_hf_hf", vsub_hf_hf }, { "vmpy_hf_hf", vmpy_hf_hf },
    { "vadd_sf_hf", vadd_sf_hf }, { "vsub_sf_hf", vsub_sf_hf }, { "vmpy_sf_hf", vmpy_sf_hf },
    { "vmpy_sf_hf_acc", vmpy_sf_hf_acc },
    { "vfmax_sf", vfmax_sf }, { "vfmin_sf", vfmin_sf }, { "vfmax_hf", vfmax_hf }, { "vfmin_hf", vfmin_hf },
    { "vfneg_sf", vfneg_sf }, { "vfneg_hf", vfneg_hf }, { "vabs_sf", vabs_sf }, { "vabs_hf", vabs_hf },
    { "vassign_fp", vassign_fp },
};

ISA_PROGRAM(table)
