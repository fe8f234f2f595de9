#!/usr/bin/env python3
"""`hexbuild build` of a real tree's Hexagon backend against the same CMake commands run by hand.

On the toolchain double (docker/Dockerfile.toolchain-fixture, tagged as the images the tree pins),
a copy of the real 0.3.28 tree is built once by `hexbuild build --os linux --htp v73 --build-target
llama-completion`. Its log holds the exact commands hexbuild ran in the container (`+ cmake ...`);
the plain way is those commands in one `docker run` of the same image, as a user who copied them
would type them, in a build directory of its own. Then, alternately and REPEAT times each, on an
unchanged checkout (both build directories up to date):

- plain: the `docker run` (configure, build, install);
- hexbuild: `hexbuild build` as a user runs it (up to date: no container);
- hexbuild --force: the container run anyway, plus verify and the manifest.

With --cold, each side also builds once from an empty build directory (ccache warm, shared):
the configure, both skels with LLVM 21 and the host side. Prints medians and the ratios
hexbuild / plain. Uses DOCKER_HOST if set, else starts the test engine.

    python benchmarks/real_backend_build.py [--repeat 3] [--cold]
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
from tests.infra.real_hexagon import ensure_double  # noqa: E402

VERSION = "0.3.28"
HEXBUILD_DIRS = ("build-snapdragon-linux", "pkg-snapdragon-linux/llama.cpp")
PLAIN_DIRS = ("build-plain", "pkg-plain/llama.cpp")


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def plain_script(log: str) -> str:
    """hexbuild's container commands, pointed at the plain run's own build and install dirs."""
    cmds = [line[2:] for line in log.splitlines() if line.startswith("+ cmake ")]
    if not cmds:
        raise SystemExit("no '+ cmake' lines in hexbuild's build log")
    out = ["cp docs/backend/snapdragon/CMakeUserPresets.json .",
           f"mkdir -p {PLAIN_DIRS[0]}", f"cp {HEXBUILD_DIRS[0]}/hexbuild-*.cmake {PLAIN_DIRS[0]}/"]
    for c in cmds:
        c = c.replace(HEXBUILD_DIRS[0], PLAIN_DIRS[0]).replace(HEXBUILD_DIRS[1], PLAIN_DIRS[1])
        out.append(" ".join(shlex.quote(a) for a in shlex.split(c)))
    return " && ".join(out) + " ; rc=$? ; rm -f CMakeUserPresets.json ; exit $rc"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="also one build from an empty build directory each")
    args = ap.parse_args()

    import docker

    daemon, host = engine_for_benchmark()
    cache = cache_dir()
    work = Path(tempfile.mkdtemp(prefix="hexbuild-bench-real-"))
    try:
        client = docker.DockerClient(base_url=host, timeout=900)
        src = work / "llama.cpp"
        shutil.copytree(cache / f"llama-cpp-python-{VERSION}" / "vendor" / "llama.cpp", src, symlinks=True)
        ensure_double(client, src, cache)
        image = json.loads(subprocess.run([sys.executable, "-m", "hexbuild", "source", "info", "--json", "--source",
                                           str(src)], capture_output=True, text=True, check=True).stdout)["images"]["linux"]
        ccache = cache / "open-ccache"  # the test suite's: shared by the open build and the double's
        ccache.mkdir(parents=True, exist_ok=True)
        user = f"{os.getuid()}:{os.getgid()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_")}
        env["DOCKER_HOST"] = host
        argv = [sys.executable, "-m", "hexbuild", "build", "-s", str(src), "--os", "linux", "--htp", "v73",
                "--build-target", "llama-completion", "--cache-volume", str(ccache), "--json", "-q"]

        def run_hexbuild(*extra: str) -> dict:
            cp = subprocess.run([*argv, *extra], capture_output=True, text=True, env=env)
            if cp.returncode != 0:
                raise SystemExit(f"hexbuild build failed ({cp.returncode}):\n{cp.stderr[-3000:]}")
            return json.loads(cp.stdout)

        print(f"engine {client.version()['Version']} at {host}; image {image} (the toolchain double); "
              f"{VERSION} tree, HTP v73, llama-completion; {args.repeat} runs each")
        first_s = timed(lambda: run_hexbuild())
        log = (src / HEXBUILD_DIRS[0] / "hexbuild-build.log").read_text(errors="replace")
        script = plain_script(log)

        def run_plain() -> None:
            client.containers.run(image, ["sh", "-c", script], remove=True, user=user, working_dir="/workspace",
                                  network_mode="none", platform="linux/amd64",
                                  environment={"HOME": "/tmp", "CCACHE_DIR": "/ccache"},
                                  volumes={str(src): {"bind": "/workspace", "mode": "rw"},
                                           str(ccache): {"bind": "/ccache", "mode": "rw"}})

        plain_first = timed(run_plain)
        print(f"first builds: hexbuild {first_s:.1f}s, plain {plain_first:.1f}s (ccache: the test cache's)")
        times: dict[str, list[float]] = {"plain": [], "hexbuild": [], "hexbuild --force": []}
        for _ in range(args.repeat):
            times["plain"].append(timed(run_plain))
            times["hexbuild"].append(timed(lambda: run_hexbuild()))
            times["hexbuild --force"].append(timed(lambda: run_hexbuild("--force")))
        if args.cold:
            for d in (HEXBUILD_DIRS[0], PLAIN_DIRS[0]):
                shutil.rmtree(src / d, ignore_errors=True)
            times["hexbuild cold"] = [timed(lambda: run_hexbuild())]
            times["plain cold"] = [timed(run_plain)]
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"\n{'':20}{'median':>9}{'min':>9}{'max':>9}")
        for k, v in times.items():
            print(f"{k:20}{med[k]:9.2f}{min(v):9.2f}{max(v):9.2f}")
        print()
        for name in ("hexbuild", "hexbuild --force"):
            print(f"{name + ' vs plain (up to date):':34}{med[name] - med['plain']:+.2f}s, "
                  f"ratio {med[name] / med['plain']:.2f}x")
        if args.cold:
            print(f"{'hexbuild vs plain (cold build dir):':34}{med['hexbuild cold'] - med['plain cold']:+.2f}s, "
                  f"ratio {med['hexbuild cold'] / med['plain cold']:.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if daemon is not None:
            daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
