"""The ``qemu+npu:`` target for tests, as a user gets it: hexbuild's own code makes the virtual NPU's
parts (hexbuild/vnpu/parts.py: qemu-hexagon from the kernel check's image, the DSP runtime built
there, the stand-in libcdsprpc.so built in the open image) into a cache of the session's, once.

``qemu_npu_env`` (per test) points hexbuild at that cache (XDG_CACHE_HOME) and at the worker's
engine (DOCKER_HOST), so that a ``hexbuild ... --target qemu+npu:DIR`` in the test finds the parts
made and makes nothing; the qemu: board's sysroot is exported there once as well.

``qemu_npu_install``: the real 0.3.28 build's package deployed by ``hexbuild deploy`` on a
``qemu+npu:DIR`` once per session (DIR); ``hexbuild_env(xdg, docker_host)`` is the environment of a
``python -m hexbuild`` subprocess that uses that cache and engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
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


ROOT = Path(__file__).resolve().parents[2]


def hexbuild_env(xdg: Path, docker_host: str, **extra: str) -> dict[str, str]:
    """A hexbuild subprocess's environment: the session's cache and engine, no CI, no settings
    from the shell; GGML_NO_BACKTRACE: an aborting llama.cpp program does not start gdb."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_") or k == "HEXBUILD_TEST_CACHE"}
    for k in ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        env.pop(k, None)
    env.update(XDG_CACHE_HOME=str(xdg), DOCKER_HOST=docker_host, PYTHONPATH=str(ROOT), GGML_NO_BACKTRACE="1", **extra)
    return env


@pytest.fixture(scope="session")
def qemu_npu_install(vnpu_hexagon_package, vnpu_cache, docker_host, tmp_path_factory) -> Path:
    """The real 0.3.28 package deployed by hexbuild on qemu+npu:DIR (DIR returned)."""
    dest = tmp_path_factory.mktemp("qemu-npu") / "llama.cpp"
    done = subprocess.run([sys.executable, "-m", "hexbuild", "deploy", str(vnpu_hexagon_package), "--target",
                           f"qemu+npu:{dest}"], capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env=hexbuild_env(vnpu_cache, docker_host))
    if done.returncode != 0:
        raise InfraError(f"deploying the real package on qemu+npu:{dest} failed:\n{done.stderr[-3000:]}")
    return dest
