"""The ops of op_activations (act-ops.c): UNARY_SILU, UNARY_GELU, GLU_SWIGLU, GLU_SWIGLU_OAI,
GLU_GEGLU; f32, contiguous (ggml_hexagon_supported_activations).

A GLU comes in two forms and the cases have both: split (ggml_glu_split: the gate in src0, the
value in src1) and not (one src0 row of 2*nc values, the gate in the first half, or the second when
op_params[1] "swapped" is set). SWIGLU_OAI takes alpha and limit from op_params[2] and [3].

References: ggml-cpu's (vec.h, ops.cpp) in float64. GELU is ggml's tanh form,
0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); the kernel computes x*sigmoid(1.702x) (the "quick"
GELU: the backend sends GELU_QUICK to it too). The two differ by up to 0.02 for |x| < 3, an NMSE
of about 1e-4 on activations of that size; on test-backend-ops' inputs (uniform [-150, 150],
which these cases use for GELU) the difference is far below its 1e-7, and that is what the backend
passes upstream. Other ops: those inputs and a narrow range where the functions bend. Tolerance:
test-backend-ops' default NMSE 1e-7."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, params, rounded, src

TOLERANCE = 1e-7
ALPHA, LIMIT = 1.702, 7.0
ROWS = ((4096, 2, 1, 1), (100, 7, 2, 1), (17, 5, 1, 1))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * x * (1 + 0.044715 * x * x)))


def _swiglu_oai(g, v):
    x = np.minimum(g, LIMIT)
    y = np.clip(v, -LIMIT, LIMIT)
    return x * _sigmoid(ALPHA * x) * (y + 1)


UNARY = {"UNARY_SILU": (lambda x: x * _sigmoid(x), ((-150, 150), (-8, 8))),
         "UNARY_GELU": (_gelu, ((-150, 150),))}
GLU = {"GLU_SWIGLU": lambda g, v: g * _sigmoid(g) * v,
       "GLU_SWIGLU_OAI": _swiglu_oai,
       "GLU_GEGLU": lambda g, v: _gelu(g) * v}
GLU_RANGES = ((-150, 150), (-8, 8), (-10, 10))


def _unary(op: str, rng: np.random.Generator) -> list:
    ref, ranges = UNARY[op]
    cases = []
    for i, ne in enumerate(ROWS):
        lo, hi = ranges[i % len(ranges)]
        x = rounded(rng.uniform(lo, hi, tuple(reversed(ne))), "f32")
        cases.append(case(op, "f32", label(ne=ne, x=f"{lo}..{hi}"), [src("f32", x)], dst("f32", ne), ref(x),
                          TOLERANCE))
    return cases


def _glu(op: str, rng: np.random.Generator) -> list:
    ref = GLU[op]
    op_code = {"GLU_GEGLU": 1, "GLU_SWIGLU": 2, "GLU_SWIGLU_OAI": 3}[op]  # enum ggml_glu_op
    cases = []
    # (ne of the output, form): split, joined, joined and swapped
    for i, (ne, form) in enumerate((((4096, 2, 1, 1), "split"), ((100, 7, 2, 1), "joined"),
                                    ((17, 5, 1, 1), "swapped"), ((288, 6, 1, 1), "split"))):
        lo, hi = GLU_RANGES[i % len(GLU_RANGES)]
        shape = tuple(reversed(ne))
        g = rounded(rng.uniform(lo, hi, shape), "f32")
        v = rounded(rng.uniform(lo, hi, shape), "f32")
        prm = params(op_code, 1 if form == "swapped" else 0, ALPHA, LIMIT) if op == "GLU_SWIGLU_OAI" else \
            params(op_code, 1 if form == "swapped" else 0)
        if form == "split":
            srcs = [src("f32", g), src("f32", v)]
        else:
            joined = np.concatenate([v, g] if form == "swapped" else [g, v], axis=-1)
            srcs = [src("f32", joined)]
        cases.append(case(op, "f32", label(ne=ne, x=f"{lo}..{hi}") + f" {form}", srcs, dst("f32", ne),
                          ref(g, v), TOLERANCE, params=prm))
    return cases


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    return _unary(op, rng) if op in UNARY else _glu(op, rng)


FAMILY = Family(ops=(*UNARY, *GLU), types=("f32",), default_types=("f32",), make=make)
