"""NumPy models of the HVX floating point instructions (Hexagon v68-v75) that
tests/test_kernel_isa.py runs under qemu-hexagon, and the inputs they are fed.

IEEE results are exact: NumPy float32/float16 arithmetic and conversions round to nearest even
and keep subnormals; the emulator returns the default NaN (0x7fffffff, 0x7fff) for any NaN
result, so the models do too. qfloat results are checked as values: a qf32 (qf16) word holds a
biased exponent E in its low 8 (5) bits and a two's complement mantissa m above it, and stands
for (2m + 1) * u with u = 2^(E - 127 - 23) (2^(E - 15 - 10)). Within the exponent range the
architecture model rounds to within one u of the exact result (qemu-hexagon-hvx/README.md).
"""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np

VBYTES = 128
SF_DNAN = 0x7FFFFFFF
HF_DNAN = 0x7FFF

# ---------------------------------------------------------------- the programs' protocol

LIST_NAMES = 0xFFFFFFFF


def program_stdin(op: int, inputs) -> bytes:
    """u32 op, u32 n, then n records of four vectors a, b, c, d (tests/kernel_isa/hvx_isa.h)"""
    vecs = [np.frombuffer(np.ascontiguousarray(x).tobytes(), np.uint8).reshape(-1, VBYTES) for x in inputs]
    return struct.pack("<II", op, len(vecs[0])) + np.stack(vecs, 1).tobytes()


def program_outputs(stdout: bytes):
    """the lo and hi vectors of every record, as (records, 128) byte arrays"""
    out = np.frombuffer(stdout, np.uint8).reshape(-1, 2, VBYTES)
    return out[:, 0].copy(), out[:, 1].copy()


def run_program(kernel_env, elf, names, name, inputs, htp="v73"):
    done = kernel_env.run(elf, program_stdin(names.index(name), inputs), htp=htp)
    assert done.returncode == 0, f"{name}: exit {done.returncode}: {done.stderr.decode(errors='replace')}"
    return program_outputs(done.stdout)


def program_names(kernel_env, elf, htp="v73"):
    return kernel_env.run(elf, struct.pack("<II", LIST_NAMES, 0), htp=htp).stdout.decode().split()


def assert_bits(name, got, want):
    """got: (records, 128) bytes; want: an element array of the same bytes"""
    want = np.frombuffer(np.ascontiguousarray(want).tobytes(), np.uint8).reshape(got.shape)
    bad = np.nonzero((got != want).any(1))[0]
    assert not len(bad), f"{name}: differs in {len(bad)} of {len(got)} vectors (first {bad[0]})"


def assert_qf(name, got, exact, width):
    """qfloat results within one unit of their exponent (2^(E - bias - frac)) of the exact values"""
    value, unit = (qf32_value, qf32_unit) if width == 32 else (qf16_value, qf16_unit)
    bits = got.view(np.uint32 if width == 32 else np.uint16).ravel()
    err = np.abs(value(bits) - exact)
    bad = np.nonzero(~(err <= unit(bits) + np.abs(exact) * 2.0 ** -50))[0]
    assert not len(bad), (f"{name}: {len(bad)} results off by more than one unit, e.g. {bits[bad[0]]:#x} "
                          f"= {value(bits[bad[0]])!r} for {exact[bad[0]]!r}")


# ---------------------------------------------------------------- bit patterns and values


def sf_bits(x) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float32).view(np.uint32)


def hf_bits(x) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float16).view(np.uint16)


def sf_value(bits) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def hf_value(bits) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(bits, np.uint16).view(np.float16).astype(np.float64)


def qf32_value(bits) -> np.ndarray:
    bits = np.asarray(bits, np.uint32)
    m = bits.view(np.int32) >> 8
    return np.ldexp(2.0 * m + 1, (bits & 0xFF).astype(np.int64) - 150)


def qf16_value(bits) -> np.ndarray:
    bits = np.asarray(bits, np.uint16)
    m = bits.view(np.int16).astype(np.int64) >> 5
    return np.ldexp(2.0 * m + 1, (bits & 0x1F).astype(np.int64) - 25)


