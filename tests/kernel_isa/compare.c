/* .sf/.hf vmax, vmin and vcmp.gt (see hvx_isa.h) */
#include "hvx_isa.h"

V_VV(vmax_sf, "%0.sf = vmax(%1.sf,%2.sf)")
V_VV(vmin_sf, "%0.sf = vmin(%1.sf,%2.sf)")
V_VV(vmax_hf, "%0.hf = vmax(%1.hf,%2.hf)")
V_VV(vmin_hf, "%0.hf = vmin(%1.hf,%2.hf)")
Q_VV(vgtsf, "q0 = vcmp.gt(%1.sf,%2.sf)")
QACC(vgtsf_and, "q0 &= vcmp.gt(%1.sf,%2.sf)")
QACC(vgtsf_or, "q0 |= vcmp.gt(%1.sf,%2.sf)")
QACC(vgtsf_xor, "q0 ^= vcmp.gt(%1.sf,%2.sf)")
Q_VV(vgthf, "q0 = vcmp.gt(%1.hf,%2.hf)")
QACC(vgthf_and, "q0 &= vcmp.gt(%1.hf,%2.hf)")
QACC(vgthf_or, "q0 |= vcmp.gt(%1.hf,%2.hf)")
QACC(vgthf_xor, "q0 ^= vcmp.gt(%1.hf,%2.hf)")

static const struct isa_insn table[] = {
    { "vmax_sf", vmax_sf }, { "vmin_sf", vmin_sf }, { "vmax_hf", vmax_hf }, { "vmin_hf", vmin_hf },
    { "vgtsf", vgtsf }, { "vgtsf_and", vgtsf_and }, { "vgtsf_or", vgtsf_or }, { "vgtsf_xor", vgtsf_xor },
    { "vgthf", vgthf }, { "vgthf_and", vgthf_and }, { "vgthf_or", vgthf_or }, { "vgthf_xor", vgthf_xor },
};

ISA_PROGRAM(table)
