"""ARGSORT (argsort-ops.c): the i32 indices that sort each f32 row, ascending or descending
(op_params[0], ggml_sort_order), rows up to 16K values as the backend sends them.

The kernel sorts a copy of each row in VTCM by a quicksort with HVX scans. Values are distinct,
so the indices have one right answer and the check is exact: the error is the fraction of
indices that differ (test-backend-ops' NMSE of 1e-7 over index values would let a swap of
neighbours in a long row pass). Row lengths: short, not a multiple of 32, and over a thousand
(the recursion), with more rows than threads."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, src

ASC, DESC = 0, 1
SHAPES = ((7, 3, 1, 1), (100, 6, 1, 1), (1025, 2, 1, 3), (32, 5, 2, 1), (4000, 1, 1, 1))


def mismatched(got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        return float("inf")
    return float(np.mean(got != want))


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    for i, ne in enumerate(SHAPES):
        order = ASC if i % 2 == 0 else DESC
        n = int(np.prod(ne))
        # distinct float32 values: a random permutation of a strictly increasing sequence
        x = (np.arange(n, dtype=np.float64) * 0.37 - n * 0.15)[rng.permutation(n)].reshape(tuple(reversed(ne)))
        x = x.astype(np.float32).astype(np.float64)
        want = np.argsort(x if order == ASC else -x, axis=-1, kind="stable")
        cases.append(case(op, "f32", label(ne=ne) + (" asc" if order == ASC else " desc"), [src("f32", x)],
                          dst("i32", ne), want, 0.0, params=[order], check=mismatched))
    return cases


FAMILY = Family(ops=("ARGSORT",), types=("f32",), default_types=("f32",), make=make)