def qf32_unit(bits) -> np.ndarray:
    return np.ldexp(1.0, (np.asarray(bits, np.uint32) & 0xFF).astype(np.int64) - 150)


def qf16_unit(bits) -> np.ndarray:
    return np.ldexp(1.0, (np.asarray(bits, np.uint16) & 0x1F).astype(np.int64) - 25)


def dnan_sf(bits) -> np.ndarray:
    bits = np.asarray(bits, np.uint32)
    return np.where((bits & 0x7FFFFFFF) > 0x7F800000, np.uint32(SF_DNAN), bits).astype(np.uint32)


def dnan_hf(bits) -> np.ndarray:
    bits = np.asarray(bits, np.uint16)
    return np.where((bits & 0x7FFF) > 0x7C00, np.uint16(HF_DNAN), bits).astype(np.uint16)


# ---------------------------------------------------------------- qfloat result exponents
#
# A qfloat result is not normalised: an add or subtract keeps the exponent of its larger operand
# (normalised: max(e_big + floor(log2 |sig_big|), e_small)), a multiply the sum of the operand
# exponents; rounding may move it up by one.

FORMATS = {"qf32": (23, 127), "qf16": (10, 15), "sf": (23, 127), "hf": (10, 15)}


def operand(bits, kind):
    """(unbiased exponent, significand in units of 2^-frac) of qfloat or IEEE operands"""
    bits = np.asarray(bits)
    if kind in ("qf32", "qf16"):
        ebits = 8 if kind == "qf32" else 5
        signed = bits.view(np.int32 if kind == "qf32" else np.int16).astype(np.int64)
        return (bits & ((1 << ebits) - 1)).astype(np.int64) - FORMATS[kind][1], 2 * (signed >> ebits) + 1
    frac, bias = FORMATS[kind]
    e = (bits.astype(np.int64) >> frac) & (0xFF if kind == "sf" else 0x1F)
    sig = (bits.astype(np.int64) & ((1 << frac) - 1)) | np.where(e > 0, 1 << frac, 0)
    return np.maximum(e, 1) - bias, sig


def add_exponent(u, v, frac, bias):
    """the biased exponent an add/subtract rounds at"""
    (eu, su), (ev, sv) = u, v
    def ilog(s):
        with np.errstate(divide="ignore"):
            return np.where(s == 0, -(frac + 1), np.floor(np.log2(np.abs(s) + (s == 0))).astype(np.int64) - frac)
    big_u = eu > ev
    e = np.where(big_u, np.maximum(eu + ilog(su), ev), np.maximum(ev + ilog(sv), eu))
    return e + bias


def assert_exponent(name, got, want, exact, width):
    """a qfloat result's exponent field is the operation's exponent or one above (0 for a zero)"""
    bits = got.view(np.uint32 if width == 32 else np.uint16).ravel()
    field = (bits & (0xFF if width == 32 else 0x1F)).astype(np.int64)
    ok = (field == want) | (field == want + 1) | ((exact == 0) & (field == 0))
    bad = np.nonzero(~ok)[0]
    assert not len(bad), f"{name}: {len(bad)} results at exponent {field[bad[0]]}, the operation's is {want[bad[0]]}"


# ---------------------------------------------------------------- inputs

SF_EDGES = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 1,
                     0x80000001, 0x007FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,
                     0x3F800000, 0xBF800000, 0x3F800001, 0x4B800000, 0x3EFFFFFF], np.uint32)
HF_EDGES = np.array([0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 1, 0x8001, 0x03FF,
                     0x0400, 0x8400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x3C01, 0x3800, 0x5BF8,
                     0x57F0, 0x57F8, 0xD7F8], np.uint16)


def sf_random(g, n, lo, hi):
    e = g.integers(lo, hi + 1, n, dtype=np.uint32)
    return (g.integers(0, 2, n, dtype=np.uint32) << 31) | (e << 23) | g.integers(0, 1 << 23, n, dtype=np.uint32)


