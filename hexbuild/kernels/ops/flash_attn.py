"""FLASH_ATTN_EXT (flash-attn-ops.c, its HVX path: the HMX one needs HTP_HAS_HMX): attention of
f32 or f16 Q over f16 K and V, with an f16 mask, ALiBi, logit softcap, sinks, grouped KV heads.

As the backend sends it (ggml_hexagon_supported_flash_attn_ext): K, V f16, mask f16, sinks f32,
dst f32 or f16 with one sequence (dst ne3 = 1). op_params: scale, max_bias, logit_softcap.
Shapes: Q ne (DK, tokens, heads, 1), K (DK, kv, kv heads, 1), V (DV, kv, kv heads, 1), mask
(kv, tokens padded, 1, 1), dst (DV, heads, tokens, 1). The kernel walks K/V in blocks of 64 rows;
the cases have kv not a multiple of it, head sizes not a multiple of 64 (an HVX tail), one token
(decode) and several, grouped heads, and K/V as views of a KV cache whose rows hold every head
(the layout llama.cpp's cache has).

Reference: ggml's definition in float64, with Q rounded to f16 as ggml-cpu does for an f16 K
(its dot products take K's type); s = scale * q.k, softcap: s = c * tanh(s / c), then + slope *
mask, softmax over kv with the sink's exp(sink - max) added to the denominator only. Inputs as
test-backend-ops: uniform [-1, 1], sinks [-10, 10]. Tolerance: its 5e-4 for FLASH_ATTN_EXT."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .softmax import slopes
from .tensors import case, contiguous_nb, dst, label, params, rounded, src

TOLERANCE = 5e-4
# (DK=DV, tokens, heads, kv heads, kv, mask, max_bias, softcap, sinks, q type, dst type, K/V cache views)
CASES = (
    (64, 1, 8, 8, 256, True, 0.0, 0.0, False, "f32", "f32", False),
    (128, 4, 4, 2, 100, True, 0.0, 0.0, False, "f32", "f32", True),
    (80, 3, 2, 2, 70, True, 8.0, 30.0, False, "f16", "f32", False),
    (64, 2, 4, 1, 128, True, 0.0, 0.0, True, "f32", "f32", True),
    (96, 2, 2, 2, 40, False, 0.0, 0.0, False, "f32", "f16", False),
)


def attention(q, k, v, mask, scale, max_bias, softcap, sinks):
    """q (heads, tokens, DK), k (kv heads, kv, DK), v (kv heads, kv, DV), mask (tokens+, kv) or
    None, sinks (heads,) or None -> (tokens, heads, DV)."""
    n_head, n_q, _ = q.shape
    group = n_head // k.shape[0]
    sl = slopes(n_head, max_bias)
    out = np.empty((n_q, n_head, v.shape[2]))
    for h in range(n_head):
        s = q[h] @ k[h // group].T * scale
        if softcap:
            s = softcap * np.tanh(s / softcap)
        if mask is not None:
            s = s + sl[h] * mask[:n_q]
        m = np.max(s, axis=1, keepdims=True)
        if sinks is not None:
            m = np.maximum(m, sinks[h])
        p = np.exp(s - m)
        denom = np.sum(p, axis=1, keepdims=True) + (np.exp(sinks[h] - m) if sinks is not None else 0)
        out[:, h] = (p @ v[h // group]) / denom
    return out


def _kv(rng, n_kv, n_kv_head, d, cache_view):
    """(values (kv heads, kv, d), tensor): contiguous, or a view of a cache row of all heads."""
    x = rounded(rng.uniform(-1, 1, (n_kv_head, n_kv, d)), "f16")
    if not cache_view:
        return x, src("f16", x)
    nb = contiguous_nb("f16", (d, n_kv_head, n_kv, 1))          # the cache: [d, heads, kv]
    return x, src("f16", x, (nb[0], nb[2], nb[1], nb[3]))        # viewed as [d, kv, heads]


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    for d, n_q, n_head, n_kv_head, n_kv, with_mask, max_bias, softcap, with_sinks, qt, dt, view in CASES:
        q = rounded(rng.uniform(-1, 1, (n_head, n_q, d)), qt)
        k, k_src = _kv(rng, n_kv, n_kv_head, d, view)
        v, v_src = _kv(rng, n_kv, n_kv_head, d, view)
        srcs = [src(qt, q), k_src, v_src]
        mask = sinks = None
        if with_mask:
            rows = (n_q + 63) // 64 * 64                               # llama pads the mask's rows
            mask = np.where(rng.random((rows, n_kv)) < 0.2, -np.inf, 0.0)
            mask[:, 0] = 0.0                                           # no row wholly masked
            mask = rounded(mask, "f16")
            srcs.append(src("f16", mask))
        if with_sinks:   # src4: after a mask (the harness has no empty source slot)
            sinks = rounded(rng.uniform(-10, 10, n_head), "f32")
            srcs.append(src("f32", sinks))
        scale = 1.0 / np.sqrt(d)
        want = attention(rounded(q, "f16"), k, v, mask, scale, max_bias, softcap, sinks)
        shape = label(d=d, tokens=n_q, heads=n_head, kv_heads=n_kv_head, kv=n_kv) + f" q={qt} dst={dt}" \
            + (" mask" if with_mask else "") + (f" max_bias={max_bias:g}" if max_bias else "") \
            + (f" softcap={softcap:g}" if softcap else "") + (" sinks" if with_sinks else "") \
            + (" cache-view" if view else "")
        cases.append(case(op, "f16", shape, srcs, dst(dt, (d, n_head, n_q, 1)), rounded(want, dt), TOLERANCE,
                          params=params(float(scale), max_bias, softcap)))
    return cases


FAMILY = Family(ops=("FLASH_ATTN_EXT",), types=("f16",), default_types=("f16",), make=make)
