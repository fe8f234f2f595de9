#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check the instruction encodings that patches/*.patch adds to (or changes in) QEMU's
target/hexagon/imported/mmvec/encode_ext.def against the LLVM assembler, bit for bit.

Every ``+DEF_ENC(TAG, pattern)`` line of the patches must name an instruction of the table below;
each is assembled with ``llvm-mc -show-encoding`` (one instruction a packet, with the registers
and immediates given here) and every fixed bit of the pattern must equal the assembler's, every
field (d, u, v, x, i) must hold that operand's number. Bits marked ``-`` are not checked, ``PP``
(the packet parse bits) neither. An instruction of the table that no patch defines is an error.

``--slots`` instead measures, for each HVX float instruction, how many the assembler accepts in
one packet: alone, beside one scalar load and beside two (those take slots 0 and 1).

llvm-mc is ``llvm-mc-21`` on PATH, or inside the chroot named by HEXBUILD_KERNEL_DEV_ROOT, or the
command given with ``--llvm-mc`` (split on spaces). Exit status 0: all match; 1: a mismatch.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

MATTR = "+hvxv73,+hvx-length128b,+hvx-qfloat,+hvx-ieee-fp"
# operand placeholder -> (assembler text, encoded number, field letter); longest names first
OPERANDS = [("Vdd32", "v5:4", 4, "d"), ("Vuu32", "v7:6", 6, "u"), ("Vxx32", "v11:10", 10, "x"),
            ("Vd32", "v1", 1, "d"), ("Vu32", "v2", 2, "u"), ("Vv32", "v3", 3, "v"), ("Vx32", "v9", 9, "x"),
            ("Qd4", "q1", 1, "d"), ("Qx4", "q2", 2, "x"), ("Qv4", "q3", 3, "v"), ("#u1", "#1", 1, "i")]

