"""The virtual NPU's DSP side for tests: qemu-hexagon and hexbuild's DSP runtime built from this
checkout (hexbuild.dsp.build), plus the host-side test peer (tests/vnpu/peer.c) that speaks the
wire protocol to it as the host library does.

``vnpu_env`` needs, for now, the development root filesystem of the kernel work:
``HEXBUILD_KERNEL_DEV_ROOT`` (a Debian sid chroot with clang-21 and lld-21, in which the runtime
and Hexagon test programs are compiled) and the patched emulator, ``HEXBUILD_VNPU_QEMU`` (default:
the root's ``/src/build-dma/qemu-hexagon``, a static binary that runs here as it is). Without them
the tests that ask for it are skipped. The peer is compiled with this machine's C compiler.
The interface (runtime, qemu, program(), skel(), peer()) is what the tests use, so the
implementation can move into the kernel check's image without touching them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hexbuild.dsp.build import CFLAGS, VNPU_SOURCES, dsp_root, vnpu_runtime_argv

CLANG = "clang-21"
HERE = Path(__file__).resolve().parent.parent / "vnpu"
# the runtime without its main (vnpu/main.c, session.c, queue.c, loader.c, exports.c): what a
# Hexagon test program of the runtime's threads and heap links with
PROGRAM_SOURCES = ("runtime/start.c", "runtime/libc.c", "runtime/stdio.c", "runtime/heap.c", "runtime/libm.c",
                   "runtime/rt.c", "runtime/hap.c", "vnpu/qurt.c", "vnpu/hap.c", "vnpu/mem.c")


class VnpuEnvError(RuntimeError):
    pass


class VnpuEnv:
    def __init__(self, root: Path, qemu: Path):
        self.root = root
        self.qemu = qemu
        self.work = Path(tempfile.mkdtemp(prefix="hexbuild-vnpu-", dir=root / "tmp"))
        shutil.copytree(dsp_root(), self.work / "dsp", ignore=shutil.ignore_patterns("__pycache__", "*.py"))
        self.runtime = self._clang(vnpu_runtime_argv(self._inside(self.work / "runtime"), dsp=self._dsp(),
                                                     clang=CLANG), self.work / "runtime")

    def _inside(self, path: Path) -> str:
        return "/" + str(path.relative_to(self.root))

    def _dsp(self) -> str:
        return self._inside(self.work / "dsp")

    def _clang(self, argv: list[str], out: Path) -> Path:
        done = subprocess.run(["chroot", str(self.root), *argv], capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise VnpuEnvError(f"{CLANG} failed for {out.name}:\n{done.stderr}")
        return out

    def program(self, source: Path) -> Path:
        """A Hexagon test program (one C file) linked with the runtime's threads and heap."""
        shutil.copy(source, self.work / source.name)
        out = self.work / source.stem
        d = self._dsp()
        argv = [CLANG, *CFLAGS, f"-isystem{d}/include", f"-isystem{d}/include/qurt",
                *(f"{d}/{s}" for s in PROGRAM_SOURCES), self._inside(self.work / source.name), "-o", self._inside(out)]
        return self._clang(argv, out)

    def skel(self, source: Path, name: str) -> Path:
        """A Hexagon shared object as the SDK builds a skel (its ABI, PIC, eager binding), from one C file."""
        shutil.copy(source, self.work / source.name)
        out = self.work / name
        argv = [CLANG, "--target=hexagon-unknown-none-elf", "-mv73", "-O2", "-fPIC", "-shared", "-nostdlib",
                "-fuse-ld=lld", "-Wl,-z,now", self._inside(self.work / source.name), "-o", self._inside(out)]
        return self._clang(argv, out)

    def peer(self, htp_dir: Path) -> Path:
        """tests/vnpu/peer.c compiled for this machine against a tree's htp-ops.h."""
        out = self.work / "peer"
        if not out.is_file():
            cc = shutil.which("cc") or shutil.which("gcc")
            if not cc:
                raise VnpuEnvError("no C compiler for the test peer")
            done = subprocess.run([cc, "-O1", "-Wall", f"-I{htp_dir}", "-o", str(out), str(HERE / "peer.c")],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode:
                raise VnpuEnvError(f"compiling the test peer failed:\n{done.stderr}")
        return out

    def run(self, program: Path, timeout: float = 120,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.qemu), "-cpu", "v73", str(program)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture(scope="session")
def vnpu_env():
    root = os.environ.get("HEXBUILD_KERNEL_DEV_ROOT")
    if not root:
        pytest.skip("no DSP toolchain for the virtual NPU's runtime (HEXBUILD_KERNEL_DEV_ROOT)")
    qemu = Path(os.environ.get("HEXBUILD_VNPU_QEMU") or Path(root) / "src/build-dma/qemu-hexagon")
    if not os.access(qemu, os.X_OK):
        pytest.skip(f"no qemu-hexagon at {qemu} (HEXBUILD_VNPU_QEMU)")
    env = VnpuEnv(Path(root), qemu)
    yield env
    env.close()


@pytest.fixture(scope="session")
def vnpu_skel_0_3_28(request) -> Path:
    """The real v73 skel of the 0.3.28 tree built on the toolchain double: the one the real Hexagon
    build left in the test cache, or that build (tests/infra/real_hexagon.py) when there is none."""
    from tests.infra.docker_engine import cache_dir
    from tests.infra.real_hexagon import tree_copy

    skel = tree_copy(cache_dir()) / "pkg-snapdragon" / "lib" / "libggml-htp-v73.so"
    if skel.is_file():
        return skel
    return request.getfixturevalue("real_hexagon_package") / "lib" / "libggml-htp-v73.so"
