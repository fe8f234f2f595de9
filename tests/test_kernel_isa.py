"""Every HVX floating point instruction that qemu-hexagon-hvx/patches adds, run under the
patched qemu-hexagon (tests/kernel_isa/*.c) and checked against a NumPy model (tests/hvx_models.py):
IEEE results bit for bit, conversions exactly, qfloat results as values within one unit of the
result's exponent (2^(E - bias - frac)) of the exact result. Inputs are random with a fixed seed
per instruction plus edge cases (zeros, signs, subnormals, infinities, NaNs, the largest
exponents, ties and cancellation). For each instruction a wrong semantic (a sibling operation,
the other rounding, a dropped sign, swapped lanes, >= for >) must fail the same check, so the
inputs tell the right semantic from it."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from tests import hvx_models as M

HERE = Path(__file__).parent / "kernel_isa"
RECORDS = 128                      # 4096 words, 8192 halfwords per instruction


@dataclass
class Spec:
    prog: str
    make: Callable                 # rng -> inputs a, b, c, d (element arrays, RECORDS vectors each)
    expect: Callable               # inputs -> expected lo, hi
    wrong: Callable
    kind: str = "bits"             # bits | qf32 | qf16 | qf32pair: how lo/hi are compared
    exponent: Callable | None = None  # qfloat: inputs -> the biased exponent(s) it rounds at


def vec(x, dtype):
    return np.asarray(x, dtype).reshape(RECORDS, -1)


def zeros32():
    return np.zeros(RECORDS * 32, np.uint32)


def lanes(x, k):
    """x as (records, 32 elements, k lanes): the k narrow elements that make one word"""
    return np.asarray(x).reshape(RECORDS, 32, k)


def ab(gen_a, gen_b=None, negate=None):
    """a, b from generators; with negate, b repeats a, -a and a one bit off in part"""
    def make(g):
        a = gen_a(g)
        b = (gen_b or gen_a)(g)
        if negate is not None:
            b = M.pair_up(g, a, b, negate)
        return a, b, zeros32(), zeros32()
    return make


def unary(gen):
    """one operand; it is passed as b too (the program ignores it) so pair models can split it"""
    def make(g):
        a = gen(g)
        return a, a, zeros32(), zeros32()
    return make


def one(model):
    return lambda a, b, c, d: (model(a, b), zeros32())


def one1(model):
    return lambda a, b, c, d: (model(a), zeros32())


def even_odd(model):
    """hf pairs -> sf pair: even halfwords make the low vector, odd ones the high"""
    def f(a, b, c, d):
        la, lb = lanes(a, 2), lanes(b, 2)
        return model(la[..., 0].ravel(), lb[..., 0].ravel()), model(la[..., 1].ravel(), lb[..., 1].ravel())
    return f


def swapped(f):
    return lambda *x: f(*x)[::-1]


def interleave(model):
    """two word vectors -> one halfword vector: a's results in the even halves, b's in the odd"""
    def f(a, b, c, d):
        return np.stack([vec(model(a), np.uint16), vec(model(b), np.uint16)], -1).ravel(), zeros32()
    return f


N32, N16, N8 = RECORDS * 32, RECORDS * 64, RECORDS * 128
SF, HF = (lambda g: M.ieee_sf(g, N32)), (lambda g: M.ieee_hf(g, N16))
FHF = lambda g: M.finite_hf(g, N16)  # noqa: E731
QF32, QF16 = (lambda g: M.qf32(g, N32)), (lambda g: M.qf16(g, N16))


def fsf_sub(g):
    """finite sf with a tenth subnormal"""
    x = M.finite_sf(g, N32)
    x[-(N32 // 10):] = M.sf_random(g, N32 // 10, 0, 0)
    return x


def small_hf(g):
    """hf around the 8/16-bit integer ranges, half of them, the rest anywhere"""
    x = M.ieee_hf(g, N16)
    x[N16 // 2:] = M.hf_bits(g.uniform(-70000, 70000, N16 // 2) / g.choice([1, 100, 300], N16 // 2))
    return x


def ints(dtype, n):
    def gen(g):
        info = np.iinfo(dtype)
        x = g.integers(info.min, int(info.max) + 1, n, dtype=np.int64)
        bits = g.integers(1, info.bits + 1, n)
        x = np.where(g.random(n) < 0.5, x >> (info.bits - bits), x)
        x[:6] = [info.min, info.max, 0, -1 if info.min else 1, 2049 % (int(info.max) + 1), 4097 % (int(info.max) + 1)]
        return x.astype(dtype)
    return gen


def toward_zero(model):
    """the same conversion with truncation: one step toward zero where rounding went away from it"""
    def wrong(x, exact):
        r = model(x)
        back = M.sf_value(r) if r.dtype == np.uint32 else M.hf_value(r)
        magnitude = r & (0x7FFFFFFF if r.dtype == np.uint32 else 0x7FFF)
        away = np.isfinite(back) & (np.abs(back) > np.abs(exact)) & (magnitude != 0)
        return np.where(away, r - 1, r).astype(r.dtype)
    return wrong


# ---------------------------------------------------------------- the instructions

def ieee_specs():
    s = {}
    for t, gen, neg, op in (("sf", SF, M.neg_sf, M.sf_op), ("hf", HF, M.neg_hf, M.hf_op)):
        s[f"vadd_{t}_{t}"] = Spec("ieee", ab(gen, negate=neg), one(op(np.add)), one(op(np.subtract)))
        s[f"vsub_{t}_{t}"] = Spec("ieee", ab(gen, negate=neg), one(op(np.subtract)), one(op(np.add)))
        s[f"vmpy_{t}_{t}"] = Spec("ieee", ab(gen, negate=neg), one(op(np.multiply)), one(op(np.add)))
    for name, op, other in (("vadd", np.add, np.subtract), ("vsub", np.subtract, np.add), ("vmpy", np.multiply, np.add)):
        s[f"{name}_sf_hf"] = Spec("ieee", ab(HF, negate=M.neg_hf), even_odd(M.widen_op(op)), even_odd(M.widen_op(other)))

    def acc_make(g):
        c, d = M.finite_sf(g, N32, 30), M.finite_sf(g, N32, 30)
        c[:8] = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 1, 0x80000001, 0x3F800000]
        return M.finite_hf(g, N16, 14), M.ieee_hf(g, N16), c, d

    def acc(a, b, c, d, add=True):
        la, lb = lanes(a, 2), lanes(b, 2)
        return tuple(M.mpy_acc(x if add else np.zeros_like(x), la[..., k].ravel(), lb[..., k].ravel())
                     for k, x in ((0, c), (1, d)))
    s["vmpy_sf_hf_acc"] = Spec("ieee", acc_make, acc, lambda *x: acc(*x, add=False))
    for t, gen, neg, val, dnan, sign in (("sf", SF, M.neg_sf, M.sf_value, M.SF_DNAN, 31),
                                         ("hf", HF, M.neg_hf, M.hf_value, M.HF_DNAN, 15)):
        fmax, fmin = M.vfmax(val, dnan, sign), M.vfmax(val, dnan, sign, pick_max=False)
        s[f"vfmax_{t}"] = Spec("ieee", ab(gen, negate=neg), one(fmax), one(fmin))
        s[f"vfmin_{t}"] = Spec("ieee", ab(gen, negate=neg), one(fmin), one(fmax))
        bit = (1 << sign)
        s[f"vfneg_{t}"] = Spec("ieee", unary(gen), one1(lambda a, bit=bit: a ^ bit), one1(lambda a: a))
        s[f"vabs_{t}"] = Spec("ieee", unary(gen), one1(lambda a, bit=bit: a & (bit - 1)), one1(lambda a, bit=bit: a ^ bit))
    s["vassign_fp"] = Spec("ieee", unary(SF), one1(lambda a: a), one1(M.neg_sf))
    return s


def convert_specs():
    s = {}
    s["vcvt_sf_hf"] = Spec("convert", unary(HF), even_odd(lambda a, b: M.sf_from_hf(a)),
                           swapped(even_odd(lambda a, b: M.sf_from_hf(a))))
    trunc_hf = toward_zero(M.hf_from_sf)
    s["vcvt_hf_sf"] = Spec("convert", ab(SF), interleave(M.hf_from_sf),
                           interleave(lambda x: trunc_hf(x, M.sf_value(x))))

    def hf_of(dtype):
        return lambda a: M.hf_bits(a.view(dtype).astype(np.float64))
    for name, prog_dtype, other in (("h", np.int16, np.uint16), ("uh", np.uint16, np.int16)):
        for insn in (f"vcvt_hf_{name}",) + (("vconv_hf_h",) if name == "h" else ()):
            s[insn] = Spec("convert", unary(ints(prog_dtype, N16)), one1(hf_of(prog_dtype)), one1(hf_of(other)))
    for name, lo, hi, dt in (("h", -32768, 32767, np.int16), ("uh", 0, 65535, np.uint16)):
        s[f"vcvt_{name}_hf"] = Spec("convert", unary(small_hf),
                                    one1(lambda a, lo=lo, hi=hi, dt=dt: M.int_from_hf(a, lo, hi, np.rint).astype(dt)),
                                    one1(lambda a, lo=lo, hi=hi, dt=dt: M.int_from_hf(a, lo, hi, np.trunc).astype(dt)))
    for name, dt, other in (("b", np.int8, np.uint8), ("ub", np.uint8, np.int8)):
        def widen(a, c, d, dt=dt):
            q = lanes(M.hf_bits(a.view(dt).astype(np.float16)), 4)
            return q[..., 0:2].ravel(), q[..., 2:4].ravel()
        s[f"vcvt_hf_{name}"] = Spec("convert", unary(ints(dt, N8)), lambda a, b, c, d, w=widen: w(a, c, d),
                                    lambda a, b, c, d, dt=other: widen(a, c, d, dt))
    for name, lo, hi, dt in (("b", -128, 127, np.int8), ("ub", 0, 255, np.uint8)):
        def narrow(a, b, c, d, lo=lo, hi=hi, dt=dt, rnd=np.rint):
            x = [lanes(M.int_from_hf(v, lo, hi, rnd).astype(dt), 2) for v in (a, b)]
            return np.concatenate(x, -1).ravel(), zeros32()
        s[f"vcvt_{name}_hf"] = Spec("convert", ab(small_hf), narrow,
                                    lambda *x, n=narrow: n(*x, rnd=np.trunc))
    exact_w = lambda a: a.astype(np.float64)  # noqa: E731
    s["vconv_sf_w"] = Spec("convert", unary(ints(np.int32, N32)), one1(lambda a: M.sf_bits(a.astype(np.float32))),
                           one1(lambda a: toward_zero(lambda x: M.sf_bits(x.astype(np.float32)))(a, exact_w(a))))

    def to_int(v, bits, lo, hi, rnd_wrong=False):
        val = M.sf_value(v) if bits == 32 else M.hf_value(v)
        if rnd_wrong:
            return M.int_from_hf(M.hf_bits(val), lo, hi, np.rint) if bits == 16 else np.clip(np.nan_to_num(np.rint(val)), lo, hi)
        return M.int_toward_zero(val, (v >> (bits - 1)) == 1, lo, hi)
    wide_sf = lambda g: np.where(np.arange(N32) % 2 == 0, M.ieee_sf(g, N32),  # noqa: E731
                                 M.sf_bits(g.uniform(-3e9, 3e9, N32) / g.choice([1, 1e3, 1e7], N32)))
    s["vconv_w_sf"] = Spec("convert", unary(wide_sf),
                           one1(lambda a: to_int(a, 32, -2**31, 2**31 - 1).astype(np.int32)),
                           one1(lambda a: to_int(a, 32, -2**31, 2**31 - 1, True).astype(np.int32)))
    s["vconv_h_hf"] = Spec("convert", unary(small_hf), one1(lambda a: to_int(a, 16, -32768, 32767).astype(np.int16)),
                           one1(lambda a: to_int(a, 16, -32768, 32767, True).astype(np.int16)))
    return s


def add_exponent(ka, kb):
    frac, bias = M.FORMATS[ka]
    return lambda a, b, c, d: (M.add_exponent(M.operand(a, ka), M.operand(b, kb), frac, bias),)


def mpy_exponent(ka, kb, bias, pair=False):
    if not pair:
        return lambda a, b, c, d: (M.operand(a, ka)[0] + M.operand(b, kb)[0] + bias,)
    return lambda a, b, c, d: tuple(M.operand(lanes(a, 2)[..., k].ravel(), ka)[0] +
                                    M.operand(lanes(b, 2)[..., k].ravel(), kb)[0] + bias for k in (0, 1))


def qfloat_specs():
    s = {}
    for w, q, ieee, neg_q, neg_i, qval, ival, fq in (
            ("32", QF32, fsf_sub, M.neg_qf32, M.neg_sf, M.qf32_value, M.sf_value, "sf"),
            ("16", QF16, FHF, M.neg_qf16, M.neg_hf, M.qf16_value, M.hf_value, "hf")):
        qnear = (lambda g: M.qf32(g, N32, 127 - 40, 127 + 40)) if w == "32" else q
        kind, qk = f"qf{w}", f"qf{w}"
        for op, other, name in ((np.add, np.subtract, "add"), (np.subtract, np.add, "sub")):
            s[f"v{name}_qf{w}"] = Spec("qfloat", ab(q, negate=neg_q), one(lambda a, b, v=qval, o=op: o(v(a), v(b))),
                                       one(lambda a, b, v=qval, o=other: o(v(a), v(b))), kind, add_exponent(qk, qk))
            s[f"v{name}_{fq}"] = Spec("qfloat", ab(ieee, negate=neg_i), one(lambda a, b, v=ival, o=op: o(v(a), v(b))),
                                      one(lambda a, b, v=ival, o=other: o(v(a), v(b))), kind, add_exponent(fq, fq))
            s[f"v{name}_qf{w}_mix"] = Spec("qfloat", ab(qnear, ieee),
                                           one(lambda a, b, v=qval, u=ival, o=op: o(v(a), u(b))),
                                           one(lambda a, b, v=qval, u=ival, o=op: o(v(a), np.abs(u(b)))), kind,
                                           add_exponent(qk, fq))
    qwide, fwide = (lambda g: M.qf32(g, N32)), (lambda g: M.finite_sf(g, N32, 60))
    mul = lambda v, u=None: one(lambda a, b: v(a) * (u or v)(b))  # noqa: E731
    mul_abs = lambda v, u=None: one(lambda a, b: v(a) * np.abs((u or v)(b)))  # noqa: E731
    s["vmpy_qf32"] = Spec("qfloat", ab(qwide), mul(M.qf32_value), one(lambda a, b: M.qf32_value(a) + M.qf32_value(b)),
                          "qf32", mpy_exponent("qf32", "qf32", 127))
    s["vmpy_qf32_sf"] = Spec("qfloat", ab(fwide), mul(M.sf_value), mul_abs(M.sf_value), "qf32", mpy_exponent("sf", "sf", 127))
    s["vmpy_qf16"] = Spec("qfloat", ab(QF16), mul(M.qf16_value), one(lambda a, b: M.qf16_value(a) + M.qf16_value(b)),
                          "qf16", mpy_exponent("qf16", "qf16", 15))
    s["vmpy_qf16_hf"] = Spec("qfloat", ab(FHF), mul(M.hf_value), mul_abs(M.hf_value), "qf16", mpy_exponent("hf", "hf", 15))
    s["vmpy_qf16_mix_hf"] = Spec("qfloat", ab(QF16, FHF), mul(M.qf16_value, M.hf_value),
                                 mul_abs(M.qf16_value, M.hf_value), "qf16", mpy_exponent("qf16", "hf", 15))
    for name, ka, kb in (("qf16", "qf16", "qf16"), ("hf", "hf", "hf"), ("mix_hf", "qf16", "hf")):
        u, v = (M.qf16_value if ka == "qf16" else M.hf_value), (M.qf16_value if kb == "qf16" else M.hf_value)
        gens = (QF16 if ka == "qf16" else FHF, QF16 if kb == "qf16" else FHF)
        pair = even_odd(lambda a, b, u=u, v=v: u(a) * v(b))
        wrong = swapped(pair) if name != "mix_hf" else even_odd(lambda a, b, u=u, v=v: u(a) * np.abs(v(b)))
        s[f"vmpy_qf32_{name}"] = Spec("qfloat", ab(*gens), pair, wrong, "qf32pair", mpy_exponent(ka, kb, 127, pair=True))

    trunc_sf = toward_zero(lambda x: M.sf_bits(x.astype(np.float32)))
    trunc_hf = toward_zero(lambda x: M.hf_bits(x.astype(np.float16)))
    s["vconv_sf_qf32"] = Spec("qfloat", unary(lambda g: M.qf32(g, N32, 0, 254)),
                              one1(lambda a: M.sf_bits(M.qf32_value(a).astype(np.float32))),
                              one1(lambda a: trunc_sf(M.qf32_value(a), M.qf32_value(a))))
    s["vconv_hf_qf16"] = Spec("qfloat", unary(lambda g: M.qf16(g, N16, 0, 30)),
                              one1(lambda a: M.hf_bits(M.qf16_value(a).astype(np.float16))),
                              one1(lambda a: trunc_hf(M.qf16_value(a), M.qf16_value(a))))
    to_hf = lambda a: M.hf_bits(M.qf32_value(a).astype(np.float16))  # noqa: E731
    s["vconv_hf_qf32"] = Spec("qfloat", ab(lambda g: M.qf32(g, N32, 90, 142)), interleave(to_hf),
                              lambda a, b, c, d: interleave(to_hf)(b, a, c, d))
    return s


def compare_specs():
    s = {}
    for t, gen, neg, order, k in (("sf", SF, M.neg_sf, M.sf_order, 4), ("hf", HF, M.neg_hf, M.hf_order, 2)):
        def make(g, gen=gen, neg=neg, t=t):
            a, b, c, d = ab(gen, negate=neg)(g)
            z, nz = (0, 0x80000000) if t == "sf" else (0, 0x8000)
            a[-4:], b[-4:] = [z, nz, z, nz], [nz, z, z, nz]
            c = (np.random.default_rng(1).integers(0, 2, N8) * np.random.default_rng(2).integers(1, 256, N8)).astype(np.uint8)
            return a, b, c, zeros32()
        s[f"vmax_{t}"] = Spec("compare", make, one(M.vmax(order)), one(M.vmin(order)))
        s[f"vmin_{t}"] = Spec("compare", make, one(M.vmin(order)), one(M.vmax(order)))

        def gt(a, b, c, d, order=order, k=k, acc=None, ge=False):
            r = order(a) >= order(b) if ge else order(a) > order(b)
            bits = np.repeat(r, k)
            if acc is not None:
                bits = acc(c != 0, bits)
            return np.where(bits, np.uint8(0xFF), np.uint8(0)), zeros32()
        s[f"vgt{t}"] = Spec("compare", make, gt, lambda *x, g=gt: g(*x, ge=True))
        for name, acc in (("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)):
            s[f"vgt{t}_{name}"] = Spec("compare", make, lambda *x, g=gt, a=acc: g(*x, acc=a), gt)
    return s


SPECS = {**ieee_specs(), **convert_specs(), **qfloat_specs(), **compare_specs()}


# ---------------------------------------------------------------- running and checking

@pytest.fixture(scope="session")
def isa_run(kernel_env, tmp_path_factory):
    programs, results = {}, {}
    out = tmp_path_factory.mktemp("kernel_isa")

    def run(name):
        if name not in results:
            spec = SPECS[name]
            if spec.prog not in programs:
                elf = kernel_env.compile([HERE / f"{spec.prog}.c"], out / spec.prog)
                programs[spec.prog] = (elf, M.program_names(kernel_env, elf))
            inputs = spec.make(np.random.default_rng(zlib.crc32(name.encode())))
            results[name] = (inputs, *M.run_program(kernel_env, *programs[spec.prog], name, inputs))
        return results[name]
    return run


def check(name, model, inputs, lo, hi):
    spec = SPECS[name]
    want = model(*inputs)
    if spec.kind == "bits":
        M.assert_bits(f"{name} lo", lo, want[0])
        M.assert_bits(f"{name} hi", hi, want[1])
        return
    width = 32 if spec.kind.startswith("qf32") else 16
    outs = (lo, hi) if spec.kind == "qf32pair" else (lo,)
    for got, exact, exponent, which in zip(outs, want, spec.exponent(*inputs), ("lo", "hi")):
        M.assert_qf(f"{name} {which}", got, exact, width)
        M.assert_exponent(f"{name} {which}", got, exponent, exact, width)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_instruction(isa_run, name):
    check(name, SPECS[name].expect, *isa_run(name))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_wrong_semantic_fails(isa_run, name):
    with pytest.raises(AssertionError):
        check(name, SPECS[name].wrong, *isa_run(name))
