"""A compiler and an emulator for Hexagon test programs that run real HVX instructions.

``kernel_env.compile(sources, out, htp="v73", flags=[])`` builds a static, freestanding program
(clang-21 for ``hexagon-unknown-linux-musl``, HVX 128 B with IEEE float, no libc: the program
makes its own Linux system calls) and ``kernel_env.run(elf, stdin=b"", htp="v73", timeout=60)``
runs it under ``qemu-hexagon -cpu <htp>`` with the HVX float instructions of
qemu-hexagon-hvx/patches (stdout bytes in the returned ``CompletedProcess``).

For now both live in a development root filesystem named by ``HEXBUILD_KERNEL_DEV_ROOT`` (a
Debian sid chroot with clang-21 and the patched emulator built at ``/src/build/qemu-hexagon``);
without it the tests that ask for ``kernel_env`` are skipped. The interface is what the tests
use, so the implementation can move into hexbuild's kernel-check image without touching them.
Headers next to a source file are copied with it, so ``#include "x.h"`` works.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CLANG = "clang-21"
QEMU = "/src/build/qemu-hexagon"
HTPS = ("v68", "v69", "v73", "v75")
BASE_FLAGS = ("--target=hexagon-unknown-linux-musl", "-mhvx", "-mhvx-length=128b", "-mhvx-ieee-fp",
              "-O2", "-ffreestanding", "-nostdlib", "-static", "-fuse-ld=lld")


class KernelEnvError(RuntimeError):
    pass


class DevRootKernelEnv:
    """clang and qemu-hexagon inside a chroot; every call gets a directory of its own in its /tmp."""

    def __init__(self, root: Path):
        self.root = root
        self.work = Path(tempfile.mkdtemp(prefix="hexbuild-kernel-", dir=root / "tmp"))
        self._ids = itertools.count()

    def _inside(self, path: Path) -> str:
        return "/" + str(path.relative_to(self.root))

    def _chroot(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["chroot", str(self.root), *argv], capture_output=True, **kwargs)

    def _slot(self) -> Path:
        slot = self.work / str(next(self._ids))
        slot.mkdir()
        return slot

    def compile(self, sources: list[Path], out: Path, htp: str = "v73", flags: list[str] = []) -> Path:
        if htp not in HTPS:
            raise KernelEnvError(f"unknown HTP {htp!r}: one of {', '.join(HTPS)}")
        slot = self._slot()
        for source in sources:
            shutil.copy(source, slot / source.name)
            for header in source.parent.glob("*.h"):
                shutil.copy(header, slot / header.name)
        elf = slot / out.name
        done = self._chroot([CLANG, *BASE_FLAGS, f"-m{htp}", *flags,
                             *(self._inside(slot / s.name) for s in sources), "-o", self._inside(elf)],
                            timeout=300)
        if done.returncode:
            raise KernelEnvError(f"{CLANG} failed for {', '.join(s.name for s in sources)}:\n"
                                 f"{done.stderr.decode(errors='replace')}")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(elf, out)
        return out

    def run(self, elf: Path, stdin: bytes = b"", htp: str = "v73", timeout: float = 60) -> subprocess.CompletedProcess:
        if htp not in HTPS:
            raise KernelEnvError(f"unknown HTP {htp!r}: one of {', '.join(HTPS)}")
        slot = self._slot()
        shutil.copy(elf, slot / elf.name)
        done = self._chroot([QEMU, "-cpu", htp, self._inside(slot / elf.name)], input=stdin, timeout=timeout)
        shutil.rmtree(slot, ignore_errors=True)
        return done

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture(scope="session")
def kernel_env():
    root = os.environ.get("HEXBUILD_KERNEL_DEV_ROOT")
    if not root:
        pytest.skip("no kernel emulator")
    env = DevRootKernelEnv(Path(root))
    yield env
    env.close()
