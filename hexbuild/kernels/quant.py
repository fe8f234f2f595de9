"""ggml's reference quantization rules and the HTP backend's weight layouts, in NumPy.

The kernel check's weights go through these, not through any code of the tree: a block is made
by ggml's ``quantize_row_*_ref`` rules (the same float32 steps), dequantized by the same format's
definition, and laid out as the backend's host code lays a row out for the DSP (the "x4x2" repack
of ggml-hexagon.cpp: all the quants of a row, 256 to a super-block, then all its scales).
"""

from __future__ import annotations

import numpy as np

QK = 32
SUPER = 256  # QK_Q4_0x4x2, QK_Q8_0x4x2, QK_MXFP4x4x2
# ggml type ids (the HTP enum keeps them) and the bytes of one block of QK values
TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, QK, 18), "q8_0": (8, QK, 34), "i32": (26, 1, 4),
         "i64": (27, 1, 8), "mxfp4": (39, QK, 17)}
QUANTIZED = ("q4_0", "q8_0", "mxfp4")
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)


def type_id(t: str) -> int:
    return TYPES[t][0]


def row_bytes(t: str, n: int) -> int:
    tid, block, size = TYPES[t]
    return n // block * size


def _blocks(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    assert x.shape[-1] % QK == 0, "a row of a quantized type is whole blocks"
    return x.reshape(-1, QK)


def quantize_q4_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(quants 0..15 per value in natural order, fp16 scale per block): quantize_row_q4_0_ref."""
    b = _blocks(x)
    idx = np.argmax(np.abs(b), axis=1)
    mx = b[np.arange(len(b)), idx]
    d = (mx / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.trunc((b * inv[:, None]).astype(np.float32) + np.float32(8.5)).astype(np.int32)
    q = np.minimum(q, 15).astype(np.uint8)
    return q, d.astype(np.float16)


def quantize_q8_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 quants, fp16 scale per block): quantize_row_q8_0_ref (roundf: half away from zero)."""
    b = _blocks(x)
    amax = np.max(np.abs(b), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    return q, d.astype(np.float16)


def e8m0_half(e: np.ndarray) -> np.ndarray:
    """GGML_E8M0_TO_FP32_HALF: half of the E8M0 scale, 2^(e-128)."""
    return np.ldexp(np.float32(1), np.asarray(e, dtype=np.int32) - 128).astype(np.float32)


def quantize_mxfp4(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices 0..15 into the E2M1 table per value, E8M0 exponent per block): quantize_row_mxfp4_ref."""
    b = _blocks(x)
    amax = np.max(np.abs(b), axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(amax.astype(np.float32))) - 2 + 127, 0).astype(np.uint8)
    d = e8m0_half(e)
    err = np.abs(KVALUES_MXFP4[None, None, :] * d[:, None, None] - b[:, :, None])
    q = np.argmin(err, axis=2).astype(np.uint8)  # the first of equal errors, as best_index_mxfp4
    return q, e


def dequantize(t: str, q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """float64 values of the blocks, in natural order."""
    if t == "q4_0":
        return ((q.astype(np.float64) - 8) * s.astype(np.float64)[:, None]).reshape(-1)
    if t == "q8_0":
        return (q.astype(np.float64) * s.astype(np.float64)[:, None]).reshape(-1)
    if t == "mxfp4":
        return (KVALUES_MXFP4[q].astype(np.float64) * e8m0_half(s).astype(np.float64)[:, None]).reshape(-1)
    raise ValueError(t)


def quantize(t: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return {"q4_0": quantize_q4_0, "q8_0": quantize_q8_0, "mxfp4": quantize_mxfp4}[t](x)


def _pack_nibbles(v: np.ndarray, k: int) -> np.ndarray:
    """A row's 4-bit values (natural order, length k) as the repack lays them out: in each whole
    super-block byte j holds values j and j+128; in a last, partial one, values 2j and 2j+1."""
    out = np.zeros(k // 2, dtype=np.uint8)
    full = k // SUPER
    if full:
        sb = v[: full * SUPER].reshape(full, SUPER)
        out[: full * SUPER // 2] = (sb[:, :128] | (sb[:, 128:] << 4)).reshape(-1)
    rest = v[full * SUPER:]
    if len(rest):
        out[full * SUPER // 2:] = rest[0::2] | (rest[1::2] << 4)
    return out


def repack_row(t: str, q: np.ndarray, s: np.ndarray, k: int) -> bytes:
    """One row as the backend's repack writes it: quants, then the scales in block order."""
    flat = q.reshape(-1).astype(np.uint8)
    if t == "q4_0":
        return _pack_nibbles(flat, k).tobytes() + s.astype("<f2").tobytes()
    if t == "mxfp4":
        return _pack_nibbles(flat, k).tobytes() + s.astype(np.uint8).tobytes()
    if t == "q8_0":
        return flat.tobytes() + s.astype("<f2").tobytes()
    raise ValueError(t)


def repacked_matrix(t: str, w: np.ndarray) -> tuple[bytes, np.ndarray]:
    """(the DSP's bytes, the float64 values they stand for) of a [rows, k] float matrix."""
    rows, k = w.shape
    data = bytearray()
    values = np.empty((rows, k), dtype=np.float64)
    for r in range(rows):
        q, s = quantize(t, w[r])
        data += repack_row(t, q, s, k)
        values[r] = dequantize(t, q, s)
    assert len(data) == rows * row_bytes(t, k)
    return bytes(data), values
