"""MUL_MAT_ID (op_matmul_id of matmul-ops.c): the expert matmul of mixture-of-experts models. src0
holds every expert's weights (repacked rows, as MUL_MAT's), src1 the f32 activations, src2 the
i32 ids of the experts each token uses; dst[t][e] = W[ids[t][e]] @ src1[t][e or 0].

The backend sends the repacked weight types with f32 activations (ggml_hexagon_supported_mul_mat_id).
The kernel takes matvec_id for one activation row (one token, src1 broadcast over the used
experts) and matmul_id otherwise (rows grouped by expert, src1 per used expert or broadcast); the
cases take both, with k not a multiple of 256 and an odd number of rows. The reference is the
float64 product with the weights' exact dequantized values, as MUL_MAT's; the DSP quantizes the
activations (the error the tolerance allows). Tolerance: test-backend-ops' 5e-4."""

from __future__ import annotations

import numpy as np

from ..cases import Tensor
from ..quant import QUANTIZED, repacked_matrix
from ..tree import KernelTree
from . import Family
from .tensors import case, dst, label, src

TOLERANCE = 5e-4
# (k, rows per expert, experts, used, tokens, activation rows per token: 1 broadcast or `used`)
SHAPES = ((256, 64, 8, 2, 1, 1), (512, 33, 4, 2, 3, 2), (288, 16, 8, 4, 5, 1))


def make(tree: KernelTree, op: str, wtype: str, rng: np.random.Generator) -> list:
    cases = []
    for k, n, n_exp, n_used, n_tok, ne11 in SHAPES:
        w = rng.standard_normal((n_exp, n, k)).astype(np.float32)
        data, values = bytearray(), np.empty((n_exp, n, k))
        for e in range(n_exp):
            d, v = repacked_matrix(wtype, w[e])
            data += d
            values[e] = v
        x = rng.standard_normal((n_tok, ne11, k)).astype(np.float32)
        ids = np.stack([rng.permutation(n_exp)[:n_used] for _ in range(n_tok)]).astype(np.int32)
        want = np.empty((n_tok, n_used, n))
        for t in range(n_tok):
            for e in range(n_used):
                want[t, e] = values[ids[t, e]] @ x[t, e if ne11 > 1 else 0].astype(np.float64)
        cases.append(case(op, wtype, label(k=k, n=n, experts=n_exp, used=n_used, tokens=n_tok, b=ne11),
                          [Tensor(wtype, (k, n, n_exp, 1), bytes(data)), src("f32", x), src("i32", ids)],
                          dst("f32", (n, n_used, n_tok, 1)), want, TOLERANCE))
    return cases


FAMILY = Family(ops=("MUL_MAT_ID",), types=QUANTIZED, default_types=QUANTIZED, make=make)
