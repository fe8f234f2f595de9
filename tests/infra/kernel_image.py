"""The kernel check's image on the test engine, made by hexbuild's own code.

``python -m tests.infra.kernel_image --rootfs [--check]`` (scripts/setup-test-env.sh; needs root:
debootstrap, chroot) builds its root filesystem into the test cache once: Debian sid, LLVM 21,
and qemu-hexagon compiled from Debian's QEMU source with hexbuild's patches (a few minutes). The
``kernel_image`` fixture then imports it into the worker's engine (seconds), as a user's
``hexbuild toolchain kernels`` would on an engine without a network.

``kernel_run`` runs a command in that image with a directory of the test's mounted at /t (no
network, the test's own user), for tests of the emulator itself (tests/test_kernel_isa.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.infra.docker_engine import InfraError, cache_dir
from tests.infra.real_build import _lock


def kernel_cache(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "kernel-check"


@pytest.fixture(scope="session")
def kernel_image(docker_client) -> str:
    """The kernel check's image (its reference) on this worker's engine."""
    from hexbuild.errors import HexbuildError
    from hexbuild.kernels.image import ensure_kernel_image

    cache = cache_dir()
    with _lock(cache / "kernel-check.lock"):
        try:
            return ensure_kernel_image(docker_client, method="rootfs", cache=kernel_cache(cache)).image
        except HexbuildError as e:
            raise InfraError(f"making the kernel check's image failed: {e.message}"
                             + (f" ({e.hint})" if e.hint else "")) from None


@pytest.fixture
def kernel_check_env(kernel_image, docker_env, monkeypatch, tmp_path):
    """What ``hexbuild test kernels`` needs: DOCKER_HOST at the test engine holding the image, and
    hexbuild's caches in the test's own directory (the work directories of the trees it builds)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    link = tmp_path / "xdg-cache" / "hexbuild" / "kernel-check"
    link.parent.mkdir(parents=True)
    link.symlink_to(kernel_cache())  # the image's rootfs cache, should the image need importing again
    return kernel_image


@pytest.fixture(scope="session")
def kernel_run(kernel_image, docker_client):
    """run(argv, directory, timeout=120) -> (exit status, output): a command in the kernel image with
    ``directory`` mounted at /t as the working directory."""
    def run(argv: list[str], directory: Path, timeout: float = 120) -> tuple[int, str]:
        c = docker_client.containers.create(kernel_image, argv, working_dir="/t", user=f"{os.getuid()}:{os.getgid()}",
                                            network_mode="none", volumes={str(directory): {"bind": "/t", "mode": "rw"}})
        try:
            c.start()
            rc = c.wait(timeout=timeout)["StatusCode"]
            return rc, c.logs().decode(errors="replace")
        finally:
            c.remove(force=True)

    return run


def _main(argv: list[str]) -> int:
    if argv not in (["--rootfs"], ["--rootfs", "--check"]):
        print("usage: python -m tests.infra.kernel_image --rootfs [--check]", file=sys.stderr)
        return 2
    from hexbuild.errors import HexbuildError
    from hexbuild.kernels.image import build_rootfs, rootfs_tarball

    cache = cache_dir()
    tarball = rootfs_tarball(kernel_cache(cache))
    if "--check" in argv:
        return 0 if tarball.is_file() else 1
    with _lock(cache / "kernel-check.lock"):
        if not tarball.is_file():
            try:
                build_rootfs(kernel_cache(cache))
            except HexbuildError as e:
                print(f"kernel_image: {e.message}" + (f" ({e.hint})" if e.hint else ""), file=sys.stderr)
                return e.exit_code
    print(tarball)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
