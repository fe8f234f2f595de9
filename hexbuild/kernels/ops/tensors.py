"""NumPy arrays laid out as the tensors of a case, and op_params written as ggml writes them.

An array is in ggml's order: shape (ne3, ne2, ne1, ne0), ne0 the fastest (fewer dimensions are
the last ones). A view (strides of a larger tensor) fills its gaps with 0xff bytes, a NaN in f32
and f16: a kernel that reads a gap shows in its result."""

from __future__ import annotations

import struct

import numpy as np

from ..cases import DTYPES, KernelCase, Tensor
from ..quant import TYPES


def as4(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.reshape((1,) * (4 - a.ndim) + a.shape)


def ne_of(a: np.ndarray) -> tuple[int, int, int, int]:
    return tuple(int(n) for n in reversed(as4(a).shape))  # type: ignore[return-value]


def rounded(a: np.ndarray, t: str) -> np.ndarray:
    """The float64 values of ``a`` once stored as type ``t`` (what the DSP reads, what ggml writes)."""
    if t == "f16":
        return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)
    if t == "f32":
        return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)
    return np.asarray(a).astype(np.float64)


def contiguous_nb(t: str, ne: tuple[int, ...]) -> tuple[int, int, int, int]:
    size = TYPES[t][2]
    return (size, size * ne[0], size * ne[0] * ne[1], size * ne[0] * ne[1] * ne[2])


def src(t: str, a: np.ndarray, nb: tuple[int, int, int, int] | None = None) -> Tensor:
    """A source tensor of type ``t`` holding ``a`` (rounded to ``t``), contiguous or through ``nb``."""
    a4 = as4(a)
    ne = ne_of(a4)
    dt = np.dtype(DTYPES[t])
    if nb is None:
        return Tensor(t, ne, np.ascontiguousarray(a4.astype(dt)).tobytes())
    tensor = Tensor(t, ne, None, tuple(nb))
    buf = bytearray(b"\xff" * tensor.nbytes())
    view = np.ndarray(a4.shape, dtype=dt, buffer=buf, strides=tuple(reversed(nb)))
    view[...] = a4.astype(dt)
    tensor.data = bytes(buf)
    return tensor


def grown_nb(t: str, ne: tuple[int, ...], grow: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """The strides of a view of ``ne`` into a tensor ``grow`` times larger in each dimension (as
    test-backend-ops makes its non-contiguous cases: ggml_view_4d of a bigger tensor)."""
    return contiguous_nb(t, tuple(n * g for n, g in zip(ne, grow)))


def dst(t: str, ne: tuple[int, ...], nb: tuple[int, int, int, int] | None = None) -> Tensor:
    ne4 = tuple(ne) + (1,) * (4 - len(ne))
    return Tensor(t, ne4, None, nb)  # type: ignore[arg-type]


def f32_bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


def params(*values: int | float) -> list[int]:
    """op_params words: an int as it is, a float as its float32 bits (ggml_set_op_params_f32)."""
    return [v if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else f32_bits(float(v))
            for v in values]


def label(**dims: object) -> str:
    """A case's shape label: ``ne=[100,3,2,1] b=[1,3,1,1]``; tuples print without spaces."""
    out = []
    for k, v in dims.items():
        if isinstance(v, tuple):
            v = "[" + ",".join(str(x) for x in v) + "]"
        out.append(f"{k}={v}")
    return " ".join(out)


def case(op: str, t: str, shape: str, srcs: list[Tensor], out: Tensor, expected: np.ndarray, tolerance: float,
         **kw) -> KernelCase:
    return KernelCase(op=op, type=t, shape=shape, srcs=srcs, dst=out,
                      expected=np.asarray(expected, dtype=np.float64).reshape(-1), tolerance=tolerance, **kw)