FLOAT = {  # the HVX float instructions the patch adds
    "V6_vadd_sf_sf": "Vd32.sf=vadd(Vu32.sf,Vv32.sf)", "V6_vsub_sf_sf": "Vd32.sf=vsub(Vu32.sf,Vv32.sf)",
    "V6_vmpy_sf_sf": "Vd32.sf=vmpy(Vu32.sf,Vv32.sf)", "V6_vadd_hf_hf": "Vd32.hf=vadd(Vu32.hf,Vv32.hf)",
    "V6_vsub_hf_hf": "Vd32.hf=vsub(Vu32.hf,Vv32.hf)", "V6_vmpy_hf_hf": "Vd32.hf=vmpy(Vu32.hf,Vv32.hf)",
    "V6_vadd_sf_hf": "Vdd32.sf=vadd(Vu32.hf,Vv32.hf)", "V6_vsub_sf_hf": "Vdd32.sf=vsub(Vu32.hf,Vv32.hf)",
    "V6_vmpy_sf_hf": "Vdd32.sf=vmpy(Vu32.hf,Vv32.hf)", "V6_vmpy_sf_hf_acc": "Vxx32.sf+=vmpy(Vu32.hf,Vv32.hf)",
    "V6_vcvt_sf_hf": "Vdd32.sf=vcvt(Vu32.hf)", "V6_vcvt_hf_sf": "Vd32.hf=vcvt(Vu32.sf,Vv32.sf)",
    "V6_vcvt_hf_h": "Vd32.hf=vcvt(Vu32.h)", "V6_vcvt_hf_uh": "Vd32.hf=vcvt(Vu32.uh)",
    "V6_vcvt_h_hf": "Vd32.h=vcvt(Vu32.hf)", "V6_vcvt_uh_hf": "Vd32.uh=vcvt(Vu32.hf)",
    "V6_vcvt_hf_b": "Vdd32.hf=vcvt(Vu32.b)", "V6_vcvt_hf_ub": "Vdd32.hf=vcvt(Vu32.ub)",
    "V6_vcvt_b_hf": "Vd32.b=vcvt(Vu32.hf,Vv32.hf)", "V6_vcvt_ub_hf": "Vd32.ub=vcvt(Vu32.hf,Vv32.hf)",
    "V6_vfmax_sf": "Vd32.sf=vfmax(Vu32.sf,Vv32.sf)", "V6_vfmin_sf": "Vd32.sf=vfmin(Vu32.sf,Vv32.sf)",
    "V6_vfmax_hf": "Vd32.hf=vfmax(Vu32.hf,Vv32.hf)", "V6_vfmin_hf": "Vd32.hf=vfmin(Vu32.hf,Vv32.hf)",
    "V6_vfneg_sf": "Vd32.sf=vfneg(Vu32.sf)", "V6_vfneg_hf": "Vd32.hf=vfneg(Vu32.hf)",
    "V6_vabs_sf": "Vd32.sf=vabs(Vu32.sf)", "V6_vabs_hf": "Vd32.hf=vabs(Vu32.hf)",
    "V6_vassign_fp": "Vd32.w=vfmv(Vu32.w)",
    "V6_vconv_sf_w": "Vd32.sf=Vu32.w", "V6_vconv_w_sf": "Vd32.w=Vu32.sf",
    "V6_vconv_hf_h": "Vd32.hf=Vu32.h", "V6_vconv_h_hf": "Vd32.h=Vu32.hf",
    "V6_vconv_sf_qf32": "Vd32.sf=Vu32.qf32", "V6_vconv_hf_qf16": "Vd32.hf=Vu32.qf16",
    "V6_vconv_hf_qf32": "Vd32.hf=Vuu32.qf32",
    "V6_vadd_qf32": "Vd32.qf32=vadd(Vu32.qf32,Vv32.qf32)", "V6_vadd_sf": "Vd32.qf32=vadd(Vu32.sf,Vv32.sf)",
    "V6_vadd_qf32_mix": "Vd32.qf32=vadd(Vu32.qf32,Vv32.sf)", "V6_vsub_qf32": "Vd32.qf32=vsub(Vu32.qf32,Vv32.qf32)",
    "V6_vsub_sf": "Vd32.qf32=vsub(Vu32.sf,Vv32.sf)", "V6_vsub_qf32_mix": "Vd32.qf32=vsub(Vu32.qf32,Vv32.sf)",
    "V6_vadd_qf16": "Vd32.qf16=vadd(Vu32.qf16,Vv32.qf16)", "V6_vadd_hf": "Vd32.qf16=vadd(Vu32.hf,Vv32.hf)",
    "V6_vadd_qf16_mix": "Vd32.qf16=vadd(Vu32.qf16,Vv32.hf)", "V6_vsub_qf16": "Vd32.qf16=vsub(Vu32.qf16,Vv32.qf16)",
    "V6_vsub_hf": "Vd32.qf16=vsub(Vu32.hf,Vv32.hf)", "V6_vsub_qf16_mix": "Vd32.qf16=vsub(Vu32.qf16,Vv32.hf)",
    "V6_vmpy_qf32": "Vd32.qf32=vmpy(Vu32.qf32,Vv32.qf32)", "V6_vmpy_qf32_sf": "Vd32.qf32=vmpy(Vu32.sf,Vv32.sf)",
    "V6_vmpy_qf16": "Vd32.qf16=vmpy(Vu32.qf16,Vv32.qf16)", "V6_vmpy_qf16_hf": "Vd32.qf16=vmpy(Vu32.hf,Vv32.hf)",
    "V6_vmpy_qf16_mix_hf": "Vd32.qf16=vmpy(Vu32.qf16,Vv32.hf)",
    "V6_vmpy_qf32_qf16": "Vdd32.qf32=vmpy(Vu32.qf16,Vv32.qf16)", "V6_vmpy_qf32_hf": "Vdd32.qf32=vmpy(Vu32.hf,Vv32.hf)",
    "V6_vmpy_qf32_mix_hf": "Vdd32.qf32=vmpy(Vu32.qf16,Vv32.hf)",
    "V6_vmax_sf": "Vd32.sf=vmax(Vu32.sf,Vv32.sf)", "V6_vmin_sf": "Vd32.sf=vmin(Vu32.sf,Vv32.sf)",
    "V6_vmax_hf": "Vd32.hf=vmax(Vu32.hf,Vv32.hf)", "V6_vmin_hf": "Vd32.hf=vmin(Vu32.hf,Vv32.hf)",
    **{f"V6_vgt{t}{suffix}": f"{dest}vcmp.gt(Vu32.{t},Vv32.{t})" for t in ("sf", "hf")
       for suffix, dest in (("", "Qd4="), ("_and", "Qx4&="), ("_or", "Qx4|="), ("_xor", "Qx4^="))},
}

