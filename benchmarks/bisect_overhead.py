#!/usr/bin/env python3
"""What `hexbuild bisect` adds to the work a bisect is made of.

Makes a git history of 8 commits from the fixture project (tests/fixtures/llama-mini, with the
stand-in llama-bench of tests/data/bisect/bench.c), one of which plants a slowdown in its ggml
kernel, and runs `python -m hexbuild bisect` over it as a user would: each step built in the
test toolchain image (the first step from scratch, the others incrementally), deployed to a qemu:
target, measured under qemu-aarch64. Prints the wall time of the whole bisect against the sum of
its steps' build, deploy and measure times (from bisect.json): the overhead ratio, and what the
rest is (interpreter start-up, the worktree, git, the history database, the report and chart).

Uses DOCKER_HOST if set, else starts the test engine of tests/infra/docker_engine.py (and stops
it at the end). Needs qemu-aarch64 and Debian's AArch64 sysroot (scripts/setup-test-env.sh).

    python benchmarks/bisect_overhead.py [--repeat 3] [--commits 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import bisect_repo as br  # noqa: E402
from tests.infra.docker_engine import cache_dir, engine_for_benchmark, ensure_toolchain_images  # noqa: E402
from tests.infra.tiny_model import write_tiny_gguf  # noqa: E402


def history(root: Path, commits: int, slow_at: int) -> tuple[Path, list[str]]:
    repo = br.new_repo(root)
    shas = [br.git(repo, "rev-parse", "HEAD")]
    for i in range(1, commits):
        shas.append(br.plant_slowdown(repo) if i == slow_at else br.touch_readme(repo, f"note {i}"))
    return repo, shas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--commits", type=int, default=8, help="revisions from good to bad, both included")
    args = ap.parse_args()

    import docker

    daemon, host = engine_for_benchmark()
    work = Path(tempfile.mkdtemp(prefix="hexbuild-bisect-bench-"))
    try:
        ensure_toolchain_images(docker.DockerClient(base_url=host, timeout=600), cache_dir())
        model = write_tiny_gguf(work / "tiny.gguf")
        walls, parts, overheads = [], [], []
        for r in range(args.repeat):
            root = work / f"run{r}"
            root.mkdir()
            slow_at = 1 + r % (args.commits - 1)  # a different first bad commit each time
            repo, shas = history(root, args.commits, slow_at)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HEXBUILD_", "DOCKER_"))}
            env.update(DOCKER_HOST=host, HEXBUILD_LINUX_SYSROOT="/usr/aarch64-linux-gnu",
                       XDG_CACHE_HOME=str(root / "xdg"), HEXBUILD_RUN_RESULTS_DIR=str(root / "results"))
            argv = [sys.executable, "-m", "hexbuild", "--json", "-q", "bisect", "--source", str(repo), "--good", shas[0],
                    "--bad", shas[-1], "-t", f"qemu:{root}/dev", "--model", str(model), "--models-dir",
                    str(root / "models"), "--os", "linux", "--htp", "v73", "--threshold", "0.6", "--reps", "12",
                    "--db", str(root / "bench.sqlite"), "--", "-n", "16"]
            t0 = time.perf_counter()
            cp = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(root))
            wall = time.perf_counter() - t0
            if cp.returncode != 0:
                raise SystemExit(f"hexbuild bisect failed ({cp.returncode}):\n{cp.stderr[-3000:]}")
            doc = json.loads(cp.stdout)
            if doc["first_bad"]["commit"] != shas[slow_at]:
                raise SystemExit(f"bisect named {doc['first_bad']['short']}, not the planted {shas[slow_at][:12]}")
            steps = doc["steps"]
            part = {k: sum(s.get(k) or 0.0 for s in steps) for k in ("build_s", "deploy_s", "measure_s")}
            inside = sum(part.values())
            walls.append(wall)
            parts.append(part)
            overheads.append(wall - inside)
            print(f"run {r + 1}: {doc['revisions']} revisions, first bad at {slow_at}, {doc['steps_taken']} steps "
                  f"(at most {doc['expected_steps']}): wall {wall:.1f}s = build {part['build_s']:.1f}s + deploy "
                  f"{part['deploy_s']:.1f}s + measure {part['measure_s']:.1f}s + {wall - inside:.1f}s around them")
        wall = statistics.median(walls)
        inside = statistics.median(sum(p.values()) for p in parts)
        print()
        print(f"median over {args.repeat} bisects of {args.commits} commits:")
        print(f"  wall time             {wall:7.2f} s")
        for k in ("build_s", "deploy_s", "measure_s"):
            print(f"  {k[:-2]:<21} {statistics.median(p[k] for p in parts):7.2f} s")
        print(f"  the steps' sum        {inside:7.2f} s")
        print(f"  overhead              {statistics.median(overheads):7.2f} s")
        print(f"  overhead ratio        {wall / inside:7.3f}  (wall / (build + deploy + measure))")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if daemon is not None:
            daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
