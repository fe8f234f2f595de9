"""GET_ROWS (get-rows-ops.c) and SET_ROWS (set-rows-ops.c), with i32 and i64 indices.

GET_ROWS: f32 rows of src0 picked by src1 (ggml_get_rows: dst[i12][i11][i10] = src0[i12][i11][
src1[i12][i11][i10]]), as the backend sends it (f32 in and out). Rows of 2048 values and more
are moved by DMA, shorter ones by HVX copies; indices repeat and come in any order.

SET_ROWS: f32 rows of src0 written into the f16 destination (the KV cache) at the rows src1
names, src1 repeating over src0's dims 2 and 3 (ne02 % ne11 == 0); the backend sends f16
destinations only. The destination starts with the cache's old contents (HXK_DST_INIT): rows
not named must keep them. The reference rounds to f16 as ggml does (nearest even).

Both are copies: exact but for the f16 rounding. Tolerance: test-backend-ops' default 1e-7."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, rounded, src

TOLERANCE = 1e-7


def _get_rows(rng: np.random.Generator, op: str) -> list:
    cases = []
    # (src0 ne, indices per (i11, i12), index type)
    for ne0, n_idx, itype in (((4096, 10, 1, 1), 5, "i32"), ((100, 20, 2, 1), 7, "i32"), ((33, 8, 1, 1), 12, "i64"),
                              ((2048, 6, 3, 1), 3, "i64")):
        x = rounded(rng.uniform(-1, 1, tuple(reversed(ne0))), "f32")   # (ne03, ne02, ne01, ne00)
        idx = rng.integers(0, ne0[1], (ne0[3], ne0[2], n_idx))           # (i12, i11, i10)
        want = np.stack([np.stack([x[i3, i2, idx[i3, i2]] for i2 in range(ne0[2])]) for i3 in range(ne0[3])])
        cases.append(case(op, "f32", label(src=ne0, rows=n_idx) + f" {itype}",
                          [src("f32", x), src(itype, idx)], dst("f32", (ne0[0], n_idx, ne0[2], ne0[3])), want,
                          TOLERANCE))
    return cases


def _set_rows(rng: np.random.Generator, op: str) -> list:
    cases = []
    # (dst ne, rows written, index ne1 (repeats over dst/src dim 2), index type)
    for ne, n_rows, ne11, itype in (((256, 64, 1, 1), 7, 1, "i64"), ((100, 32, 4, 1), 5, 2, "i32"),
                                    ((33, 20, 1, 1), 9, 1, "i32"), ((2048, 16, 2, 1), 6, 1, "i64")):
        cache = rounded(rng.uniform(-1, 1, tuple(reversed(ne))), "f16")
        x = rounded(rng.uniform(-1, 1, (ne[3], ne[2], n_rows, ne[0])), "f32")
        idx = np.stack([rng.permutation(ne[1])[:n_rows] for _ in range(ne11)])   # (i11, i10), distinct per i11
        want = cache.copy()
        for i3 in range(ne[3]):
            for i2 in range(ne[2]):
                want[i3, i2, idx[i2 % ne11]] = x[i3, i2]
        cases.append(case(op, "f16", label(cache=ne, rows=n_rows, idx=(n_rows, ne11)) + f" {itype}",
                          [src("f32", x), src(itype, idx)], dst("f16", ne), rounded(want, "f16"), TOLERANCE,
                          dst_init=np.ascontiguousarray(cache.astype("<f2")).tobytes()))
    return cases


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    return _get_rows(rng, op) if op == "GET_ROWS" else _set_rows(rng, op)


FAMILIES = (Family(ops=("GET_ROWS",), types=("f32",), default_types=("f32",), make=make),
            Family(ops=("SET_ROWS",), types=("f16",), default_types=("f16",), make=make))
