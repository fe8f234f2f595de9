#!/usr/bin/env python3
"""What hexbuild adds to a Snapdragon build, on an up-to-date tree.

Builds the fixture project (tests/fixtures/llama-mini) once in the test toolchain image, then
times, alternately and REPEAT times each:

- plain: one `docker run` (through the Docker SDK, client already connected) of the revision's
  own commands: cp CMakeUserPresets.json, cmake --preset, cmake --build, cmake --install;
- plain-cli: the same `docker run` line with the docker CLI, when it is installed;
- hexbuild: `python -m hexbuild build` as a user runs it on an unchanged checkout: interpreter
  start-up, engine probe, image check, and the inputs compared with the last build's record, which
  finds the package up to date without a container (hexbuild/build/uptodate.py);
- hexbuild --force: the same with the container run anyway (the container, moving the package
  into place, verify, manifest): what any build that has something to do adds around it.

Prints the medians, hexbuild's overhead in seconds and the ratio hexbuild / plain, and where
hexbuild's time goes (start-up alone, the build it reports). Uses DOCKER_HOST if set, else
starts the test engine of tests/infra/docker_engine.py (and stops it at the end).

    python benchmarks/build_overhead.py [--repeat 5]
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

from tests.infra.docker_engine import cache_dir, engine_for_benchmark, ensure_toolchain_images  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "llama-mini"
PLAIN_SCRIPT = ("cp docs/backend/snapdragon/CMakeUserPresets.json . && "
                "cmake --preset arm64-android-snapdragon-release -B build-snapdragon && "
                "cmake --build build-snapdragon && "
                "cmake --install build-snapdragon --prefix pkg-plain/llama.cpp")


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import docker

    daemon, host = engine_for_benchmark()
    work = Path(tempfile.mkdtemp(prefix="hexbuild-bench-"))
    try:
        client = docker.DockerClient(base_url=host, timeout=600)
        image = ensure_toolchain_images(client, cache_dir())["android"]
        src = work / "llama-mini"
        shutil.copytree(FIXTURE, src)
        user = f"{os.getuid()}:{os.getgid()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_")}
        env["DOCKER_HOST"] = host
        hexbuild_argv = [sys.executable, "-m", "hexbuild", "build", "-s", str(src), "--json", "-q"]

        def run_hexbuild(*extra: str) -> dict:
            cp = subprocess.run([*hexbuild_argv, *extra], capture_output=True, text=True, env=env, cwd=str(work))
            if cp.returncode != 0:
                raise SystemExit(f"hexbuild build failed ({cp.returncode}):\n{cp.stderr}")
            return json.loads(cp.stdout)

        def run_plain_sdk() -> None:
            client.containers.run(image, ["sh", "-c", PLAIN_SCRIPT], remove=True, user=user,
                                  working_dir="/workspace", network_mode="none", platform="linux/amd64",
                                  environment={"HOME": "/tmp"},
                                  volumes={str(src): {"bind": "/workspace", "mode": "rw"}})
            (src / "CMakeUserPresets.json").unlink(missing_ok=True)

        docker_cli = shutil.which("docker")
        cli_argv = [docker_cli or "docker", "run", "--rm", "--platform", "linux/amd64", "--network", "none",
                    "--user", user, "--workdir", "/workspace", "--env", "HOME=/tmp", "--volume",
                    f"{src}:/workspace", image, "sh", "-c", PLAIN_SCRIPT]

        def run_plain_cli() -> None:
            subprocess.run(cli_argv, check=True, capture_output=True, env=env)
            (src / "CMakeUserPresets.json").unlink(missing_ok=True)

        print(f"engine {client.version()['Version']} at {host}; image {image}; {args.repeat} runs each")
        first = timed(run_hexbuild)
        run_plain_sdk()  # both build directories up to date before measuring
        print(f"first (cold) hexbuild build: {first:.2f}s")

        times: dict[str, list[float]] = {"plain": [], "plain-cli": [], "hexbuild": [], "hexbuild --force": []}
        reported: list[float] = []
        statuses: set[str] = set()
        for _ in range(args.repeat):
            times["plain"].append(timed(run_plain_sdk))
            if docker_cli:
                times["plain-cli"].append(timed(run_plain_cli))
            t = time.perf_counter()
            statuses.add(run_hexbuild()["status"])
            times["hexbuild"].append(time.perf_counter() - t)
            t = time.perf_counter()
            result = run_hexbuild("--force")
            times["hexbuild --force"].append(time.perf_counter() - t)
            reported.append(result["duration_s"])
        startup = statistics.median(timed(lambda: subprocess.run([sys.executable, "-m", "hexbuild", "--version"],
                                                                 capture_output=True, env=env))
                                    for _ in range(3))

        med = {k: statistics.median(v) for k, v in times.items() if v}
        print()
        print(f"{'':24}{'median':>9}{'min':>9}{'max':>9}")
        for k, v in times.items():
            if v:
                print(f"{k:24}{med[k]:9.2f}{min(v):9.2f}{max(v):9.2f}")
        print()
        print(f"hexbuild start-up (--version):        {startup:.2f}s")
        print(f"hexbuild --force as it reports itself: {statistics.median(reported):.2f}s "
              "(engine probe, image check, container, publish, verify, manifest)")
        print(f"up-to-date runs said: {', '.join(sorted(statuses))}")
        for name in ("hexbuild", "hexbuild --force"):
            for plain, label in (("plain", "SDK"), ("plain-cli", "CLI")):
                if plain in med:
                    print(f"{name + ' vs plain docker run (' + label + '):':42}{med[name] - med[plain]:+.2f}s, "
                          f"ratio {med[name] / med[plain]:.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if daemon is not None:
            daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
