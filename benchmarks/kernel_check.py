#!/usr/bin/env python3
"""`hexbuild test kernels`, the inner loop of kernel work, timed on the real 0.3.28 tree.

- edit -> verdict: an edit of matmul-ops.c, then the verdict on the Q4_0 matmul for v73
  (`--ops MUL_MAT --types q4_0`): one unit compiles again, the harness links, the cases run.
  Against the plain way, the same work by hand: the container commands hexbuild runs (its ninja
  build of the harness and the emulator over the same cases file) in one `docker run` of the same
  image, after the same edit of its own copy; hexbuild adds making the cases and judging them.
- the whole default coverage of one version, warm (nothing to compile);
- a cold harness build (its work directory removed) with the whole default coverage;
- with --cold-emulator, the emulator's own build, cold: the kernel check's image made from nothing
  (debootstrap sid, LLVM 21, QEMU compiled from Debian's source with hexbuild's patches; as root).

Alternates hexbuild and the plain way REPEAT times; prints medians and ratios. Uses DOCKER_HOST
if set, else starts the test engine (the image comes from the test cache's root filesystem).

    python benchmarks/kernel_check.py [--repeat 5] [--cold-emulator]
"""

from __future__ import annotations

import argparse
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

from tests.infra.docker_engine import cache_dir, engine_for_benchmark  # noqa: E402
from tests.infra.kernel_image import kernel_cache  # noqa: E402
from tests.infra.trees import llama_tree  # noqa: E402

MATMUL = "ggml/src/ggml-hexagon/htp/matmul-ops.c"


def hexbuild(*args: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    cp = subprocess.run([sys.executable, "-m", "hexbuild", *args], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if cp.returncode != 0:
        raise SystemExit(f"hexbuild {' '.join(args)} failed ({cp.returncode}):\n{cp.stderr[-2000:]}")
    return dt


def edit(tree: Path, n: int) -> None:
    """A real edit: the file's content changes (a comment at its end), as a developer's save does."""
    path = tree / MATMUL
    text = path.read_text().split("\n/* bench edit", 1)[0]
    path.unlink()  # break the hard link to the cached tree
    path.write_text(text + f"\n/* bench edit {n} */\n")


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    return dst


def plain_runner(tree: Path, work: Path, image: str, env: dict[str, str]):
    """The same container commands by hand, on a copy of hexbuild's work directory for this tree."""
    from hexbuild.kernels import build, run as krun
    from hexbuild.kernels.tree import read_tree

    kt = read_tree(tree)
    ops = ["MUL_MAT"]
    build.prepare(kt, work, ["v73"])
    cases = krun.make_cases(kt, ops, {"MUL_MAT": ["q4_0"]}, krun.SEED, 4)
    from hexbuild.kernels.cases import write_cases

    write_cases(work / "cases.bin", cases)
    script = krun.container_script(kt, ["v73"], f"{build.WORK}/cases.bin", ops)
    argv = ["docker", "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}",
            "-v", f"{tree}:{build.SRC}:ro", "-v", f"{work}:{build.WORK}", "-w", build.WORK, image, "sh", "-c", script]

    def once() -> float:
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        return time.perf_counter() - t

    return once


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold-emulator", action="store_true", help="also time the image's build from nothing (root)")
    args = ap.parse_args()
    daemon, host = engine_for_benchmark()
    tmp = Path(tempfile.mkdtemp(prefix="hexbuild-bench-kernels-"))
    try:
        env = dict(os.environ, DOCKER_HOST=host, XDG_CACHE_HOME=str(tmp / "xdg"), PYTHONPATH=str(REPO))
        (tmp / "xdg" / "hexbuild").mkdir(parents=True)
        (tmp / "xdg" / "hexbuild" / "kernel-check").symlink_to(kernel_cache(cache_dir()))
        import docker

        from hexbuild.kernels.image import ensure_kernel_image

        client = docker.DockerClient(base_url=host, timeout=900)
        image = ensure_kernel_image(client, method="rootfs", cache=kernel_cache(cache_dir())).image
        source = llama_tree("0.3.28")
        mine, theirs = copy_tree(source, tmp / "tree-hexbuild"), copy_tree(source, tmp / "tree-plain")
        out = tmp / "out"
        q4 = ["test", "kernels", "--source", str(mine), "--htp", "v73", "--ops", "MUL_MAT", "--types", "q4_0",
              "--out", str(out)]
        cold = hexbuild("test", "kernels", "--source", str(mine), "--htp", "v73", "--out", str(out), env=env)
        warm_all = [hexbuild("test", "kernels", "--source", str(mine), "--htp", "v73", "--out", str(out), env=env)
                    for _ in range(2)]
        hexbuild(*q4, env=env)
        plain = plain_runner(theirs, tmp / "plain-work", image, env)
        plain()  # its first, cold build
        h, p = [], []
        for i in range(args.repeat):
            edit(mine, i)
            h.append(hexbuild(*q4, env=env))
            edit(theirs, i)
            p.append(plain())
        med_h, med_p = statistics.median(h), statistics.median(p)
        print(f"edit of matmul-ops.c -> verdict on the Q4_0 matmul, v73 (medians of {args.repeat}):")
        print(f"  hexbuild test kernels   {med_h:6.2f} s   (min {min(h):.2f}, max {max(h):.2f})")
        print(f"  same commands by hand   {med_p:6.2f} s   (min {min(p):.2f}, max {max(p):.2f})   "
              f"ratio {med_h / med_p:.2f}x")
        print(f"whole default coverage, v73: cold harness build {cold:.1f} s, warm {statistics.median(warm_all):.1f} s")
        if args.cold_emulator:
            from hexbuild.kernels.image import build_rootfs

            t = time.perf_counter()
            build_rootfs(tmp / "emulator-cold")
            print(f"the emulator's own build, cold (debootstrap sid + LLVM 21 + QEMU with the patches): "
                  f"{time.perf_counter() - t:.0f} s")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if daemon:
            daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
