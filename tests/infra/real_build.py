"""Real llama.cpp programs for the tests: the open toolchain image and a real AArch64 Linux build.

Session fixtures, each made once per test run (and, through the caches, once per machine):

- ``open_image``: the tag of ``hexbuild toolchain open``'s image on the test Docker engine, made
  by hexbuild's own code (``ensure_open_image``). Without a network on the engine that is a
  debootstrap root filesystem built here; its tarball is cached in the test cache directory
  (``open-toolchain/``), so a new engine imports it in seconds. scripts/setup-test-env.sh
  builds that tarball ahead of the tests (``python -m tests.infra.real_build --rootfs``).
- ``real_linux_package``: the package directory (``manifest.json``, ``bin/``, ``lib/``) of the
  cached 0.3.28 tree built with ``hexbuild build --os linux --toolchain open`` and the default
  open target set (llama-completion, llama-cli, llama-bench, llama-perplexity, test-backend-ops,
  llama-server). The build runs in a copy of the tree under the test cache
  (``open-build/llama.cpp-0.3.28``; the cached tree stays pristine) whose build directory is
  kept, with ccache in ``open-ccache/`` beside it: a cold build takes minutes, a warm rerun
  seconds (ninja finds nothing to do; a lost build directory recompiles from ccache). The 0.3.28
  tree, because the toolchain double's real Hexagon build (tests/infra/real_hexagon.py) builds the
  same tree with the same compiler in the same ccache: the two share their objects.

The programs run under ``qemu-aarch64 -L /usr/aarch64-linux-gnu`` with ``LD_LIBRARY_PATH`` at
the package's ``lib/`` (see ``run_aarch64``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.docker_engine import InfraError, cache_dir

TREE_VERSION = "0.3.28"
SYSROOT = Path("/usr/aarch64-linux-gnu")
BUILD_TIMEOUT = 3600  # a cold build is minutes on two cores; this only stops a hung one


def open_rootfs_cache(cache: Path) -> Path:
    return cache / "open-toolchain"


def ensure_open_image_on(client, cache: Path) -> str:
    """The open toolchain image on the engine ``client`` talks to, made by hexbuild's own code."""
    from hexbuild.errors import HexbuildError
    from hexbuild.toolchain.open_image import ensure_open_image

    with _lock(cache / "open-toolchain.lock"):
        try:
            return ensure_open_image(client, method="rootfs", cache=open_rootfs_cache(cache)).image
        except HexbuildError as e:
            raise InfraError(f"making the open toolchain image failed: {e.message}"
                             + (f" ({e.hint})" if e.hint else "")) from None


def tree_copy(cache: Path, version: str = TREE_VERSION, *, into: str = "open-build") -> Path:
    """A copy of the cached llama.cpp tree to build in, under ``cache/into`` (made once; the
    build directory inside it is kept between runs)."""
    src = cache / f"llama-cpp-python-{version}" / "vendor" / "llama.cpp"
    if not (src / "ggml").is_dir():
        raise InfraError(f"llama.cpp tree {version} missing at {src}: run scripts/setup-test-env.sh")
    dst = cache / into / f"llama.cpp-{version}"
    if not (dst / "ggml").is_dir():
        part = dst.with_name(dst.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, part, symlinks=True)
        os.replace(part, dst)
    return dst


def build_open_package(docker_host: str, cache: Path, *, extra: list[str] | None = None) -> tuple[Path, dict]:
    """``hexbuild build --os linux --toolchain open`` of the tree copy, as a user runs it; returns
    the package directory and the build's JSON result."""
    tree = tree_copy(cache)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_") or k == "HEXBUILD_TEST_CACHE"}
    env["DOCKER_HOST"] = docker_host
    for k in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "GITHUB_ACTIONS", "GITLAB_CI"):
        env.pop(k, None)
    argv = [sys.executable, "-m", "hexbuild", "build", "--json", "--os", "linux", "--toolchain", "open",
            "--source", str(tree), "--cache-volume", str(cache / "open-ccache"), *(extra or [])]
    with _lock(cache / "open-build.lock"):
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                            timeout=BUILD_TIMEOUT)
    if cp.returncode != 0:
        raise InfraError(f"the open-toolchain build of {tree} failed (exit {cp.returncode}):\n{cp.stderr[-4000:]}")
    result = json.loads(cp.stdout)
    return Path(result["package"]), result


def run_aarch64(package: Path, program: str, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """A program of the package, run under qemu-aarch64 against the Debian AArch64 sysroot."""
    qemu = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
    if not qemu:
        raise InfraError("qemu-aarch64 not found: run scripts/setup-test-env.sh (qemu-user)")
    argv = [qemu, "-L", str(SYSROOT), "-E", f"LD_LIBRARY_PATH={package / 'lib'}", str(package / "bin" / program),
            *args]
    return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL, **kw)


class _lock:
    """An exclusive file lock: two test sessions never build the same cache at once."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> "_lock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


@pytest.fixture(scope="session")
def open_image(docker_client) -> str:
    """The tag of the open toolchain image on the test Docker engine."""
    try:
        return ensure_open_image_on(docker_client, cache_dir())
    except InfraError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def real_linux_package(docker_host, open_image) -> Path:
    """The package directory of the real 0.3.28 tree built with the open toolchain."""
    try:
        package, _ = build_open_package(docker_host, cache_dir())
    except (InfraError, subprocess.TimeoutExpired) as e:
        pytest.fail(str(e), pytrace=False)
    return package


def _main(argv: list[str]) -> int:
    """``python -m tests.infra.real_build --rootfs [--check]``: build the open toolchain's root
    filesystem tarball into the test cache (scripts/setup-test-env.sh; needs root), without an
    engine; with --check only say (exit 0/1) whether it is there."""
    if argv not in (["--rootfs"], ["--rootfs", "--check"]):
        print("usage: python -m tests.infra.real_build --rootfs [--check]", file=sys.stderr)
        return 2
    from hexbuild.errors import HexbuildError
    from hexbuild.toolchain.open_image import build_rootfs, recipe

    rec = recipe()
    cache = cache_dir()
    tarball = open_rootfs_cache(cache) / f"open-arm64-linux-{rec.tag}.tar"
    if "--check" in argv:
        return 0 if tarball.is_file() else 1
    with _lock(cache / "open-toolchain.lock"):
        if not tarball.is_file():
            try:
                build_rootfs(rec, tarball)
            except HexbuildError as e:
                print(f"real_build: {e.message}" + (f" ({e.hint})" if e.hint else ""), file=sys.stderr)
                return e.exit_code
    print(tarball)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
