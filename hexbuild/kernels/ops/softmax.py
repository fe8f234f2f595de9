"""SOFTMAX (softmax-ops.c): ggml_soft_max_ext with scale, a mask (f32 or f16, broadcast over heads
and sequences, with more rows than the input as llama pads its KQ mask) and ALiBi (max_bias:
the slope of head h from m0 = 2^(-max_bias/n) and m1 = 2^(-max_bias/2n), n the largest power of
two not above the head count). f32 input and output.

The backend sends rows of at most 32 values or a multiple of 32 (ggml_hexagon_supported_softmax),
and no sinks (src2) in the trees here. The kernel has three paths, each taken: rows a multiple of
32 with an f32 mask (scale and mask in one HVX pass), a multiple of 32 otherwise (f16 mask or
none), and short rows (the generic helpers). Reference: ggml-cpu's soft_max_f32 in float64. Inputs
as test-backend-ops draws them (uniform [-1, 1], the mask too), and a causal mask of -inf as
llama's. Tolerance: test-backend-ops' 1e-6 for SOFT_MAX."""

from __future__ import annotations

import math

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, params, rounded, src

TOLERANCE = 1e-6
# (x ne, mask: None | (type, ne, "uniform" | "causal"), scale, max_bias, logit range)
CASES = (
    ((256, 7, 4, 1), None, 1.0, 0.0, 1),
    ((128, 5, 4, 2), ("f32", (128, 8, 1, 1), "uniform"), 0.125, 0.0, 1),
    ((96, 4, 8, 1), ("f16", (96, 4, 1, 1), "uniform"), 1.0, 8.0, 1),
    ((20, 6, 3, 1), ("f32", (20, 6, 3, 1), "uniform"), 0.5, 2.0, 1),
    ((64, 9, 2, 1), ("f16", (64, 16, 1, 1), "causal"), 0.125, 0.0, 8),
    ((4096, 2, 1, 1), ("f32", (4096, 2, 1, 1), "uniform"), 1.0, 0.0, 4),
)


def slopes(n_head: int, max_bias: float) -> np.ndarray:
    """ALiBi slope per head, as ggml computes it."""
    if max_bias <= 0:
        return np.ones(n_head)
    n_log2 = 1 << int(math.floor(math.log2(n_head)))
    m0 = 2.0 ** (-max_bias / n_log2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n_log2)
    return np.array([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1) for h in range(n_head)])


def softmax(x: np.ndarray, mask: np.ndarray | None, scale: float, max_bias: float) -> np.ndarray:
    """x (ne3, ne2, ne1, ne0); mask (m3, m2, m1 >= ne1, ne0) repeating over dims 2 and 3."""
    w = x * scale
    if mask is not None:
        n3, n2, n1, _ = x.shape
        m = np.tile(mask[:, :, :n1, :], (n3 // mask.shape[0], n2 // mask.shape[1], 1, 1))
        w = w + slopes(n2, max_bias)[None, :, None, None] * m
    w = w - np.max(w, axis=-1, keepdims=True)
    e = np.exp(w)
    return e / np.sum(e, axis=-1, keepdims=True)


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    for ne, mask, scale, max_bias, span in CASES:
        x = rounded(rng.uniform(-span, span, tuple(reversed(ne))), "f32")
        srcs = [src("f32", x)]
        m = None
        if mask is not None:
            mt, mne, kind = mask
            shape = tuple(reversed(mne))
            if kind == "causal":
                # row i sees columns up to i + (ne0 - ne1): the last ne1 tokens of a KV cache
                i = np.arange(mne[1])[:, None]
                j = np.arange(mne[0])[None, :]
                m = np.broadcast_to(np.where(j <= i + (mne[0] - ne[1]), 0.0, -np.inf), shape).copy()
            else:
                m = rng.uniform(-1, 1, shape)
            m = rounded(m, mt)
            srcs.append(src(mt, m))
        shape = label(ne=ne) + (f" mask={mask[0]}{label(m=mask[1])[1:]} {mask[2]}" if mask else "") \
            + f" scale={scale:g}" + (f" max_bias={max_bias:g}" if max_bias else "")
        cases.append(case(op, "f32", shape, srcs, dst("f32", ne), softmax(x, m, scale, max_bias), TOLERANCE,
                          params=params(scale, max_bias)))
    return cases


FAMILY = Family(ops=("SOFTMAX",), types=("f32",), default_types=("f32",), make=make)
