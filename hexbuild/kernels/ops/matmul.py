"""MUL_MAT: the weight types the backend repacks (Q4_0, Q8_0, MXFP4) and the plain ones (F16,
F32), against float32 activations. The reference is the float64 product of the weights' exact
dequantized values with the activations: it knows nothing of the DSP's own quantization of the
activations (groups of FP32_QUANTIZE_GROUP_SIZE with fp16 scales), which is the error the
tolerance (test-backend-ops' 5e-4 for MUL_MAT) leaves room for.

The shapes take each path of the kernels: k a multiple of the 256-value super-block, and not (a
partial last super-block, a leftover 32-block); an odd number of weight rows (the 2x1 and 4x1
dot products' tails); one activation row (matvec) and several (matmul)."""

from __future__ import annotations

import numpy as np

from ..cases import KernelCase, Tensor
from ..quant import QUANTIZED, repacked_matrix
from ..tree import KernelTree
from . import Family

TOLERANCE = 5e-4
# (k, rows of weights, rows of activations)
SHAPES = ((4096, 64, 1), (4096, 64, 3), (4352, 33, 2), (1280, 67, 1), (800, 16, 5), (288, 8, 1), (256, 128, 8),
          (4128, 20, 1))


def make(tree: KernelTree, op: str, wtype: str, rng: np.random.Generator) -> list[KernelCase]:
    cases = []
    for k, n, m in SHAPES:
        w = rng.standard_normal((n, k)).astype(np.float32)
        x = rng.standard_normal((m, k)).astype(np.float32)
        if wtype in QUANTIZED:
            wdata, wvals = repacked_matrix(wtype, w)
        elif wtype == "f16":
            wh = w.astype(np.float16)
            wdata, wvals = wh.tobytes(), wh.astype(np.float64)
        else:
            wdata, wvals = w.tobytes(), w.astype(np.float64)
        expected = (x.astype(np.float64) @ wvals.T).reshape(-1)
        cases.append(KernelCase(
            op=op, type=wtype, shape=f"k={k} n={n} m={m}",
            srcs=[Tensor(wtype, (k, n, 1, 1), wdata), Tensor("f32", (k, m, 1, 1), x.tobytes())],
            dst=Tensor("f32", (n, m, 1, 1)), expected=expected, tolerance=TOLERANCE))
    return cases


FAMILY = Family(ops=("MUL_MAT",), types=("q4_0", "q8_0", "mxfp4", "f16", "f32"),
                default_types=("q4_0", "q8_0", "mxfp4"), make=make)
