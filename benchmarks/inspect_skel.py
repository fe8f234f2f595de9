"""`hexbuild inspect --json` against llama.cpp's own scripts/snapdragon/ggml-hexagon-inspect.py on
the same ~5 MB Hexagon library, measured in one run.

The library: the planted and clean kernels of tests/inspect_kernels.py, 200 renamed copies
compiled once with clang-19 (v73, HVX 128B), the object copied 10 times with its symbols
prefixed (llvm-objcopy; the compiler helpers keep their names, so they stay PLT calls), linked by
ld.lld-19 into one shared object. Cached under ~/.cache/hexbuild-bench/inspect (the first
compile takes minutes on 2 cores).
The upstream script (0.3.36 tree, from the test cache) runs with wrappers named
hexagon-llvm-objdump/hexagon-llvm-addr2line around llvm-objdump-19 (with --mcpu/--mattr).
One inspect run gives what upstream needs three runs for (--spills, --promotions, --swdiv), so
both the one-mode and the three-mode ratios are printed.
Usage: python benchmarks/inspect_skel.py [--copies 10]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import inspect_kernels as ik  # noqa: E402

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hexbuild-bench" / "inspect"
TREE = Path(os.environ.get("HEXBUILD_TEST_CACHE", Path.home() / ".cache" / "hexbuild-tests")) \
    / "llama-cpp-python-0.3.36" / "vendor" / "llama.cpp"
UPSTREAM = TREE / "scripts" / "snapdragon" / "ggml-hexagon-inspect.py"
HELPERS = ("__hexagon_udivsi3", "__extendhfsf2")
CHUNK_COPIES = 200


def chunk_source() -> str:
    body = "".join(ik.KERNELS.values()).replace("#define NACC 40\n", "").replace("NACC", "40")
    out = [ik.HEADER]
    for i in range(CHUNK_COPIES):
        out.append(re.sub(r"\b(" + "|".join(ik.KERNELS) + r")\b", rf"\1_{i}", body))
    return "".join(out)


def build(copies: int) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    src = chunk_source()
    key = hashlib.sha256(src.encode()).hexdigest()[:16]
    obj = CACHE / f"chunk-{key}.o"
    if not obj.exists():
        print(f"compiling {CHUNK_COPIES} copies of the kernels (once; minutes) ...", file=sys.stderr)
        c = CACHE / f"chunk-{key}.c"
        c.write_text(src)
        tmp = obj.with_suffix(".part")
        subprocess.run(["clang-19", "--target=hexagon", "-mv73", "-mhvx", "-mhvx-length=128b", "-O2", "-fPIC", "-c",
                        str(c), "-o", str(tmp)], check=True)
        os.replace(tmp, obj)
    lib = CACHE / f"x{copies}-{key}" / "libggml-htp-v73.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for i in range(copies):
        part = lib.parent / f"part{i}.o"
        redefine = [a for h in HELPERS for a in ("--redefine-sym", f"p{i}_{h}={h}")]
        subprocess.run(["llvm-objcopy-19", f"--prefix-symbols=p{i}_", *redefine, str(obj), str(part)], check=True)
        parts.append(str(part))
    subprocess.run(["ld.lld-19", "-shared", "-o", str(lib), *parts], check=True)
    return lib


def wrappers(directory: Path) -> None:
    for name, tool, extra in (("hexagon-llvm-objdump", "llvm-objdump-19", "--mcpu=hexagonv73 --mattr=+hvxv73,+hvx-length128b"),
                              ("hexagon-llvm-addr2line", "llvm-addr2line-19", "")):
        p = directory / name
        p.write_text(f"#!/bin/sh\nexec {tool} {extra} \"$@\"\n")
        p.chmod(0o755)


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    t0 = time.perf_counter()
    cp = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    if cp.returncode != 0:
        sys.exit(f"failed ({cp.returncode}): {' '.join(argv)}")
    return dt, len(cp.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=10, help="copies of the 200-kernel object (10: ~5 MB)")
    args = ap.parse_args()
    if not UPSTREAM.is_file():
        sys.exit(f"no upstream script at {UPSTREAM}: run scripts/setup-test-env.sh")
    lib = build(args.copies)
    size = lib.stat().st_size
    with tempfile.TemporaryDirectory() as tmp:
        wrappers(Path(tmp))
        env = dict(os.environ, PATH=f"{tmp}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(REPO))
        ours, out_bytes = timed([sys.executable, "-m", "hexbuild", "inspect", str(lib), "--json"], env)
        modes = {}
        for mode in ("--spills", "--promotions", "--swdiv"):
            modes[mode], _ = timed([sys.executable, str(UPSTREAM), "--no-docker", "--no-color", "--lib", str(lib),
                                    mode, "--all"], env)
        objdump, _ = timed(["llvm-objdump-19", "-d", "--no-show-raw-insn", "--mcpu=hexagonv73",
                            "--mattr=+hvxv73,+hvx-length128b", str(lib)])
    three = sum(modes.values())
    print(f"library: {lib} ({size / 1e6:.1f} MB)")
    print(f"llvm-objdump -d alone:                    {objdump:6.2f} s")
    print(f"hexbuild inspect --json (all analyses):   {ours:6.2f} s  ({out_bytes / 1e6:.1f} MB of JSON)")
    for mode, t in modes.items():
        print(f"upstream {mode:<13}                  {t:6.2f} s")
    print(f"ratio upstream --spills / hexbuild:       {modes['--spills'] / ours:6.2f}x")
    print(f"ratio upstream 3 modes / hexbuild:        {three / ours:6.2f}x  (the same findings: spills, "
          f"promotions, divides)")


if __name__ == "__main__":
    main()
