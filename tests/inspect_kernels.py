"""Genuine Hexagon NPU libraries with planted kernel problems, for `hexbuild inspect` tests.

    from tests import inspect_kernels as ik
    lib = ik.build(tmp_path / "libggml-htp-v73.so", "v73")              # every kernel below
    lib = ik.build(path, "v73", debug=True)                             # with DWARF (-g)
    lib = ik.build(path, "v73", kernels=ik.CLEAN)                       # only the clean ones
    ik.line_of("DIVIDE")                                                # source line of a marker

Built with clang-19 (``--target=hexagon -mvNN -mhvx -mhvx-length=128b -O2 -fPIC -shared
-nostdlib -fuse-ld=lld``): the compiler helpers are left undefined, so lld resolves every call
to them through the PLT, as in a real skel. Each library exports the FastRPC skel entry point
and op_matmul, so `verify` accepts it. Cached by content like tests/elf_factory.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tests import elf_factory as ef

HEADER = """\
typedef int HVX_Vector __attribute__((__vector_size__(128), __aligned__(128)));
int htp_iface_skel_handle_invoke(int x) { return x + 1; }
int op_matmul(int x) { return x * 3; }
"""

KERNELS = {
    # A clean hardware loop: one vector add per element, no stack traffic, no calls.
    "clean_hvx_add": """\
void clean_hvx_add(const HVX_Vector *a, const HVX_Vector *b, HVX_Vector *c, int n) {
  for (int i = 0; i < n; i++) c[i] = __builtin_HEXAGON_V6_vaddw_128B(a[i], b[i]);
}
""",
    # Hardware float in a hardware loop: no helper.
    "clean_scale": """\
void clean_scale(const float *x, float *y, float s, int n) {
  for (int i = 0; i < n; i++) y[i] = x[i] * s;
}
""",
    # No loop at all.
    "clean_scalar": """\
int clean_scalar(int x) { return x * 7 + 3; }
""",
    # 40 accumulators live across the loop: more than the 32 HVX registers, so they spill.
    "spill_accumulators": """\
#define NACC 40
void spill_accumulators(const HVX_Vector *a, HVX_Vector *c, int n) {
  HVX_Vector acc[NACC];
  for (int j = 0; j < NACC; j++) acc[j] = a[j];
  for (int i = 0; i < n; i++) {
    HVX_Vector x = a[i + NACC];
#pragma clang loop unroll(full)
    for (int j = 0; j < NACC; j++)
      acc[j] = __builtin_HEXAGON_V6_vaddw_128B(acc[j], __builtin_HEXAGON_V6_vmpyiewuh_128B(x, acc[(j + 1) % NACC]));
  }
  for (int j = 0; j < NACC; j++) c[j] = acc[j];
}
""",
    # An unsigned divide per element: __hexagon_udivsi3 through the PLT, inside the loop.
    "div_in_loop": """\
unsigned div_in_loop(const unsigned *a, const unsigned *b, int n) {
  unsigned s = 0;
#pragma clang loop unroll(disable)
  for (int i = 0; i < n; i++)
    s += a[i] / b[i]; /* DIVIDE */
  return s;
}
""",
    # One divide outside any loop: reported, but not a gate finding.
    "div_once": """\
unsigned div_once(unsigned a, unsigned b) { return a / b; }
""",
    # _Float16 → float per element: __extendhfsf2 in the loop (a float promotion).
    "half_sum": """\
float half_sum(const _Float16 *x, int n) {
  float s = 0;
#pragma clang loop unroll(disable)
  for (int i = 0; i < n; i++) s += (float)x[i]; /* PROMOTION */
  return s;
}
""",
}
CLEAN = ("clean_hvx_add", "clean_scale", "clean_scalar")
PLANTED = ("spill_accumulators", "div_in_loop", "half_sum")


def source(kernels: Sequence[str] = tuple(KERNELS)) -> str:
    return HEADER + "".join(KERNELS[k] for k in kernels)


def line_of(marker: str, kernels: Sequence[str] = tuple(KERNELS)) -> int:
    for i, line in enumerate(source(kernels).splitlines(), 1):
        if f"/* {marker} */" in line:
            return i
    raise KeyError(marker)


def build(out: Path | str, version: str = "v73", *, kernels: Sequence[str] = tuple(KERNELS),
          debug: bool = False, extra: str = "") -> Path:
    arch = version.lstrip("vV")
    flags = ["--target=hexagon", f"-mv{arch}", "-mhvx", "-mhvx-length=128b", "-fPIC", "-shared"]
    if debug:
        flags.append("-g")
    return ef._place(ef._compile(source(kernels) + extra, flags), out, 0o644)
