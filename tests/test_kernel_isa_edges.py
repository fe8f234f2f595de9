"""The edges of the qfloat model that the random tests of test_kernel_isa.py stay away from, pinned
as qemu-hexagon-hvx/README.md documents them: exponent saturation, zeros, IEEE infinities read
as 2^128, conversions of values from 2^128 up, and the saturating byte conversion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests import hvx_models as M

HERE = Path(__file__).parent / "kernel_isa"

INF, NINF, ONE, TWO, FIVE = 0x7F800000, 0xFF800000, 0x3F800000, 0x40000000, 0x40A00000
QF_BIG = (0x7FFFFF << 8) | 0xFE          # ~2^128, at the largest exponent but one
QF_TINY = 0x00000002                     # 2^-148 (m = 0, E = 2)

# (program, instruction, lanes of a, lanes of b, expected lanes of lo, element type)
CASES = [
    # a product beyond the largest exponent saturates to the largest mantissa at E = 255
    ("qfloat", "vmpy_qf32", [QF_BIG, QF_BIG ^ 0xFFFFFF00], [QF_BIG, QF_BIG], [0x7FFFFFFF, 0x800000FF], np.uint32),
    # below the smallest exponent to the half unit at E = 0, with the sign
    ("qfloat", "vmpy_qf32", [QF_TINY, QF_TINY ^ 0xFFFFFF00], [QF_TINY, QF_TINY], [0x00000000, 0xFFFFFF00], np.uint32),
    # an exact zero is m = 0, E = 0 (2^-150); -0 + -0 adds the magnitudes and negates
    ("qfloat", "vsub_sf", [FIVE, 0x80000000], [FIVE, 0x80000000], [0x00000000, 0x00000000], np.uint32),
    ("qfloat", "vadd_sf", [0x80000000, 0], [0x80000000, 0], [0xFFFFFF00, 0x00000000], np.uint32),
    # IEEE infinities read as 2^128: inf + 1 rounds to (2^23 + 1) * 2^105 at E = 255
    ("qfloat", "vadd_sf", [INF, NINF], [ONE, ONE ^ 0x80000000], [0x400000FF, 0xBFFFFFFF], np.uint32),
    # and inf * 2 saturates
    ("qfloat", "vmpy_qf32_sf", [INF, NINF], [TWO, TWO], [0x7FFFFFFF, 0x800000FF], np.uint32),
    # qf32 from 2^128 up: the all-ones exponent keeps the rounded fraction (a NaN pattern, or
    # inf when it is 0); from 2^129 - 2^105 the result is all ones
    ("qfloat", "vconv_sf_qf32", [0x400000FF, 0xBFFFFFFF, 0x000000FF, 0x7FFFFFFF, 0x800000FF, 0x7FFFFEFF],
     [0] * 6, [0x7F800001, 0xFF800001, 0x74000000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FFFFFFD], np.uint32),
    # qf16 from 2^16 up likewise; hf of qf32 saturates from 2^17 - 2^6
    ("qfloat", "vconv_hf_qf16", [(0x200 << 5) | 0x1F, 0x7FFF, 0x0001 << 5], [0] * 3, [0x7C01, 0x7FFF, 0x0002], np.uint16),
    # 127.5 and 255.5 saturate to 127 and 255 (Qualcomm's model wraps 127.5 to -128)
    ("convert", "vcvt_b_hf", [0x57F8, 0xD808, 0x57FC, 0x5000], [0, 0], [127, -128, 0, 0, 127, 32, 0, 0], np.int8),
]


@pytest.fixture(scope="session")
def programs(kernel_env, tmp_path_factory):
    out, cache = tmp_path_factory.mktemp("kernel_isa_edges"), {}

    def get(prog):
        if prog not in cache:
            elf = kernel_env.compile([HERE / f"{prog}.c"], out / prog)
            cache[prog] = (elf, M.program_names(kernel_env, elf))
        return cache[prog]
    return get


def vector(lanes, dtype):
    v = np.zeros(M.VBYTES // np.dtype(dtype).itemsize, dtype)
    v[: len(lanes)] = np.array(lanes, dtype=np.int64).astype(dtype)
    return v


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_edge(kernel_env, programs, case):
    prog, name, a, b, want, dtype = case
    in_type = np.uint16 if name in ("vcvt_b_hf", "vconv_hf_qf16") else np.uint32
    x = (vector(a, in_type), vector(b, in_type), vector([], np.uint32), vector([], np.uint32))
    lo, _ = M.run_program(kernel_env, *programs(prog), name, x)
    got = lo.view(dtype).ravel()[: len(want)]
    assert [int(v) for v in got] == [int(v) for v in np.array(want, np.int64).astype(dtype)], \
        f"{name}: {[hex(int(v) & 0xFFFFFFFF) for v in got]}"
