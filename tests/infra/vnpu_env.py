"""The virtual NPU's DSP side for tests: qemu-hexagon and hexbuild's DSP runtime built from this
checkout (hexbuild.dsp.build) in the kernel check's image, plus the host-side test peer
(tests/vnpu/peer.c) that speaks the wire protocol to it as the host library does.

One container of the image (no network, this user, a directory of the session's at /t) compiles
the runtime and Hexagon test programs; qemu-hexagon, a static program, is copied out of it and runs
here, as the qemu+npu: target runs it. The peer is compiled with this machine's C compiler.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hexbuild.dsp.build import CFLAGS, VNPU_SOURCES, dsp_root, vnpu_runtime_argv
from hexbuild.kernels.image import CLANG, QEMU_BIN

HERE = Path(__file__).resolve().parent.parent / "vnpu"
# the runtime without its main (vnpu/main.c, session.c, queue.c, loader.c, exports.c): what a
# Hexagon test program of the runtime's threads and heap links with
PROGRAM_SOURCES = ("runtime/start.c", "runtime/libc.c", "runtime/stdio.c", "runtime/heap.c", "runtime/libm.c",
                   "runtime/rt.c", "runtime/hap.c", "vnpu/qurt.c", "vnpu/hap.c", "vnpu/mem.c")


class VnpuEnvError(RuntimeError):
    pass


class VnpuEnv:
    def __init__(self, container, work: Path):
        self.container = container
        self.work = work
        shutil.copytree(dsp_root(), self.work / "dsp", ignore=shutil.ignore_patterns("__pycache__", "*.py"))
        self._sh(f"cp {QEMU_BIN} /t/qemu-hexagon")
        self.qemu = self.work / "qemu-hexagon"
        self.runtime = self._clang(vnpu_runtime_argv(self._inside(self.work / "runtime"), dsp=self._dsp(),
                                                     clang=CLANG), self.work / "runtime")

    def _inside(self, path: Path) -> str:
        return "/t/" + str(path.relative_to(self.work))

    def _dsp(self) -> str:
        return self._inside(self.work / "dsp")

    def _sh(self, script: str) -> tuple[int, str]:
        code, out = self.container.exec_run(["sh", "-c", script], user=f"{os.getuid()}:{os.getgid()}")
        return code, (out or b"").decode(errors="replace")

    def _clang(self, argv: list[str], out: Path) -> Path:
        import shlex

        code, log = self._sh(" ".join(shlex.quote(a) for a in argv))
        if code:
            raise VnpuEnvError(f"{CLANG} failed for {out.name}:\n{log}")
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

@pytest.fixture(scope="session")
def vnpu_env(kernel_image, docker_client, tmp_path_factory):
    work = tmp_path_factory.mktemp("vnpu-env")
    container = docker_client.containers.run(kernel_image, ["sleep", "infinity"], detach=True, network_mode="none",
                                             working_dir="/t", volumes={str(work): {"bind": "/t", "mode": "rw"}},
                                             labels={"hexbuild.test": "vnpu-env"})
    try:
        yield VnpuEnv(container, work)
    finally:
        container.remove(force=True)


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
