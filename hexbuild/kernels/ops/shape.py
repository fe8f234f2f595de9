"""Ops that move values without arithmetic: REPEAT (repeat-ops.c), FILL (fill-ops.c), DIAG
(diag-ops.c), TRI (op_tri in unary-ops.c), PAD (pad-ops.c), CONCAT (concat-ops.c).

As the backend sends them: REPEAT f32/f16 (src and dst of one type, each dim a multiple, the
source a view too); FILL f32/f16 (op_params[0] the value as a float); DIAG f32 (a row per batch
into a square); TRI f32 square and contiguous (op_params[0] the ggml_tri_type: 0 keeps col >= row,
1 col > row, 2 col <= row, 3 col < row); PAD f32 (op_params lp0, rp0, ... lp3, rp3, circular), on
each of its four paths (HVX or DMA rows, zeros or wrap-around); CONCAT f32/f16/i32 along each dim
(op_params[0]), and its 2-D path for a transposed src1 along dim 0.

All are exact copies (FILL's f16 value rounded as the kernel's (_Float16) cast and ggml's
conversion do). Tolerance: test-backend-ops' default 1e-7; the errors are 0."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, contiguous_nb, dst, grown_nb, label, params, rounded, src

TOLERANCE = 1e-7


def _repeat(rng, op, t):
    cases = []
    for ne, reps, view in (((32, 3, 1, 1), (3, 2, 2, 1), False), ((7, 2, 3, 1), (3, 2, 1, 2), False),
                           ((20, 4, 2, 1), (2, 3, 1, 1), True)):
        x = rounded(rng.uniform(-1, 1, tuple(reversed(ne))), t)
        out_ne = tuple(n * r for n, r in zip(ne, reps))
        s = src(t, x, grown_nb(t, ne, (2, 1, 1, 1)) if view else None)
        cases.append(case(op, t, label(src=ne, dst=out_ne) + (" view" if view else ""), [s], dst(t, out_ne),
                          np.tile(x, tuple(reversed(reps))), TOLERANCE))
    return cases


def _fill(rng, op, t):
    cases = []
    for ne, c in (((100, 7, 3, 1), 3.75), ((4096, 2, 1, 1), -0.1), ((17, 1, 1, 1), 1e-3)):
        a = rounded(rng.uniform(-1, 1, tuple(reversed(ne))), t)
        cases.append(case(op, t, label(ne=ne, c=c), [src(t, a)], dst(t, ne), np.full(a.shape, rounded(c, t)),
                          TOLERANCE, params=params(float(c))))
    return cases


def _diag(rng, op, t):
    cases = []
    for n, b2, b3 in ((64, 3, 1), (37, 2, 2), (200, 1, 1)):
        x = rounded(rng.uniform(-1, 1, (b3, b2, 1, n)), t)
        want = np.zeros((b3, b2, n, n))
        idx = np.arange(n)
        want[:, :, idx, idx] = x[:, :, 0, :]
        cases.append(case(op, t, label(n=n, batch=(b2, b3)), [src(t, x)], dst(t, (n, n, b2, b3)), want, TOLERANCE))
    return cases


def _tri(rng, op, t):
    keep = {0: lambda m: np.triu(m, 0), 1: lambda m: np.triu(m, 1), 2: lambda m: np.tril(m, 0),
            3: lambda m: np.tril(m, -1)}
    cases = []
    for i, (n, b2) in enumerate(((64, 2), (37, 1), (100, 1), (33, 3))):
        ttype = i % 4
        x = rounded(rng.uniform(-1, 1, (1, b2, n, n)), t)
        cases.append(case(op, t, label(n=n, batch=b2, type=ttype), [src(t, x)], dst(t, (n, n, b2, 1)),
                          keep[ttype](x), TOLERANCE, params=[ttype]))
    return cases


def _pad(rng, op, t):
    cases = []
    # (src ne, (lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3), circular): HVX, DMA (ne00 >= 512), wrapped of both
    for ne, pads, circ in (((33, 17, 2, 1), (4, 3, 0, 0, 0, 0, 0, 0), True),
                           ((1024, 2, 1, 1), (1, 0, 0, 0, 0, 0, 0, 0), False),
                           ((20, 5, 3, 2), (2, 5, 1, 2, 1, 0, 0, 1), False),
                           ((600, 3, 1, 1), (5, 40, 1, 1, 0, 0, 0, 0), True),
                           ((40, 6, 2, 1), (7, 9, 2, 1, 0, 0, 0, 0), True)):
        x = rounded(rng.uniform(-1, 1, tuple(reversed(ne))), t)
        out_ne = tuple(n + pads[2 * d] + pads[2 * d + 1] for d, n in enumerate(ne))
        if circ:
            want = x
            for d in range(4):
                axis = 3 - d
                want = np.take(want, (np.arange(out_ne[d]) - pads[2 * d]) % ne[d], axis=axis)
        else:
            want = np.pad(x, [(pads[2 * d], pads[2 * d + 1]) for d in (3, 2, 1, 0)])
        cases.append(case(op, t, label(src=ne, pad=pads) + (" circular" if circ else ""), [src(t, x)],
                          dst(t, out_ne), want, TOLERANCE, params=[*pads, int(circ)]))
    return cases


def _concat(rng, op, t):
    cases = []
    for dim, a_ne, b_extent in ((0, (37, 5, 2, 1), 20), (1, (64, 3, 2, 1), 4), (2, (16, 3, 1, 2), 2),
                                (3, (24, 2, 2, 1), 2)):
        b_ne = tuple(b_extent if d == dim else n for d, n in enumerate(a_ne))
        a = _values(rng, t, a_ne)
        b = _values(rng, t, b_ne)
        want = np.concatenate([a, b], axis=3 - dim)
        out_ne = tuple(a_ne[d] + (b_ne[d] if d == dim else 0) for d in range(4))
        cases.append(case(op, t, label(dim=dim, a=a_ne, b=b_ne), [src(t, a), src(t, b)], dst(t, out_ne), want,
                          TOLERANCE, params=[dim]))
    if t != "i32":
        # 2-D along dim 0 with src1 a transposed view (ggml_transpose of a [24, 30] tensor)
        a = _values(rng, t, (40, 24, 1, 1))
        base = _values(rng, t, (24, 30, 1, 1))          # (1, 1, 30, 24)
        b = np.swapaxes(base, 2, 3)                       # ne (30, 24)
        nb = contiguous_nb(t, (24, 30, 1, 1))
        cases.append(case(op, t, label(dim=0, a=(40, 24, 1, 1), b=(30, 24, 1, 1)) + " b transposed",
                          [src(t, a), src(t, b, (nb[1], nb[0], nb[2], nb[3]))], dst(t, (70, 24, 1, 1)),
                          np.concatenate([a, b], axis=3), TOLERANCE, params=[0]))
    return cases


def _values(rng, t, ne):
    shape = tuple(reversed(ne))
    if t == "i32":
        return rng.integers(-(1 << 30), 1 << 30, shape).astype(np.int64).astype(np.float64)
    return rounded(rng.uniform(-1, 1, shape), t)


MAKERS = {"REPEAT": _repeat, "FILL": _fill, "DIAG": _diag, "TRI": _tri, "PAD": _pad, "CONCAT": _concat}


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    return MAKERS[op](rng, op, t)


FAMILIES = (Family(ops=("REPEAT", "FILL"), types=("f32", "f16"), default_types=("f32", "f16"), make=make),
            Family(ops=("DIAG", "TRI", "PAD"), types=("f32",), default_types=("f32",), make=make),
            Family(ops=("CONCAT",), types=("f32", "f16", "i32"), default_types=("f32", "f16", "i32"), make=make))
