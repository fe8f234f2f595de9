"""`hexbuild package` and `hexbuild verify` against the plain way, measured in one run.

The package: tests/elf_factory.make_package (genuine AArch64/Hexagon ELF files, 67 programs as
in a real install) plus large real shared objects from this machine as stand-ins for llama.cpp's big binaries (binary code
compresses like binary code). Plain ways:
  package: GNU tar with the reproducibility flags piped into `gzip -6 -n`, then `sha256sum` of
           every file for SHA256SUMS (what a careful release script does);
  verify:  `file` on every file plus `readelf -d -l` on every ELF (what people run by hand).
Usage: python benchmarks/package.py [--mb 120]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hexbuild.artifacts import verify_package, write_package  # noqa: E402
from tests import elf_factory as ef  # noqa: E402


def filler(total_mb: int) -> list[Path]:
    """The largest shared objects on this machine, up to ``total_mb``."""
    found = sorted({Path(p).resolve() for p in glob.glob("/usr/lib/x86_64-linux-gnu/*.so*")},
                   key=lambda p: -p.stat().st_size)
    picked, size = [], 0
    for p in found:
        if size >= total_mb << 20:
            break
        picked.append(p)
        size += p.stat().st_size
    return picked


def timed(fn, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=120, help="MiB of real binaries to add")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pkg = ef.make_package(tmp, os="android", htp=["v68", "v69", "v73"])
        for i, src in enumerate(filler(args.mb)):
            shutil.copyfile(src, pkg / "bin" / f"big-{i}")
        for i in range(64):  # a real install has ~67 programs in bin/
            shutil.copy(pkg / "bin" / "llama-cli", pkg / "bin" / f"llama-tool-{i}")
        files = [p for p in pkg.rglob("*") if p.is_file() and not p.is_symlink()]
        total = sum(p.stat().st_size for p in files)
        out = Path(tmp) / "out"
        out.mkdir()

        def plain_package() -> None:
            with open(out / "plain.tar.gz", "wb") as f:
                tar = subprocess.Popen(["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner",
                                        "-C", str(pkg.parent), "-cf", "-", pkg.name], stdout=subprocess.PIPE)
                subprocess.run(["gzip", "-6", "-n"], stdin=tar.stdout, stdout=f, check=True)
                tar.wait()
            subprocess.run(["sha256sum", *map(str, files)], stdout=subprocess.DEVNULL, check=True)

        def hexbuild_package() -> None:
            write_package(pkg, out / "hexbuild.tar.gz")

        def plain_verify() -> None:
            everything = [str(p) for p in sorted((pkg / "lib").iterdir()) + sorted((pkg / "bin").iterdir()) if p.is_file()]
            subprocess.run(["file", *everything], stdout=subprocess.DEVNULL, check=True)
            for p in everything:
                with open(p, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        subprocess.run(["readelf", "-d", "-l", p], stdout=subprocess.DEVNULL, check=False)

        def hexbuild_verify() -> None:
            verify_package(pkg, os="android")

        rows = [("package (tar|gzip -6 -n + sha256sum)", timed(plain_package)),
                ("package (hexbuild write_package)", timed(hexbuild_package)),
                ("verify (file + readelf per ELF)", timed(plain_verify)),
                ("verify (hexbuild verify_package)", timed(hexbuild_verify))]
        plain_size = (out / "plain.tar.gz").stat().st_size
        ours_size = (out / "hexbuild.tar.gz").stat().st_size
        print(f"package: {len(files)} files, {total / 2**20:.0f} MiB; cores: {os.cpu_count()}; "
              f"load average: {os.getloadavg()[0]:.2f}")
        print(f"{'task':<40} {'best of 3 s':>11}")
        for name, t in rows:
            print(f"{name:<40} {t:11.3f}")
        print(f"package speed-up vs plain: {rows[0][1] / rows[1][1]:.2f}x; "
              f"size {ours_size / plain_size:.4f}x of plain gzip ({ours_size} vs {plain_size} bytes)")
        print(f"verify speed-up vs plain: {rows[2][1] / rows[3][1]:.2f}x")


if __name__ == "__main__":
    main()