OLDER = {  # older rows whose bit 18 the patch sets to 0 (it was a don't care)
    "V6_vunpackob": "Vxx32.h|=vunpacko(Vu32.b)", "V6_vunpackoh": "Vxx32.w|=vunpacko(Vu32.h)",
    "V6_vhist": "vhist", "V6_vwhist256": "vwhist256", "V6_vwhist256_sat": "vwhist256:sat",
    "V6_vwhist128": "vwhist128", "V6_vwhist128m": "vwhist128(#u1)",
    **{f"V6_v{op}{w}{n}q": f"if ({'!' if n else ''}Qv4) Vx32.{w}{'+' if op == 'add' else '-'}=Vu32.{w}"
       for op in ("add", "sub") for w in ("b", "h", "w") for n in ("", "n")},
    "V6_vhistq": "vhist(Qv4)", "V6_vwhist256q": "vwhist256(Qv4)", "V6_vwhist256q_sat": "vwhist256(Qv4):sat",
    "V6_vwhist128q": "vwhist128(Qv4)", "V6_vwhist128qm": "vwhist128(Qv4,#u1)",
    "V6_vandvqv": "Vd32=vand(Qv4,Vu32)", "V6_vandvnqv": "Vd32=vand(!Qv4,Vu32)",
    "V6_vprefixqb": "Vd32.b=prefixsum(Qv4)", "V6_vprefixqh": "Vd32.h=prefixsum(Qv4)",
    "V6_vprefixqw": "Vd32.w=prefixsum(Qv4)", "V6_vassign": "Vd32=Vu32",
}

ICLASS = {"ICLASS_CJ": "0001"}


def llvm_mc_command(arg: str | None) -> list[str]:
    if arg:
        return shlex.split(arg)
    root = os.environ.get("HEXBUILD_KERNEL_DEV_ROOT")
    return ["chroot", root, "llvm-mc-21"] if root else ["llvm-mc-21"]


def patch_encodings(patch_dir: Path) -> dict[str, str]:
    encs = {}
    for patch in sorted(patch_dir.glob("*.patch")):
        for m in re.finditer(r'^\+DEF_ENC\((V6_\w+),\s*(?:(\w+)")?\s*([^"]*)"?\)', patch.read_text(), re.M):
            tag, iclass, bits = m.groups()
            pattern = ICLASS[iclass] + bits.replace(" ", "") if iclass else bits.strip('"').replace(" ", "")
            if len(pattern) != 32:
                raise SystemExit(f"{patch.name}: {tag}: pattern is not 32 bits: {pattern!r}")
            encs[tag] = pattern
    return encs


def assemble(syntax: str) -> tuple[str, dict[str, int]]:
    fields = {}
    for name, text, number, letter in OPERANDS:
        if name in syntax:
            syntax = syntax.replace(name, text)
            fields[letter] = number
    return syntax, fields


