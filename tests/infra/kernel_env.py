"""A compiler and an emulator for Hexagon test programs that run real HVX instructions, from the
kernel check's image (tests/infra/kernel_image.py): clang-21 and qemu-hexagon built from Debian's
QEMU source with qemu-hexagon-hvx/patches.

``kernel_env.compile(sources, out, htp="v73", flags=[])`` builds a static, freestanding program
(clang-21 for ``hexagon-unknown-linux-musl``, HVX 128 B with IEEE float, no libc: the program
makes its own Linux system calls) and ``kernel_env.run(elf, stdin=b"", htp="v73", timeout=60)``
runs it under ``qemu-hexagon -cpu <htp>`` (stdout bytes in the returned ``CompletedProcess``).
One container of the image serves the whole session (no network, this user, a directory of the
session's mounted at /t); each call is an exec in it. Headers next to a source file are copied
with it, so ``#include "x.h"`` works.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hexbuild.kernels.image import CLANG, QEMU_BIN

HTPS = ("v68", "v69", "v73", "v75")
BASE_FLAGS = ("--target=hexagon-unknown-linux-musl", "-mhvx", "-mhvx-length=128b", "-mhvx-ieee-fp",
              "-O2", "-ffreestanding", "-nostdlib", "-static", "-fuse-ld=lld")


class KernelEnvError(RuntimeError):
    pass


class ImageKernelEnv:
    """clang and qemu-hexagon in one long-lived container of the kernel check's image."""

    def __init__(self, container, work: Path):
        self.container = container
        self.work = work
        self._ids = itertools.count()

    def _slot(self) -> tuple[Path, str]:
        name = str(next(self._ids))
        (self.work / name).mkdir()
        return self.work / name, f"/t/{name}"

    def _exec(self, script: str, timeout: float) -> tuple[int, bytes]:
        # the exec has no timeout of its own: `timeout` inside the container stops a hung program
        code, out = self.container.exec_run(["timeout", str(int(timeout)), "sh", "-c", script],
                                            user=f"{os.getuid()}:{os.getgid()}", demux=True)
        return code, (out[1] or b"") if isinstance(out, tuple) else (out or b"")

    def compile(self, sources: list[Path], out: Path, htp: str = "v73", flags: list[str] = []) -> Path:
        if htp not in HTPS:
            raise KernelEnvError(f"unknown HTP {htp!r}: one of {', '.join(HTPS)}")
        slot, inside = self._slot()
        for source in sources:
            shutil.copy(source, slot / source.name)
            for header in source.parent.glob("*.h"):
                shutil.copy(header, slot / header.name)
        argv = [CLANG, *BASE_FLAGS, f"-m{htp}", *flags, *(f"{inside}/{s.name}" for s in sources),
                "-o", f"{inside}/{out.name}"]
        code, err = self._exec(" ".join(_q(a) for a in argv), 300)
        if code:
            raise KernelEnvError(f"{CLANG} failed for {', '.join(s.name for s in sources)}:\n"
                                 f"{err.decode(errors='replace')}")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(slot / out.name, out)
        return out

    def run(self, elf: Path, stdin: bytes = b"", htp: str = "v73", timeout: float = 60) -> subprocess.CompletedProcess:
        if htp not in HTPS:
            raise KernelEnvError(f"unknown HTP {htp!r}: one of {', '.join(HTPS)}")
        slot, inside = self._slot()
        shutil.copy(elf, slot / elf.name)
        (slot / "stdin").write_bytes(stdin)
        code, err = self._exec(f"{QEMU_BIN} -cpu {htp} {inside}/{_q(elf.name)} < {inside}/stdin > {inside}/stdout",
                               timeout)
        done = subprocess.CompletedProcess([QEMU_BIN, "-cpu", htp, elf.name], code,
                                           (slot / "stdout").read_bytes(), err)
        shutil.rmtree(slot, ignore_errors=True)
        return done


def _q(word: str) -> str:
    import shlex

    return shlex.quote(word)


@pytest.fixture(scope="session")
def kernel_env(kernel_image, docker_client, tmp_path_factory):
    work = tmp_path_factory.mktemp("kernel-env")
    container = docker_client.containers.run(kernel_image, ["sleep", "infinity"], detach=True, network_mode="none",
                                             working_dir="/t", volumes={str(work): {"bind": "/t", "mode": "rw"}},
                                             labels={"hexbuild.test": "kernel-env"})
    try:
        yield ImageKernelEnv(container, work)
    finally:
        container.remove(force=True)
