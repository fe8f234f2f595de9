/* Conversions between .sf, .hf and integers (see hvx_isa.h) */
#include "hvx_isa.h"

W_V(vcvt_sf_hf, "%0.sf = vcvt(%1.hf)")
V_VV(vcvt_hf_sf, "%0.hf = vcvt(%1.sf,%2.sf)")
V_V(vcvt_hf_h, "%0.hf = vcvt(%1.h)")
V_V(vcvt_hf_uh, "%0.hf = vcvt(%1.uh)")
V_V(vcvt_h_hf, "%0.h = vcvt(%1.hf)")
V_V(vcvt_uh_hf, "%0.uh = vcvt(%1.hf)")
W_V(vcvt_hf_b, "%0.hf = vcvt(%1.b)")
W_V(vcvt_hf_ub, "%0.hf = vcvt(%1.ub)")
V_VV(vcvt_b_hf, "%0.b = vcvt(%1.hf,%2.hf)")
V_VV(vcvt_ub_hf, "%0.ub = vcvt(%1.hf,%2.hf)")
V_V(vconv_sf_w, "%0.sf = %1.w")
V_V(vconv_w_sf, "%0.w = %1.sf")
V_V(vconv_hf_h, "%0.hf = %1.h")
V_V(vconv_h_hf, "%0.h = %1.hf")

static const struct isa_insn table[] = {
    { "vcvt_sf_hf", vcvt_sf_hf }, { "vcvt_hf_sf", vcvt_hf_sf }, { "vcvt_hf_h", vcvt_hf_h },
    { "vcvt_hf_uh", vcvt_hf_uh }, { "vcvt_h_hf", vcvt_h_hf }, { "vcvt_uh_hf", vcvt_uh_hf },
    { "vcvt_hf_b", vcvt_hf_b }, { "vcvt_hf_ub", vcvt_hf_ub }, { "vcvt_b_hf", vcvt_b_hf },
    { "vcvt_ub_hf", vcvt_ub_hf }, { "vconv_sf_w", vconv_sf_w }, { "vconv_w_sf", vconv_w_sf },
    { "vconv_hf_h", vconv_hf_h }, { "vconv_h_hf", vconv_h_hf },
};

ISA_PROGRAM(table)
