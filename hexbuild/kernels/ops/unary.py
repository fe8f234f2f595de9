"""The ops of op_unary (unary-ops.c): RMS_NORM, RMS_NORM_MUL (RMS_NORM fused with the MUL by its
weight), NORM, L2_NORM, SCALE, SQR, SQRT, UNARY_NEG, UNARY_EXP, UNARY_SIGMOID, UNARY_SOFTPLUS,
UNARY_TANH; f32 only, as the backend sends them (ggml_hexagon_supported_unary).

The kernel moves blocks of rows through VTCM by DMA and works on each row in HVX vectors of 32
floats with a masked tail, so the rows here are a multiple of 32, not one, and shorter than one
vector, with more rows than threads; where the tree's host accepts a non-contiguous src0 (0.3.28:
"src0 may be non-contiguous"), a view with gaps in every dimension. The references are ggml-cpu's
definitions (ops.cpp, vec.h) in float64; inputs are drawn as test-backend-ops draws them for that
op, plus a narrower range where its wide one would only test the saturated ends. Tolerance:
test-backend-ops' default NMSE 1e-7."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .host import requires_contiguous
from .tensors import case, dst, grown_nb, label, params, rounded, src

TOLERANCE = 1e-7
ROWS = ((4096, 3, 1, 1), (100, 7, 2, 1), (17, 5, 1, 1), (288, 9, 1, 1))
VIEW = ((64, 3, 2, 1), (2, 2, 2, 1))   # (ne, how much larger the viewed tensor is)


def _softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def _rms(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def _norm(x, eps):
    c = x - np.mean(x, axis=-1, keepdims=True)
    return c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps)


def _l2(x, eps):
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


# op -> (reference(x), op_params, input ranges)
EPS_RMS, EPS_L2, SCALE, BIAS = 1e-6, 1e-12, 0.37, -1.25
OPS = {
    "RMS_NORM": (lambda x: _rms(x, EPS_RMS), params(EPS_RMS), ((-10, 10),)),
    "NORM": (lambda x: _norm(x, EPS_RMS), params(EPS_RMS), ((-1, 1),)),
    "L2_NORM": (lambda x: _l2(x, EPS_L2), params(EPS_L2), ((-1, 1),)),
    "SCALE": (lambda x: x * SCALE + BIAS, params(SCALE, BIAS), ((-1, 1),)),
    "SQR": (lambda x: x * x, [], ((-150, 150),)),
    "SQRT": (np.sqrt, [], ((50, 100), (0.01, 4))),
    "UNARY_NEG": (np.negative, [], ((-150, 150),)),
    "UNARY_EXP": (np.exp, [], ((-10, 10), (-80, 80))),
    "UNARY_SIGMOID": (lambda x: 1 / (1 + np.exp(-x)), [], ((-150, 150), (-8, 8))),
    "UNARY_SOFTPLUS": (_softplus, [], ((-150, 150), (-8, 8))),
    "UNARY_TANH": (np.tanh, [], ((-150, 150), (-4, 4))),
}


def _unary(tree: KernelTree, op: str, rng: np.random.Generator) -> list:
    ref, prm, ranges = OPS[op]
    views = not requires_contiguous(tree, "unary")
    shapes = [(ne, None) for ne in ROWS] + ([VIEW] if views else [])
    cases = []
    for i, (ne, grow) in enumerate(shapes):
        lo, hi = ranges[i % len(ranges)]
        x = rounded(rng.uniform(lo, hi, tuple(reversed(ne))), "f32")
        x_src = src("f32", x, grown_nb("f32", ne, grow) if grow else None)
        cases.append(case(op, "f32", label(ne=ne, x=f"{lo}..{hi}") + (" view" if grow else ""), [x_src],
                          dst("f32", ne), ref(x), TOLERANCE, params=list(prm)))
    return cases


def _rms_norm_mul(tree: KernelTree, op: str, rng: np.random.Generator) -> list:
    """RMS_NORM then MUL, fused by the host (ggml_can_fuse): src0 the normed input, src1 the MUL's
    other operand (a weight row broadcast to every row, or one of the input's shape)."""
    cases = []
    for ne, broadcast in (((4096, 3, 1, 1), True), ((100, 7, 2, 1), True), ((17, 5, 1, 1), False),
                          ((288, 6, 2, 1), False)):
        x = rounded(rng.uniform(-10, 10, tuple(reversed(ne))), "f32")
        wne = (ne[0], 1, 1, 1) if broadcast else ne
        w = rounded(rng.uniform(-10, 10, tuple(reversed(wne))), "f32")
        cases.append(case(op, "f32", label(ne=ne, w=wne), [src("f32", x), src("f32", w)], dst("f32", ne),
                          _rms(x, EPS_RMS) * w, TOLERANCE, params=params(EPS_RMS)))
    return cases


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    return _rms_norm_mul(tree, op, rng) if op == "RMS_NORM_MUL" else _unary(tree, op, rng)


FAMILY = Family(ops=("RMS_NORM", "RMS_NORM_MUL", *[o for o in OPS if o != "RMS_NORM"]), types=("f32",),
                default_types=("f32",), make=make)
