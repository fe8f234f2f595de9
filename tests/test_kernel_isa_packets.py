"""HVX float instructions sharing packets under the patched qemu-hexagon (tests/kernel_isa/packet.c):
packets at the per-packet limits the assembler accepts (two VX beside two loads, four VA, a VX_DV
multiply with a VS add and a VA max, ...) and kernels the compiler schedules from intrinsics, as
for v73 so for v75. Each result is checked as in test_kernel_isa.py; a packet QEMU cannot give
slots to would end the program with an invalid-packet exception instead."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests import hvx_models as M

HERE = Path(__file__).parent / "kernel_isa"
RECORDS = 64
N32, N16 = RECORDS * 32, RECORDS * 64
FLOAT_OP = re.compile(r"\.(sf|hf|qf32|qf16)\b")


def inputs(kind):
    g = np.random.default_rng(75)
    if kind == "hf":
        a, b = M.finite_hf(g, N16, 7), M.finite_hf(g, N16, 7)
        return a, b, M.finite_sf(g, N32, 20), M.finite_sf(g, N32, 20)
    a, b, c, d = (M.finite_sf(g, N32, 20) for _ in range(4))
    b = M.pair_up(g, a, b, M.neg_sf)
    return a, b, c, (M.qf32(g, N32, 0, 254) if kind == "sf_qf" else d)


def ieee(op):
    return lambda a, b: M.sf_op(op)(a, b)


def qf_exact(op, value=M.sf_value):
    return lambda a, b: op(value(a), value(b))


def hf_pair(a, b, c, d):
    la, lb = a.reshape(RECORDS, 32, 2), b.reshape(RECORDS, 32, 2)
    return [M.hf_value(la[..., k].ravel()) * M.hf_value(lb[..., k].ravel()) for k in (0, 1)]


def acc_pair(a, b, c, d):
    la, lb = a.reshape(RECORDS, 32, 2), b.reshape(RECORDS, 32, 2)
    return [M.mpy_acc(x, la[..., k].ravel(), lb[..., k].ravel()) for k, x in ((0, c), (1, d))]


SF_MAX, SF_MIN = M.vmax(M.sf_order), M.vmin(M.sf_order)
GT = lambda a, b: np.where(np.repeat(M.sf_order(a) > M.sf_order(b), 4), np.uint8(0xFF), np.uint8(0))  # noqa: E731

# name -> input kind, (check, expected lo), (check, expected hi); a check is "bits" or a qf width
PACKETS = {
    "pk_vx2": ("sf", ("bits", lambda a, b, c, d: ieee(np.add)(a, b)), ("bits", lambda a, b, c, d: ieee(np.subtract)(a, b))),
    "pk_mix3": ("sf", (32, lambda a, b, c, d: qf_exact(np.multiply)(a, b)), (32, lambda a, b, c, d: qf_exact(np.add)(c, d))),
    "pk_mix3_b": ("sf", ("bits", lambda a, b, c, d: SF_MAX(a, c)), (32, lambda a, b, c, d: qf_exact(np.multiply)(a, b))),
    "pk_va4": ("sf", ("bits", lambda a, b, c, d: SF_MAX(a, b)),
               ("bits", lambda a, b, c, d: M.vmin(M.hf_order)(c.view(np.uint16), d.view(np.uint16)))),
    "pk_va4_b": ("sf", ("bits", lambda a, b, c, d: SF_MIN(a, b)), ("bits", lambda a, b, c, d: GT(a, b))),
    "pk_dv": ("hf", (32, lambda *x: hf_pair(*x)[0]), (32, lambda *x: hf_pair(*x)[1])),
    "pk_dv_b": ("sf", (32, lambda a, b, c, d: qf_exact(np.subtract)(c, d)), (32, lambda a, b, c, d: qf_exact(np.subtract)(c, d))),
    "pk_all": ("sf", ("bits", lambda a, b, c, d: ieee(np.add)(a, b)), (32, lambda a, b, c, d: qf_exact(np.add)(c, d))),
    "pk_all_b": ("sf", ("bits", lambda a, b, c, d: SF_MAX(a, b)), ("bits", lambda a, b, c, d: SF_MAX(a, b))),
    "pk_vx2_vs": ("sf", (32, lambda a, b, c, d: qf_exact(np.add)(c, d)), ("bits", lambda a, b, c, d: ieee(np.add)(a, b))),
    "pk_vx2_conv": ("sf_qf", ("bits", lambda a, b, c, d: M.sf_bits(M.qf32_value(d).astype(np.float32))),
                    ("bits", lambda a, b, c, d: ieee(np.subtract)(a, b))),
    "pk_acc": ("hf", ("bits", lambda *x: acc_pair(*x)[0]), ("bits", lambda *x: acc_pair(*x)[1])),
    "cc_ieee_chain": ("sf", ("bits", lambda a, b, c, d: ieee(np.add)(ieee(np.add)(a, b), ieee(np.add)(c, d))),
                      ("bits", lambda a, b, c, d: ieee(np.subtract)(ieee(np.subtract)(a, b), ieee(np.subtract)(c, d)))),
}


@pytest.fixture(scope="session", params=["v73", "v75"])
def packet_program(request, kernel_env, tmp_path_factory):
    htp = request.param
    elf = kernel_env.compile([HERE / "packet.c"], tmp_path_factory.mktemp(f"packet-{htp}") / "packet", htp=htp)
    return htp, elf, M.program_names(kernel_env, elf, htp)


def run(kernel_env, packet_program, name, kind):
    htp, elf, names = packet_program
    x = inputs(kind)
    return x, M.run_program(kernel_env, elf, names, name, x, htp=htp)


@pytest.mark.parametrize("name", sorted(PACKETS))
def test_packet(kernel_env, packet_program, name):
    kind, *checks = PACKETS[name]
    x, outs = run(kernel_env, packet_program, name, kind)
    for got, (how, model) in zip(outs, checks):
        if how == "bits":
            M.assert_bits(name, got, model(*x))
        else:
            M.assert_qf(name, got, model(*x), how)


def test_qfloat_chain(kernel_env, packet_program):
    """sf((max(a,b)*min(c,d)) + (max(a,c)+min(b,d))) and sf((max(a,c)+min(b,d)) - max(a,b)) in qf32:
    each qf32 step errs by at most 2^-22 of its operands' magnitude, so the whole by 2^-20 of their
    sum; a qf32 zero is 2^-150, not 0, hence the absolute 2^-140"""
    x, (lo, hi) = run(kernel_env, packet_program, "cc_qf_chain", "sf")
    a, b, c, d = (M.sf_value(v) for v in x)
    mab, mcd, mac, mbd = np.maximum(a, b), np.minimum(c, d), np.maximum(a, c), np.minimum(b, d)
    p, s = mab * mcd, mac + mbd
    scale = np.abs(p) + np.abs(mac) + np.abs(mbd) + np.abs(mab)
    for got, exact in ((lo, p + s), (hi, s - mab)):
        err = np.abs(M.sf_value(got.view(np.uint32).ravel()) - exact)
        bad = np.nonzero(~(err <= scale * 2.0 ** -20 + 2.0 ** -140))[0]
        assert not len(bad), f"{len(bad)} results off, e.g. {err[bad[0]]:.3g} at scale {scale[bad[0]]:.3g}"


def test_compiler_packs_float_ops(kernel_env, tmp_path):
    """the compiled kernels do put several float instructions in one packet (not only one each)"""
    asm = kernel_env.compile([HERE / "packet.c"], tmp_path / "packet.s", flags=["-S"]).read_text()
    bodies = {m.group(1): m.group(2) for m in re.finditer(r"^(cc_\w+):[^\n]*\n(.*?)\.Lfunc_end", asm, re.S | re.M)}
    for name in ("cc_qf_chain", "cc_ieee_chain"):
        packets = re.findall(r"\{(.*?)\}", bodies[name], re.S)
        widest = max(sum(1 for line in p.splitlines() if FLOAT_OP.search(line)) for p in packets)
        assert widest >= 2, f"{name}: no packet with two float instructions"
