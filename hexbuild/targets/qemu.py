"""``qemu[:DIR]``: a Linux AArch64 package installed in a directory of this machine and its
programs run by ``qemu-aarch64 -L SYSROOT`` — a smoke-test target for CI runners without a board.

Files are a ``local:`` target's (the same incremental, atomic deploy; the same ``sh`` scripts run
natively). Only what is an AArch64 ELF file — the package's programs, or its bundled loader — is
started through the emulator, as binfmt_misc would: ``qemu-aarch64 -L SYSROOT -- PROG ARGS…``,
each argument passed through untouched (``--`` ends qemu's own options) and the environment
inherited. SYSROOT is ``linux.sysroot`` (``--sysroot``) or the open toolchain image's AArch64
runtime, extracted once into the cache (hexbuild/toolchain/sysroot.py). Only Linux (glibc)
packages: bionic programs need Android's linker, which is not here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import EnvironmentMissing
from .base import DeviceInfo, OutputSink, TargetCaps, TargetKind, TargetSettings
from .local import LocalTarget

ELF_AARCH64 = 183
QEMU_NAMES = ("qemu-aarch64", "qemu-aarch64-static")


def default_root() -> str:
    from ..paths import cache_root

    return str(cache_root() / "qemu" / "llama.cpp")


def is_aarch64_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == ELF_AARCH64


def find_qemu() -> str:
    for name in QEMU_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise EnvironmentMissing("qemu-aarch64 is not installed: the qemu: target runs AArch64 programs with it",
                             hint="apt install qemu-user (Debian/Ubuntu; qemu-user-static also works)")


class QemuTarget(LocalTarget):
    kind = "qemu"
    os = "linux"
    caps = TargetCaps(package_oses=("linux",), glibc_check=True, forward=True, emulator=True, this_machine=True,
                      early_start=True)

    def __init__(self, spec: str, root: str, *, sysroot: str = "", timeout: float = 15.0,
                 transfer_timeout: float = 600.0):
        super().__init__(spec, root, timeout=timeout, transfer_timeout=transfer_timeout)
        self.sysroot_setting = sysroot
        self._sysroot: Path | None = None
        self._qemu: str | None = None

    @property
    def qemu(self) -> str:
        if self._qemu is None:
            self._qemu = find_qemu()
        return self._qemu

    @property
    def sysroot(self) -> Path:
        if self._sysroot is None:
            from ..toolchain.sysroot import resolve_sysroot

            self._sysroot = resolve_sysroot(self.sysroot_setting)
        return self._sysroot

    def preflight(self) -> None:
        self.qemu  # noqa: B018 (resolving it is the check)
        self.sysroot  # noqa: B018

    def probe(self, dest: str) -> DeviceInfo:
        info = super().probe(dest)
        info.abi = "aarch64"  # what the programs see, not this machine's uname
        info.extra["emulator"] = self.qemu
        return info

    def foreign(self, path: str) -> str | None:
        return None if is_aarch64_elf(path) else super().foreign(path)  # AArch64: the emulator's

    def glibc_version(self) -> str | None:
        from ..artifacts.glibc import sysroot_version

        return sysroot_version(self.sysroot)

    def emulated(self, argv: Sequence[str], cwd: str | None) -> list[str]:
        """``argv`` as this machine runs it: AArch64 programs through qemu, the rest natively."""
        program = str(argv[0])
        path = program if "/" in program else (shutil.which(program) or "")
        if path and not os.path.isabs(path):
            path = os.path.join(cwd or os.getcwd(), path)
        if not path or not is_aarch64_elf(path):
            return list(argv)
        return [self.qemu, "-L", str(self.sysroot), "--", *argv]

    def program_argv(self, argv: Sequence[str], cwd: str | None = None) -> list[str]:
        return self.emulated(argv, cwd)

    def launcher(self) -> list[str]:
        return [self.qemu, "-L", str(self.sysroot), "--"]  # the install's programs are AArch64 ELF files

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output: OutputSink | None = None) -> int:
        return super().run(self.emulated(argv, cwd), env=env, cwd=cwd, timeout=timeout, on_output=on_output)


def _parse(spec: str, s: TargetSettings) -> QemuTarget:
    from .spec import after_colon, malformed

    path = after_colon(spec, KIND)
    if path == "":
        raise malformed(spec, KIND, "the directory after 'qemu:' is empty (or write just qemu)")
    return QemuTarget(spec, path or default_root(), sysroot=s.sysroot, timeout=s.timeout,
                      transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="qemu", form="qemu[:DIR]", example="qemu:/tmp/llama.cpp",
                  summary="a directory on this machine, AArch64 Linux programs run by qemu-aarch64",
                  parse=_parse, caps=QemuTarget.caps)
