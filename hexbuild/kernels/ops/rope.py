"""ROPE (rope-ops.c), f32: the modes the backend sends (ggml_hexagon_supported_rope refuses
GGML_ROPE_TYPE_VISION and mode & 1, and in 0.3.20 also the multi-section modes): normal (pairs
of neighbours), NEOX (pairs half a rotation apart), and, where the host accepts them, MROPE and
IMROPE (four position ids per token, dims split into sections); freq factors (src2); partial
rotation (n_dims < ne0, the rest copied); YaRN (ext_factor, freq_scale, corr dims).

op_params are ggml_rope_impl's: [1] n_dims, [2] mode, [4] n_ctx_orig, [5..10] freq_base,
freq_scale, ext_factor, attn_factor, beta_fast, beta_slow (floats), [11..14] sections.

The reference follows ggml-cpu's rope_f32: the angle of pair i is built in float32 the way ggml
builds it (theta = pos, then theta *= theta_scale per pair, theta_scale = powf(base, -2/n_dims),
divided by the freq factor, scaled, YaRN-mixed), because that float32 recurrence is ggml's
definition of the angle: at position 4000 it is off the exact base^(-2i/n) by a few ulps, a
visible error that both ggml-cpu and the DSP share. cos, sin and the rotation are float64.
Positions: below 512 as test-backend-ops draws them, and one case up to 4096. Inputs uniform
[-1, 1], freq factors [0.9, 1.1]. Tolerance: test-backend-ops' default NMSE 1e-7."""

from __future__ import annotations

import math

import numpy as np

from ..tree import KernelTree
from . import Family
from .host import supported_body
from .tensors import case, dst, label, params, rounded, src

TOLERANCE = 1e-7
NORMAL, NEOX, MROPE, IMROPE = 0, 2, 8, 40
MODE_NAMES = {NORMAL: "normal", NEOX: "neox", MROPE: "mrope", IMROPE: "imrope"}
F32 = np.float32

# (ne: head dim, heads, tokens, seqs), mode, n_dims, freq factors, yarn, max position, sections
CASES = (
    ((128, 8, 5, 1), NORMAL, 128, False, False, 512, None),
    ((64, 4, 3, 2), NEOX, 64, False, False, 512, None),
    ((80, 3, 4, 1), NEOX, 32, True, False, 512, None),       # partial rotation, freq factors
    ((128, 2, 6, 1), NORMAL, 64, False, True, 512, None),    # partial, YaRN
    ((96, 5, 2, 1), NEOX, 96, True, True, 512, None),        # a half of 48: a tail of 16 lanes
    ((40, 6, 3, 1), NORMAL, 40, False, False, 4096, None),   # 40 = one short vector of pairs
    ((128, 4, 3, 1), MROPE, 128, False, False, 512, (16, 24, 24, 0)),
    ((128, 2, 4, 1), IMROPE, 128, True, False, 512, (24, 20, 20, 0)),
)
FREQ_BASE, ATTN_FACTOR = 10000.0, 1.0
YARN = dict(freq_scale=0.25, ext_factor=1.0, beta_fast=32.0, beta_slow=1.0, n_ctx_orig=4096)
PLAIN = dict(freq_scale=1.0, ext_factor=0.0, beta_fast=32.0, beta_slow=1.0, n_ctx_orig=0)


def corr_dims(n_dims: int, n_ctx_orig: int, base: float, beta_fast: float, beta_slow: float) -> tuple[float, float]:
    def dim(n_rot: float) -> float:
        return n_dims * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(base)) if n_ctx_orig else 0.0
    return max(0.0, math.floor(dim(beta_fast))), min(n_dims - 1.0, math.ceil(dim(beta_slow)))


