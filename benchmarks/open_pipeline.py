#!/usr/bin/env python3
"""The open-toolchain pipeline, stage by stage, against the plain commands, in one run.

Real parts only: the test Docker engine (DOCKER_HOST, else the one tests/infra starts), the open
toolchain image, the cached llama.cpp 0.3.36 tree (copied twice into a scratch directory under
the test cache: one for hexbuild, one for the plain commands), the tiny GGUF.

Stages (each prints hexbuild's time, the plain time and the ratio hexbuild / plain):

- image, warm: `hexbuild toolchain open` when the image is there vs `docker image inspect TAG`;
- image, cold (--image-cold; untags the image first): `hexbuild toolchain open` importing the
  cached root filesystem vs `docker import TAR` (the debootstrap itself is the same commands);
- build, cold (--cold): empty compiler caches on both sides, new build directories;
- build, fresh: new build directories, the compiler cache warm (what a CI job with a cache sees);
- build, warm: both build directories up to date (REPEAT times each, medians), hexbuild as a
  user runs it (it finds the package up to date without a container) and with --force (the
  container runs the no-op build, then staging install, verify, manifest);
- deploy: `hexbuild deploy PKG --target qemu:DIR --model tiny.gguf` (first, then again with
  nothing changed) vs `cp -a` of the package and the model;
- run: `hexbuild run completion --target qemu:DIR -- -n 16 …` vs the plain `qemu-aarch64 -L
  /usr/aarch64-linux-gnu` line of the same program, model and arguments.

The plain build is one `docker run` (docker CLI) of the same preset and CMake arguments hexbuild
uses (from its `--dry-run --json`), building the same targets; it installs nothing, so hexbuild's
figure includes its staging install, verify and manifest on top.

    python benchmarks/open_pipeline.py [--repeat 3] [--cold] [--image-cold]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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
from tests.infra.real_build import SYSROOT, ensure_open_image_on, open_rootfs_cache, tree_copy  # noqa: E402
from tests.infra.tiny_model import write_tiny_gguf  # noqa: E402


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run(argv: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    cp = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env, stdin=subprocess.DEVNULL,
                        **kw)
    if cp.returncode != 0:
        raise SystemExit(f"failed ({cp.returncode}): {shlex.join(argv)}\n{cp.stderr[-3000:]}")
    return cp


def row(stage: str, hexbuild: float, plain: float, note: str = "") -> None:
    ratio = hexbuild / plain if plain > 0 else float("nan")
    print(f"{stage:34}{hexbuild:10.2f}{plain:10.2f}{ratio:9.2f}x  {note}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="also a cold build with empty compiler caches (long)")
    ap.add_argument("--image-cold", action="store_true", help="untag the open image and import it again")
    ap.add_argument("--no-fresh", action="store_true", help="skip the fresh-build-directory stage (LTO links: minutes)")
    args = ap.parse_args()

    import docker

    daemon, host = engine_for_benchmark()
    cache = cache_dir()
    work = Path(tempfile.mkdtemp(prefix="open-bench-", dir=cache))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_")}
    env["DOCKER_HOST"] = host
    env["HEXBUILD_LINUX_SYSROOT"] = str(SYSROOT)  # qemu: runs against the same sysroot as the plain line
    docker_cli = shutil.which("docker") or "docker"
    hexbuild = [sys.executable, "-m", "hexbuild"]
    try:
        client = docker.DockerClient(base_url=host, timeout=900)
        image = ensure_open_image_on(client, cache)
        print(f"engine {client.version()['Version']} at {host}; image {image}; {args.repeat} runs per warm stage")
        print(f"{'stage':34}{'hexbuild':>10}{'plain':>10}{'ratio':>10}")

        # -- image ----------------------------------------------------------------------------
        h = statistics.median(timed(lambda: run([*hexbuild, "toolchain", "open", "-q"], env))[0]
                              for _ in range(args.repeat))
        p = statistics.median(timed(lambda: run([docker_cli, "image", "inspect", image], env))[0]
                              for _ in range(args.repeat))
        row("image, warm (reuse)", h, p)
        if args.image_cold:
            tag = image.split(":", 1)[1]
            tar = open_rootfs_cache(cache) / f"open-arm64-linux-{tag}.tar"
            run([docker_cli, "rmi", image], env)
            h, _ = timed(lambda: run([*hexbuild, "toolchain", "open", "-q"], env))
            plain_tag = f"hexbuild-bench/open-plain:{tag}"
            p, _ = timed(lambda: run([docker_cli, "import", str(tar), plain_tag], env))
            run([docker_cli, "rmi", plain_tag], env)
            row("image, cold (import cached rootfs)", h, p)

        # -- build ----------------------------------------------------------------------------
        base = tree_copy(cache)
        trees = {}
        for side in ("hexbuild", "plain"):
            trees[side] = work / side / "llama.cpp"
            shutil.copytree(base, trees[side], symlinks=True,
                            ignore=shutil.ignore_patterns("build-open-linux", "pkg-open-linux"))
        ccache = cache / "open-ccache"
        plan = json.loads(run([*hexbuild, "build", "--os", "linux", "--toolchain", "open", "-s", str(trees["hexbuild"]),
                               "--dry-run", "--json"], env).stdout)
        configure = [a for a in plan["commands"][0] if "CMAKE_PROJECT_INCLUDE" not in a
                     and "HEXBUILD_BUILD_TARGETS" not in a]
        script = " && ".join([f"cp {shlex.quote(plan['presets']['docs_file'])} CMakeUserPresets.json",
                              shlex.join(configure),
                              shlex.join(["cmake", "--build", "build-open-linux", "--target", *plan["build_targets"]]),
                              "rm CMakeUserPresets.json"])

        def hexbuild_build(cache_dir_: Path, *extra: str) -> dict:
            return json.loads(run([*hexbuild, "build", "--os", "linux", "--toolchain", "open", "-s",
                                   str(trees["hexbuild"]), "--cache-volume", str(cache_dir_), "--json", "-q", *extra],
                                  env).stdout)

        def plain_build(cache_dir_: Path) -> None:
            cache_dir_.mkdir(parents=True, exist_ok=True)
            run([docker_cli, "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}",
                 "--workdir", "/workspace", "--volume", f"{trees['plain']}:/workspace", "--volume",
                 f"{cache_dir_}:/cache", "--env", "HOME=/tmp", "--env", "CCACHE_DIR=/cache",
                 "--env", f"CMAKE_BUILD_PARALLEL_LEVEL={os.cpu_count() or 1}", image, "sh", "-c", script], env)

        if args.cold:
            h, _ = timed(lambda: hexbuild_build(work / "ccache-hexbuild"))
            p, _ = timed(lambda: plain_build(work / "ccache-plain"))
            row("build, cold (empty ccache)", h, p)
        if not args.no_fresh:
            for side in trees:
                shutil.rmtree(trees[side] / "build-open-linux", ignore_errors=True)
            h, result = timed(lambda: hexbuild_build(ccache))
            p, _ = timed(lambda: plain_build(ccache))
            row("build, fresh dir (ccache warm)", h, p)
        else:  # start from the fixture's up-to-date build directory (copied with the tree), unless --cold made one
            for side in trees:
                if not (trees[side] / "build-open-linux").exists():
                    shutil.copytree(base / "build-open-linux", trees[side] / "build-open-linux", symlinks=True)
            result = hexbuild_build(ccache)
            plain_build(ccache)
        hs, hfs, ps, reported, said = [], [], [], [], set()
        for _ in range(args.repeat):
            t, r = timed(lambda: hexbuild_build(ccache))
            hs.append(t)
            said.add(r["status"])
            t, r = timed(lambda: hexbuild_build(ccache, "--force"))
            hfs.append(t)
            reported.append(r["duration_s"])
            ps.append(timed(lambda: plain_build(ccache))[0])
        row("build, warm (up to date)", statistics.median(hs), statistics.median(ps), f"(said: {', '.join(sorted(said))})")
        row("build, warm, --force", statistics.median(hfs), statistics.median(ps),
            f"(hexbuild reports {statistics.median(reported):.2f}s itself)")

        # -- deploy (qemu: target, the same code as local:) ------------------------------------------
        pkg = Path(result["package"])
        model = write_tiny_gguf(work / "tiny.gguf")
        board, plain_board = work / "qemu-board", work / "board-plain"
        deploy = [*hexbuild, "deploy", str(pkg), "--target", f"qemu:{board}", "--model", str(model),
                  "--models-dir", str(work / "models"), "-q"]

        def plain_deploy() -> None:
            run(["cp", "-a", str(pkg), str(plain_board)], env)
            shutil.copy2(model, plain_board / model.name)

        h, _ = timed(lambda: run(deploy, env))
        p, _ = timed(plain_deploy)
        row("deploy, first", h, p, "(plain: cp -a of the package and the model)")
        h = statistics.median(timed(lambda: run(deploy, env))[0] for _ in range(args.repeat))
        shutil.rmtree(plain_board)
        p = statistics.median(timed(lambda: (plain_deploy(), shutil.rmtree(plain_board)))[0]
                              for _ in range(args.repeat))
        row("deploy, nothing changed", h, p, "(plain: cp -a again)")

        # -- run --------------------------------------------------------------------------------
        qemu = shutil.which("qemu-aarch64") or "qemu-aarch64"
        gen = ["-n", "16", "-p", "hello", "-no-cnv", "--no-warmup", "-t", "2"]
        plain_run = [qemu, "-L", str(SYSROOT), "-E", f"LD_LIBRARY_PATH={pkg / 'lib'}",
                     str(pkg / "bin" / "llama-completion"), "-m", str(model), *gen]
        argv = [*hexbuild, "run", "completion", "--target", f"qemu:{board}", "--models-dir", str(work / "models"),
                "--model", model.name, "--results-dir", str(work / "results"), "-q", "--", *gen]
        hs, ps = [], []
        for _ in range(args.repeat):
            ps.append(timed(lambda: run(plain_run, env))[0])
            hs.append(timed(lambda: run(argv, env))[0])
        row("run completion -n 16 (qemu)", statistics.median(hs), statistics.median(ps),
            "(hexbuild: render, run, save the log, parse it)")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if daemon is not None:
            daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
