"""GATED_DELTA_NET (gated-delta-net-ops.c): the recurrent delta rule of Qwen3-Next-style linear
attention, ggml_gated_delta_net(q, k, v, g, beta, state), all f32.

Per sequence s and head h, from the state's slot 0 (S, S_v x S_v), per token t: S *= exp(g)
(a scalar gate, or one per row of S when g has S_v values: "KDA"), delta = (v - S^T k) * beta,
S += k delta^T, out = S^T q / sqrt(S_v). q and k may have fewer heads (taken modulo) and fewer
sequences (broadcast). dst is [S_v * H, n_tokens * n_seqs + S_v * n_seqs * K]: the outputs, then
K state snapshots (the state after each of the last K tokens; K = 1: the final state).

The kernel has a token-generation path (one token) and a prompt path; the cases take both, with
S_v a multiple of 32 and not, KDA and scalar gates, head and sequence broadcast, K > 1 (with as
many tokens as slots: fewer leave slots to the caller). Reference: ggml-cpu's recurrence in
float64; q and k L2-normalised as llama.cpp feeds them, v and the state uniform [-1, 1] and
[-0.1, 0.1], g in [-1, 0] (a decay), beta in [0, 1]. Tolerance: test-backend-ops' default 1e-7."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, rounded, src

TOLERANCE = 1e-7
# (S_v, H, tokens, seqs, K, kda, q/k heads, q/k seqs)
SHAPES = ((128, 4, 1, 1, 1, False, 4, 1), (64, 3, 5, 2, 1, True, 1, 2), (100, 2, 4, 1, 3, False, 2, 1),
          (32, 8, 1, 3, 1, True, 8, 1))


def gdn(q, k, v, g, beta, state, n_snap):
    """q, k (seqs_q, tokens, heads_q, S_v); v (seqs, tokens, H, S_v); g (seqs, tokens, H, 1 or S_v);
    beta (seqs, tokens, H, 1); state (seqs, K, H, S_v, S_v) stored transposed (M[j][i] = S[i][j]).
    Returns (out (seqs, tokens, H, S_v), snapshots (K, seqs, H, S_v, S_v) in the same layout)."""
    n_seqs, n_tok, n_head, s_v = v.shape
    out = np.empty_like(v)
    snaps = np.zeros((n_snap, n_seqs, n_head, s_v, s_v))
    scale = 1 / np.sqrt(s_v)
    for s in range(n_seqs):
        sq, sk = s // (n_seqs // q.shape[0]), s // (n_seqs // k.shape[0])
        for h in range(n_head):
            m = state[s, 0, h].copy()                      # M[j][i]
            hq, hk = h % q.shape[2], h % k.shape[2]
            for t in range(n_tok):
                gate = np.exp(g[s, t, h])
                m = m * gate[None, :] if gate.size > 1 else m * gate[0]
                kk, qq = k[sk, t, hk], q[sq, t, hq]
                delta = (v[s, t, h] - m @ kk) * beta[s, t, h, 0]
                m = m + np.outer(delta, kk)
                out[s, t, h] = (m @ qq) * scale
                slot = t - (n_tok - n_snap)
                if 0 <= slot < n_snap:
                    snaps[slot, s, h] = m
    return out, snaps


def _unit_rows(rng, shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    for s_v, n_head, n_tok, n_seqs, n_snap, kda, qk_heads, qk_seqs in SHAPES:
        q = rounded(_unit_rows(rng, (qk_seqs, n_tok, qk_heads, s_v)), "f32")
        k = rounded(_unit_rows(rng, (qk_seqs, n_tok, qk_heads, s_v)), "f32")
        v = rounded(rng.uniform(-1, 1, (n_seqs, n_tok, n_head, s_v)), "f32")
        g = rounded(rng.uniform(-1, 0, (n_seqs, n_tok, n_head, s_v if kda else 1)), "f32")
        beta = rounded(rng.uniform(0, 1, (n_seqs, n_tok, n_head, 1)), "f32")
        state = rounded(rng.uniform(-0.1, 0.1, (n_seqs, n_snap, n_head, s_v, s_v)), "f32")
        out, snaps = gdn(q, k, v, g, beta, state, n_snap)
        want = np.concatenate([out.reshape(-1), snaps.reshape(-1)])
        # state [S_v*S_v*H, K, n_seqs]: numpy (seqs, K, H*S_v*S_v)
        st = src("f32", state.reshape(n_seqs, n_snap, n_head * s_v * s_v))
        cases.append(case(op, "f32", label(S_v=s_v, heads=n_head, tokens=n_tok, seqs=n_seqs, K=n_snap)
                          + (" kda" if kda else "") + (f" qk_heads={qk_heads}" if qk_heads != n_head else "")
                          + (f" qk_seqs={qk_seqs}" if qk_seqs != n_seqs else ""),
                          [src("f32", q), src("f32", k), src("f32", v), src("f32", g), src("f32", beta), st],
                          dst("f32", (s_v * n_head, n_tok * n_seqs + s_v * n_seqs * n_snap, 1, 1)), want,
                          TOLERANCE))
    return cases


FAMILY = Family(ops=("GATED_DELTA_NET",), types=("f32",), default_types=("f32",), make=make)
