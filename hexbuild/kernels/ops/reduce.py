"""Reductions along rows: SUM_ROWS (sum-rows-ops.c) and CUMSUM (cumsum-ops.c), f32 and
contiguous as the backend sends them.

SUM_ROWS: one sum per row (dst ne0 = 1); rows a multiple of 32 and not, more rows than
threads. (The kernel's aligned-load path is taken when src0 is *not* 128-byte aligned, which
looks inverted; the harness aligns every tensor, so the cases take the other path.)
CUMSUM: the running sum along each row (HVX prefix scans of 32 lanes with a carry), the shapes
of test-backend-ops (10, 127, 128 wide) and a long row.

Reference: float64 sums of the stored inputs, uniform [-1, 1] as test-backend-ops draws them.
Tolerance: its default 1e-7."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, rounded, src

TOLERANCE = 1e-7
SUM_ROWS = ((4096, 3, 1, 1), (100, 7, 2, 1), (17, 5, 1, 1), (1000, 9, 1, 1))
CUMSUM = ((10, 5, 4, 3), (127, 5, 4, 3), (128, 5, 4, 3), (4100, 2, 1, 1))


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    for ne in SUM_ROWS if op == "SUM_ROWS" else CUMSUM:
        x = rounded(rng.uniform(-1, 1, tuple(reversed(ne))), "f32")
        if op == "SUM_ROWS":
            want, out = np.sum(x, axis=-1, keepdims=True), dst("f32", (1, *ne[1:]))
        else:
            want, out = np.cumsum(x, axis=-1), dst("f32", ne)
        cases.append(case(op, "f32", label(ne=ne), [src("f32", x)], out, want, TOLERANCE))
    return cases


FAMILY = Family(ops=("SUM_ROWS", "CUMSUM"), types=("f32",), default_types=("f32",), make=make)
