#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Does qemu-hexagon decode every packet of some compiled Hexagon objects?

Takes the packets of the .text of each object (llvm-objdump), drops duplicates and the packets
that change the flow (jumps, calls, loops, traps) or use user DMA (not part of these patches),
and lays the rest out in a test program: page-sized chunks, each starting with a load from
address 0. QEMU translates a whole translation block before it runs it, so jumping to a chunk
makes it decode and translate every packet of the chunk and then die of SIGSEGV in the first one;
a packet it cannot decode aborts it instead (decode.c: "code should not be reached"), and one it
cannot give slots to ends the block early (an invalid-packet exception), which ``-d in_asm`` shows.
Failing packets are then tried one a chunk to name them.

    decode-check.py [--cpu v73] [--mattr ...] OBJ... (or directories of .o files)

Runs clang-21, ld.lld-21, llvm-objdump-21 and /src/build/qemu-hexagon in the chroot named by
HEXBUILD_KERNEL_DEV_ROOT. Prints a summary and the failing packets; exit status 1 if any.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

MATTR = "+hvxv75,+hvx-length128b,+hvx-qfloat,+hvx-ieee-fp"
COF = re.compile(r"\b(jump|jumpr|call|callr|loop[01]|dealloc_return|trap[01]|rte|brkpt|isync|syncht)\b|endloop")
DMA = re.compile(r"\bdm(start|link|poll|wait|resume|pause|cfgrd|cfgwr|syncht|tlbsynch)\b")
LINE = re.compile(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2}\s){4}\s*([0-9a-f]{8})\s(.*)$")
CHUNK_BYTES = 3072                 # of packets, per 4 KiB page
FAULT = "{ r0 = memw(##0) }"


def root() -> Path:
    r = os.environ.get("HEXBUILD_KERNEL_DEV_ROOT")
    if not r:
        raise SystemExit("set HEXBUILD_KERNEL_DEV_ROOT to the development root filesystem")
    return Path(r)


def chroot(argv, **kw):
    return subprocess.run(["chroot", str(root()), *argv], capture_output=True, text=True, **kw)


def packets(obj: Path, mattr: str, work: Path):
    """(words, text) of every packet of obj's code"""
    copy = work / "obj.o"
    copy.write_bytes(obj.read_bytes())
    inside = "/" + str(copy.relative_to(root()))
    out = chroot(["llvm-objdump-21", "-d", "--mcpu=hexagonv75", f"--mattr={mattr}", inside]).stdout
    words, text = [], []
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        words.append(int(m.group(2), 16))
        text.append(m.group(3))
        if m.group(3).rstrip().endswith("}"):
            yield tuple(words), " ".join(text)
            words, text = [], []


def build(chunks: list[list[tuple]], work: Path) -> Path:
    lines = ["\t.text", "\t.globl _start", "_start:",
             "\t{ r6 = #63; r0 = #0; r1 = ##index; r2 = #4 }", "\t{ trap0(#1) }",
             "\t{ r1 = memw(##index); r2 = ##chunks }", "\t{ r1 = asl(r1, #12) }",
             "\t{ r2 = add(r2, r1) }", "\t{ jumpr r2 }", "\t.p2align 12", "chunks:"]
    for chunk in chunks:
        lines += ["\t.p2align 12", f"\t{FAULT}"]
        lines += [f"\t.word {w:#010x}" for words, _ in chunk for w in words]
        lines += ["\t{ trap0(#0) }"]
    lines += ["\t.p2align 12", "\t.data", "index:", "\t.word 0"]
    (work / "d.S").write_text("\n".join(lines) + "\n")
    inside = "/" + str(work.relative_to(root()))
    for argv in (["clang-21", "--target=hexagon-unknown-linux-musl", "-mv75", "-c", f"{inside}/d.S", "-o", f"{inside}/d.o"],
                 ["ld.lld-21", "-static", "-e", "_start", f"{inside}/d.o", "-o", f"{inside}/d"]):
        done = chroot(argv)
        if done.returncode:
            raise SystemExit(f"{argv[0]}: {done.stderr}")
    return work / "d"


def run_chunk(elf: Path, index: int, cpu: str, work: Path) -> tuple[int, str]:
    inside = "/" + str(elf.relative_to(root()))
    log = work / "log"
    log.unlink(missing_ok=True)
    done = subprocess.run(["chroot", str(root()), "/src/build/qemu-hexagon", "-cpu", cpu, "-d", "in_asm",
                           "-D", "/" + str(log.relative_to(root())), inside],
                          input=index.to_bytes(4, "little"), capture_output=True, timeout=60)
    return done.returncode, log.read_text() if log.exists() else ""


def translated_all(log: str) -> bool:
    return "trap0(#0x0)" in log


def chunked(items, limit):
    chunk, size = [], 0
    for item in items:
        if chunk and size + 4 * len(item[0]) > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += 4 * len(item[0])
    if chunk:
        yield chunk


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("objects", nargs="+", type=Path)
    ap.add_argument("--cpu", default="v73")
    ap.add_argument("--mattr", default=MATTR)
    args = ap.parse_args()
    objs = [o for p in args.objects for o in (sorted(p.glob("*.o")) if p.is_dir() else [p])]
    seen, kinds = {}, Counter()
    work = Path(tempfile.mkdtemp(prefix="decode-check-", dir=root() / "tmp"))
    for obj in objs:
        for words, text in packets(obj, args.mattr, work):
            kinds["packets"] += 1
            if COF.search(text):
                kinds["control flow (skipped)"] += 1
            elif DMA.search(text):
                kinds["user DMA (skipped)"] += 1
            else:
                seen.setdefault(words, text)
    kinds["distinct packets decoded"] = len(seen)
    chunks = list(chunked(list(seen.items()), CHUNK_BYTES))
    elf = build(chunks, work)
    suspects = []
    for i, chunk in enumerate(chunks):
        rc, log = run_chunk(elf, i, args.cpu, work)
        if rc not in (139, -11) or not translated_all(log):
            suspects += chunk
    failures = []
    if suspects:
        single = [[s] for s in suspects]
        elf = build(single, work)
        for i, (item,) in enumerate(single):
            rc, log = run_chunk(elf, i, args.cpu, work)
            if rc not in (139, -11) or not translated_all(log):
                failures.append((item, "aborts" if rc not in (139, -11) else "invalid packet"))
    for what, n in kinds.items():
        print(f"{n:8}  {what}")
    print(f"{len(failures):8}  fail to decode ({len(objs)} objects, -cpu {args.cpu})")
    for (words, text), why in failures:
        print(f"  {why}: {' '.join(f'{w:08x}' for w in words)}  {text.strip()}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