def encode_all(mc: list[str], lines: list[str]) -> list[int]:
    done = subprocess.run([*mc, "-triple=hexagon", "-mcpu=hexagonv73", f"-mattr={MATTR}", "-show-encoding"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True)
    if done.returncode or "error" in done.stderr:
        raise SystemExit(f"llvm-mc failed:\n{done.stderr}")
    words = [int("".join(reversed(m)), 16) for m in
             re.findall(r"encoding: \[0x(..),0x(..),0x(..),0x(..)\]", done.stdout)]
    if len(words) != len(lines):
        raise SystemExit(f"llvm-mc encoded {len(words)} of {len(lines)} instructions:\n{done.stdout}")
    return words


def compare(pattern: str, word: int, fields: dict[str, int]) -> list[str]:
    bits = format(word, "032b")
    problems, got = [], {}
    for pos, (p, b) in enumerate(zip(pattern, bits)):
        if p in "01" and p != b:
            problems.append(f"bit {31 - pos} is {b}, pattern has {p}")
        elif p not in "01-P":
            got[p] = got.get(p, "") + b
    for letter, value in got.items():
        if int(value, 2) != fields.get(letter):
            problems.append(f"field {letter} holds {int(value, 2)}, operand is {fields.get(letter)}")
    return problems


def check(patch_dir: Path, mc: list[str]) -> int:
    encs = patch_encodings(patch_dir)
    table = {**FLOAT, **OLDER}
    errors = [f"{tag}: in a patch but not in this table" for tag in encs if tag not in table]
    errors += [f"{tag}: no patch defines it" for tag in table if tag not in encs]
    tags = [t for t in table if t in encs]
    asm = [assemble(table[t]) for t in tags]
    for tag, (text, fields), word in zip(tags, asm, encode_all(mc, [a for a, _ in asm])):
        problems = compare(encs[tag], word, fields)
        print(f"{'BAD' if problems else 'ok '} {tag:22} {word:08x} {encs[tag]}  {text}")
        errors += [f"{tag}: {p}" for p in problems]
    print(f"{len(tags)} encodings checked ({len([t for t in tags if t in FLOAT])} new, "
          f"{len([t for t in tags if t in OLDER])} changed), {len(errors)} problems")
    for e in errors:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


def slots(mc: list[str]) -> int:
    loads = ["r20 = memw(r0+#0)", "r21 = memw(r1+#0)"]

    def copy(syntax: str, k: int) -> str:
        d = 10 + 2 * k
        for name, text in (("Vdd32", f"v{d + 1}:{d}"), ("Vxx32", f"v{d + 1}:{d}"), ("Vd32", f"v{d}"),
                           ("Vx32", f"v{d}"), ("Qd4", f"q{k}"), ("Qx4", f"q{k}")):
            syntax = syntax.replace(name, text)
        return assemble(syntax)[0]

    def fits(packet: list[str]) -> bool:
        done = subprocess.run([*mc, "-triple=hexagon", "-mcpu=hexagonv73", f"-mattr={MATTR}",
                               "-filetype=obj", "-o", "/dev/null"],
                              input="{ " + " ; ".join(packet) + " }\n", capture_output=True, text=True)
        return done.returncode == 0 and "error" not in done.stderr

    print(f"{'instruction':22} alone  +1 load  +2 loads")
    for tag, syntax in FLOAT.items():
        row = [max((k for k in range(1, 5 - extra) if fits([copy(syntax, i) for i in range(k)] + loads[:extra])),
                   default=0) for extra in (0, 1, 2)]
        print(f"{tag:22} {row[0]:5}  {row[1]:7}  {row[2]:8}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--patches", type=Path, default=Path(__file__).parent / "patches")
    ap.add_argument("--llvm-mc", help="llvm-mc command (default: llvm-mc-21, in HEXBUILD_KERNEL_DEV_ROOT if set)")
    ap.add_argument("--slots", action="store_true", help="measure instructions per packet instead")
    args = ap.parse_args()
    mc = llvm_mc_command(args.llvm_mc)
    return slots(mc) if args.slots else check(args.patches, mc)


if __name__ == "__main__":
    sys.exit(main())
