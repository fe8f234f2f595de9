"""Test cases of the kernel check: what the harness runs (op, tensors, params) and what the
result must be (a float64 reference and test-backend-ops' tolerance), and the two files the
harness and the host exchange (see hexbuild/dsp/harness/harness.c for the layout)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .quant import TYPES, type_id

MAX_SRC = 6
N_PARAMS = 16
STATUS_NO_OP = -1000      # the harness's build has no such op
HTP_STATUS_OK = 1
FLAG_DST_INIT = 1 << 31   # the destination's bytes follow the sources' (the harness clears the bit)


@dataclass
class Tensor:
    type: str
    ne: tuple[int, int, int, int]
    data: bytes | None = None           # what the DSP reads; None for the destination
    nb: tuple[int, int, int, int] | None = None

    def strides(self) -> tuple[int, int, int, int]:
        if self.nb is not None:
            return self.nb
        _, block, size = TYPES[self.type]
        nb0 = size
        nb1 = self.ne[0] // block * size
        return (nb0, nb1, nb1 * self.ne[1], nb1 * self.ne[1] * self.ne[2])

    def nbytes(self) -> int:
        """ggml_nbytes: the first row's bytes plus the stride of every further index."""
        nb = self.strides()
        _, block, size = TYPES[self.type]
        if any(n == 0 for n in self.ne):
            return 0
        if block > 1:
            return self.ne[0] // block * size + sum((self.ne[i] - 1) * nb[i] for i in range(1, 4))
        return size + sum((self.ne[i] - 1) * nb[i] for i in range(4))


DTYPES = {"f32": "<f4", "f16": "<f2", "i32": "<i4", "i64": "<i8"}


def decode(t: Tensor, data: bytes) -> np.ndarray:
    """The destination's values as float64, in ggml's element order (ne0 fastest), read through
    its strides when it has its own (a view)."""
    dt = np.dtype(DTYPES[t.type])
    if t.nb is None:
        return np.frombuffer(data, dtype=dt).astype(np.float64)
    if len(data) < t.nbytes():
        return np.full(int(np.prod(t.ne)), np.nan)
    shape = tuple(reversed(t.ne))
    view = np.ndarray(shape, dtype=dt, buffer=data, strides=tuple(reversed(t.nb)))
    return view.astype(np.float64).reshape(-1)


@dataclass
class KernelCase:
    op: str
    type: str                  # the type the report groups by (the weight's, for a matmul)
    shape: str                 # a short label: k=4096 n=64 m=1
    srcs: list[Tensor]
    dst: Tensor
    expected: np.ndarray       # float64, in the destination's element order
    tolerance: float           # normalised mean squared error, as test-backend-ops
    params: list[int] = field(default_factory=lambda: [0] * N_PARAMS)
    n_threads: int = 4
    flags: int = 0
    id: int = 0
    check: Callable[[np.ndarray, np.ndarray], float] | None = None   # error measure; NMSE when None
    dst_init: bytes | None = None   # the destination's bytes before the op (an op that writes part of it)

    @property
    def name(self) -> str:
        return f"{self.op} {self.type} {self.shape}"


def nmse(out: np.ndarray, ref: np.ndarray) -> float:
    """test-backend-ops' error: sum((out-ref)^2) / sum(ref^2); NaN anywhere is infinite."""
    if out.shape != ref.shape:
        return float("inf")
    if not np.all(np.isfinite(out)):
        return float("inf")
    num = float(np.sum((out - ref) ** 2))
    den = float(np.sum(ref ** 2))
    return num / den if den else (0.0 if num == 0 else float("inf"))


def write_cases(path, cases: list[KernelCase]) -> None:
    with open(path, "wb") as f:
        f.write(b"HXK1" + struct.pack("<I", len(cases)))
        for c in cases:
            if len(c.srcs) > MAX_SRC:
                raise ValueError(f"{c.name}: more than {MAX_SRC} sources")
            params = (list(c.params) + [0] * N_PARAMS)[:N_PARAMS]
            flags = c.flags | (FLAG_DST_INIT if c.dst_init is not None else 0)
            f.write(struct.pack("<I32sII16iI", c.id, c.op.encode()[:31], c.n_threads, flags, *params,
                                len(c.srcs)))
            for t in [*c.srcs, c.dst]:
                f.write(struct.pack("<I4I4II", type_id(t.type), *t.ne, *t.strides(), t.nbytes()))
            for t in c.srcs:
                assert t.data is not None and len(t.data) == t.nbytes(), f"{c.name}: source of the wrong size"
                f.write(t.data)
            if c.dst_init is not None:
                assert len(c.dst_init) == c.dst.nbytes(), f"{c.name}: destination of the wrong size"
                f.write(c.dst_init)


@dataclass
class RawResult:
    id: int
    status: int
    data: bytes
    ns: int
    pcycles: int


def read_results(path) -> dict[int, RawResult]:
    """The harness's results; a file cut short (the emulator died) yields the cases before."""
    out: dict[int, RawResult] = {}
    try:
        blob = open(path, "rb").read()
    except OSError:
        return out
    if blob[:4] != b"HXR1":
        return out
    pos = 8
    head = struct.Struct("<IiIIQQ")
    while pos + head.size <= len(blob):
        cid, status, nbytes, _, ns, cycles = head.unpack_from(blob, pos)
        pos += head.size
        if pos + nbytes > len(blob):
            break
        out[cid] = RawResult(cid, status, blob[pos:pos + nbytes], ns, cycles)
        pos += nbytes
    return out