def angles(pos: list[int], ne0: int, n_dims: int, ff, y: dict, sections=None, imrope=False):
    """(cos, sin) per pair i < ne0/2 for one token, as ggml_rope_cache_init / ggml_mrope_cache_init."""
    theta_scale = F32(math.pow(FREQ_BASE, float(F32(-2.0) / F32(n_dims))))
    cd = corr_dims(n_dims, y["n_ctx_orig"], FREQ_BASE, y["beta_fast"], y["beta_slow"])
    thetas = [F32(p) for p in pos]   # t, h, w, e
    cos, sin = np.empty(ne0 // 2), np.empty(ne0 // 2)
    for i in range(ne0 // 2):
        if sections is None:
            theta = thetas[0]
        else:
            sector = i % sum(sections)
            s0, s1, s2 = sections[0], sections[0] + sections[1], sections[0] + sections[1] + sections[2]
            if imrope:
                k = sector % 3
                which = k if sector < 3 * sections[k] else 3
            else:
                which = 0 if sector < s0 else 1 if sector < s1 else 2 if sector < s2 else 3
            theta = thetas[which]
        # ggml reads freq factors for every pair of ne0; past n_dims/2 the angles are unused
        t_ex = F32(theta / F32(ff[i])) if ff is not None and i < len(ff) else theta
        t = F32(F32(y["freq_scale"]) * t_ex)
        mscale = ATTN_FACTOR
        if y["ext_factor"]:
            ramp = F32(1 - min(1.0, max(0.0, (i - cd[0]) / max(0.001, cd[1] - cd[0])))) * F32(y["ext_factor"])
            t = F32(t * F32(1 - ramp) + t_ex * ramp)
            mscale *= 1.0 + 0.1 * math.log(1.0 / y["freq_scale"])
        cos[i], sin[i] = math.cos(float(t)) * mscale, math.sin(float(t)) * mscale
        thetas = [F32(v * theta_scale) for v in thetas]
    return cos, sin


def rope(x: np.ndarray, pos: np.ndarray, mode: int, n_dims: int, ff, y: dict, sections=None) -> np.ndarray:
    """x (seqs, tokens, heads, head dim); pos (tokens,) or (4 * tokens,) for the multi-section modes."""
    n3, n2, n1, ne0 = x.shape
    out = x.copy()
    for i2 in range(n2):
        p = [int(pos[i2 + k * n2]) for k in range(4)] if sections else [int(pos[i2])]
        cos, sin = angles(p, ne0, n_dims, ff, y, sections, mode == IMROPE)
        half = n_dims // 2
        if mode == NORMAL:
            a, b = x[:, i2, :, 0:n_dims:2], x[:, i2, :, 1:n_dims:2]
            out[:, i2, :, 0:n_dims:2] = a * cos[:half] - b * sin[:half]
            out[:, i2, :, 1:n_dims:2] = a * sin[:half] + b * cos[:half]
        else:
            a, b = x[:, i2, :, :half], x[:, i2, :, half:n_dims]
            out[:, i2, :, :half] = a * cos[:half] - b * sin[:half]
            out[:, i2, :, half:n_dims] = a * sin[:half] + b * cos[:half]
    return out


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    multi = "GGML_ROPE_TYPE_MROPE" not in supported_body(tree, "rope")
    cases = []
    for ne, mode, n_dims, with_ff, yarn, max_pos, sections in CASES:
        if sections and not multi:
            continue
        y = YARN if yarn else PLAIN
        x = rounded(rng.uniform(-1, 1, tuple(reversed(ne))), "f32")
        pos = rng.integers(0, max_pos, ne[2] * (4 if sections else 1)).astype(np.int32)
        srcs = [src("f32", x), src("i32", pos)]
        ff = None
        if with_ff:
            ff = rounded(rng.uniform(0.9, 1.1, n_dims // 2), "f32")
            srcs.append(src("f32", ff))
        prm = params(0, n_dims, mode, 0, y["n_ctx_orig"], FREQ_BASE, y["freq_scale"], y["ext_factor"], ATTN_FACTOR,
                     y["beta_fast"], y["beta_slow"], *(sections or (0, 0, 0, 0)))
        shape = label(ne=ne) + f" {MODE_NAMES[mode]} n_dims={n_dims}" + (" ff" if with_ff else "") \
            + (" yarn" if yarn else "") + (f" pos<{max_pos}" if max_pos != 512 else "")
        cases.append(case(op, "f32", shape, srcs, dst("f32", ne), rope(x, pos, mode, n_dims, ff, y, sections),
                          TOLERANCE, params=prm))
    return cases


FAMILY = Family(ops=("ROPE",), types=("f32",), default_types=("f32",), make=make)
