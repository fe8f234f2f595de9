"""`hexbuild results profile` against the llama.cpp tree's own
scripts/snapdragon/ggml-hexagon-profile.py on the same log, measured in one run.

The log: a million profile-op lines (0.3.36's pipe format with OPBATCH lines and PMU counters,
made from that tree's own format strings by tests/infra/hexlog.py) over three sessions. Both read
the file from disk as a command would: `hexbuild results profile LOG --json` and
`python3 ggml-hexagon-profile.py LOG`, each a fresh process, each once.
Usage: python benchmarks/results_profile.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.infra.hexlog import HexFormats, profile_log  # noqa: E402
from tests.infra.trees import CACHE  # noqa: E402


def timed(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if p.returncode:
        raise SystemExit(f"{argv[:3]} exited {p.returncode}")
    return time.perf_counter() - start, len(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    tree = CACHE / "llama-cpp-python-0.3.36" / "vendor" / "llama.cpp"
    script = tree / "scripts/snapdragon/ggml-hexagon-profile.py"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "profile.log"
        t0 = time.perf_counter()
        log.write_text(profile_log(HexFormats(tree), style="pipe", lines=args.lines,
                                   devices=("HTP0", "HTP1", "HTP0:1")))
        print(f"log: {args.lines} profile-op lines, {log.stat().st_size / 2**20:.0f} MiB "
              f"(made in {time.perf_counter() - t0:.1f} s)")
        hexbuild = [sys.executable, "-m", "hexbuild.cli.main", "--json", "results", "profile", str(log)]
        upstream = [sys.executable, str(script), str(log)]
        t_hb, _ = timed(hexbuild)
        t_up, _ = timed(upstream)
    print(f"hexbuild results profile : {t_hb:6.2f} s")
    print(f"ggml-hexagon-profile.py  : {t_up:6.2f} s")
    print(f"ratio (upstream / hexbuild): {t_up / t_hb:.2f}x")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
