"""SOLVE_TRI (solve-tri-ops.c): X with A X = B for a lower-triangular A, per batch (ggml_solve_tri
with left, lower, not unit: the only variant ggml has). A is [n, n] (row i in ggml's dim 1), B and
X are [k, n] (k right-hand sides in dim 0); the shapes of test-backend-ops, taking the kernel's
batched and chunked paths, HVX rows of 8+ columns and the scalar ones.

test-backend-ops draws A's lower triangle from [0.1, 1], which for n of 30 and more makes A so
ill-conditioned that any float32 solver's answer is far from the exact one (test-backend-ops
compares two float32 solvers). The reference here is the exact solution in float64, so A is
well-conditioned instead: a diagonal in [1, 2] and the rest in [-1, 1] / n. Tolerance:
test-backend-ops' default 1e-7."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, rounded, src

TOLERANCE = 1e-7
# (n, k, batch dims 2 and 3)
SHAPES = ((11, 5, 1, 1), (17, 9, 2, 4), (42, 10, 5, 2), (64, 64, 2, 2), (79, 417, 1, 1))


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    for n, k, b2, b3 in SHAPES:
        a = np.tril(rng.uniform(-1, 1, (b3, b2, n, n)) / n, -1)
        a[..., np.arange(n), np.arange(n)] = rng.uniform(1, 2, (b3, b2, n))
        a = rounded(a, "f32")
        b = rounded(rng.uniform(-1, 1, (b3, b2, n, k)), "f32")
        x = np.linalg.solve(a, b)
        cases.append(case(op, "f32", label(n=n, k=k, batch=(b2, b3)), [src("f32", a), src("f32", b)],
                          dst("f32", (k, n, b2, b3)), x, TOLERANCE))   # ggml_solve_tri sets no op_params
    return cases


FAMILY = Family(ops=("SOLVE_TRI",), types=("f32",), default_types=("f32",), make=make)