def hf_random(g, n, lo, hi):
    e = g.integers(lo, hi + 1, n, dtype=np.uint16)
    return ((g.integers(0, 2, n, dtype=np.uint16) << 15) | (e << 10)
            | g.integers(0, 1 << 10, n, dtype=np.uint16)).astype(np.uint16)


def ieee_sf(g, n):
    """the whole binary32 range, subnormals, zeros, infinities and NaNs; the edge cases at the start
    and, shuffled (so that two operands meet other edges), in the middle"""
    x = sf_random(g, n, 1, 254)
    sub = g.random(n) < 0.1
    x[sub] = sf_random(g, int(sub.sum()), 0, 0)
    x[: len(SF_EDGES)] = SF_EDGES
    x[n // 2: n // 2 + len(SF_EDGES)] = g.permutation(SF_EDGES)
    return x


def ieee_hf(g, n):
    x = hf_random(g, n, 1, 30)
    sub = g.random(n) < 0.1
    x[sub] = hf_random(g, int(sub.sum()), 0, 0)
    x[: len(HF_EDGES)] = HF_EDGES
    x[n // 2: n // 2 + len(HF_EDGES)] = g.permutation(HF_EDGES)
    return x


def finite_sf(g, n, span=40):
    """normal numbers within 2^+-span, a few zeros: qfloat operands that cannot saturate"""
    x = sf_random(g, n, 127 - span, 127 + span)
    x[:4] = [0, 0x80000000, 0x3F800000, 0xBF800000]
    return x


def finite_hf(g, n, span=7):
    x = hf_random(g, n, 15 - span, 15 + span)
    x[:4] = [0, 0x8000, 0x3C00, 0xBC00]
    return x


def qf32(g, n, lo=127 - 60, hi=127 + 60):
    m = g.integers(0, 1 << 24, n, dtype=np.uint32)
    small = g.random(n) < 0.1              # unnormalised mantissas
    m[small] = g.integers(0, 1 << 8, int(small.sum()), dtype=np.uint32) ^ np.where(
        g.random(int(small.sum())) < 0.5, np.uint32(0xFFFFFF), np.uint32(0))
    return (m << 8) | g.integers(lo, hi + 1, n, dtype=np.uint32)


def qf16(g, n, lo=15 - 7, hi=15 + 7):
    m = g.integers(0, 1 << 11, n, dtype=np.uint16)
    return ((m << 5) | g.integers(lo, hi + 1, n, dtype=np.uint16)).astype(np.uint16)


def pair_up(g, a, b, negate):
    """make some b equal to a, to -a and to a one bit off: ties and cancellation"""
    b = b.copy()
    k = len(a) // 8
    b[:k] = a[:k]
    b[k:2 * k] = negate(a[k:2 * k])
    b[2 * k:3 * k] = a[2 * k:3 * k] ^ g.integers(1, 4, k).astype(a.dtype)
    return b


def neg_sf(x):
    return x ^ np.uint32(0x80000000)


def neg_hf(x):
    return x ^ np.uint16(0x8000)


def neg_qf32(x):
    return x ^ np.uint32(0xFFFFFF00)


def neg_qf16(x):
    return x ^ np.uint16(0xFFE0)


# ---------------------------------------------------------------- exact rounding


def round_f32(q: Fraction) -> int:
    """the binary32 nearest to q, ties to even (finite q, |q| below FLT_MAX + half an ulp)"""
    if q == 0:
        return 0
    x = np.float32(float(q))
    cands = [np.nextafter(x, np.float32(-np.inf)), x, np.nextafter(x, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(sf_bits(c)) & 1))
    return int(sf_bits(best))


# ---------------------------------------------------------------- models

def sf_op(op):
    def model(a, b):
        with np.errstate(all="ignore"):
            return dnan_sf(sf_bits(op(a.view(np.float32), b.view(np.float32))))
    return model


def hf_op(op):
    def model(a, b):
        with np.errstate(all="ignore"):
            return dnan_hf(hf_bits(op(a.view(np.float16), b.view(np.float16))))
    return model


def sf_from_hf(a):
    return dnan_sf(sf_bits(a.view(np.float16).astype(np.float32)))


def hf_from_sf(a):
    with np.errstate(all="ignore"):
        return dnan_hf(hf_bits(a.view(np.float32).astype(np.float16)))


def widen_op(op):
    """hf operands made sf exactly, then one sf operation"""
    def model(a, b):
        with np.errstate(all="ignore"):
            x = sf_bits(op(a.view(np.float16).astype(np.float32), b.view(np.float16).astype(np.float32)))
        nan = ((a & 0x7FFF) > 0x7C00) | ((b & 0x7FFF) > 0x7C00)
        return np.where(nan, np.uint32(SF_DNAN), dnan_sf(x)).astype(np.uint32)
    return model


def mpy_acc(acc, a, b):
    out = np.empty(len(acc), np.uint32)
    for i, (c, x, y) in enumerate(zip(acc, a, b)):
        if (c & 0x7FFFFFFF) > 0x7F800000 or (x & 0x7FFF) > 0x7C00 or (y & 0x7FFF) > 0x7C00:
            out[i] = SF_DNAN
            continue
        cv, xv, yv = float(sf_value(c)), float(hf_value(x)), float(hf_value(y))
        if np.isinf(cv) or np.isinf(xv) or np.isinf(yv):
            with np.errstate(all="ignore"):
                out[i] = dnan_sf(sf_bits(np.float32(np.float64(cv) + np.float64(xv) * np.float64(yv))))
        elif cv == 0 and xv * yv == 0:
            out[i] = 0x80000000 if (c >> 31) and (np.signbit(xv) != np.signbit(yv)) else 0
        else:
            out[i] = round_f32(Fraction(cv) + Fraction(xv) * Fraction(yv))
    return out


def _order(v, nan_mag, neg):
    """ordering by value with NaNs beyond the infinities, in their payload order"""
    with np.errstate(all="ignore"):
        r = np.where(np.isinf(v), np.sign(v) * 1e299, v)
    return np.where(np.isnan(v), np.where(neg, -1.0, 1.0) * 1e300 * (1 + nan_mag / 2.0 ** 24), r)


def sf_order(bits):
    return _order(sf_value(bits), (bits & 0x7FFFFF).astype(np.float64), bits >> 31 == 1)


def hf_order(bits):
    return _order(hf_value(bits), (bits & 0x3FF).astype(np.float64), bits >> 15 == 1)


def vmax(order):
    def model(a, b):
        zero = (order(a) == 0) & (order(b) == 0)
        return np.where(zero, np.where(a == 0, a, b), np.where(order(b) > order(a), b, a)).astype(a.dtype)
    return model


def vmin(order):
    def model(a, b):
        zero = (order(a) == 0) & (order(b) == 0)
        return np.where(zero, np.where(a == 0, b, a), np.where(order(a) > order(b), b, a)).astype(a.dtype)
    return model


def vfmax(value, dnan, sign, pick_max=True):
    def model(a, b):
        va, vb = value(a), value(b)
        nan = np.isnan(va) | np.isnan(vb)
        better = va > vb if pick_max else va < vb
        tie = va == vb
        # of +0 and -0, max takes +0 and min -0
        on_tie = np.where((a >> sign == 1) == pick_max, b, a)
        r = np.where(tie, on_tie, np.where(better, a, b))
        return np.where(nan, dnan, r).astype(a.dtype)
    return model


def int_from_hf(a, lo, hi, rnd):
    v = hf_value(a)
    with np.errstate(all="ignore"):
        r = np.clip(np.nan_to_num(rnd(v), nan=0.0, posinf=hi, neginf=lo), lo, hi)
    return np.where(np.isnan(v), hi, r).astype(np.int64)


def int_toward_zero(v, neg, lo, hi):
    with np.errstate(all="ignore"):
        r = np.clip(np.nan_to_num(np.trunc(v), nan=0.0, posinf=hi, neginf=lo), lo, hi)
    return np.where(np.isnan(v), np.where(neg, lo, hi), r).astype(np.int64)
