"""The ``qemu+npu:`` target for tests, as a user gets it: hexbuild's own code makes the virtual NPU's
parts (hexbuild/vnpu/parts.py: qemu-hexagon from the kernel check's image, the DSP runtime built
there, the stand-in libcdsprpc.so built in the open image) into a cache of the session's, once.

``qemu_npu_env`` (per test) points hexbuild at that cache (XDG_CACHE_HOME) and at the worker's
engine (DOCKER_HOST), so that a ``hexbuild ... --target qemu+npu:DIR`` in the test finds the parts
made and makes nothing; the qemu: board's sysroot is exported there once as well.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.docker_engine import InfraError
from tests.infra.kernel_image import kernel_cache


@pytest.fixture(scope="session")
def vnpu_cache(kernel_image, open_image, docker_client, tmp_path_factory) -> Path:
    """An XDG cache holding the virtual NPU's parts for this checkout's DSP sources."""
    from hexbuild.errors import HexbuildError

    xdg = tmp_path_factory.mktemp("vnpu-xdg")
    link = xdg / "hexbuild" / "kernel-check"
    link.parent.mkdir(parents=True)
    link.symlink_to(kernel_cache())  # the image's rootfs, should the image need importing again
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(xdg))
    try:
        from hexbuild.vnpu.parts import ensure_parts

        ensure_parts(client=docker_client)
    except HexbuildError as e:
        raise InfraError(f"making the virtual NPU's parts failed: {e.message}") from None
    finally:
        mp.undo()
    return xdg


@pytest.fixture
def qemu_npu_env(vnpu_cache, docker_env, monkeypatch) -> Path:
    """DOCKER_HOST and XDG_CACHE_HOME for a hexbuild that runs on ``qemu+npu:`` targets."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(vnpu_cache))
    return vnpu_cache


@pytest.fixture(scope="session")
def vnpu_parts(vnpu_cache, docker_client):
    """The parts themselves (qemu, runtime, host_lib_dir(arch)), for tests below the target."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(vnpu_cache))
    try:
        from hexbuild.vnpu.parts import ensure_parts

        return ensure_parts(client=docker_client)
    finally:
        mp.undo()
