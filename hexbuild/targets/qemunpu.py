"""``qemu+npu[:DIR]``: the ``qemu:`` board with a virtual NPU. AArch64 programs run under
qemu-aarch64 as on ``qemu:``; the package's unchanged host library (libggml-hexagon.so) finds
hexbuild's stand-in ``libcdsprpc.so`` first on the library path, and each FastRPC session it
opens is a process of its own: ``qemu-hexagon`` (hexbuild's patched build) running hexbuild's DSP
runtime, which loads the package's unchanged skel (libggml-htp-vNN.so) and serves it
(hexbuild/vnpu/, hexbuild/dsp/vnpu/, hexbuild/dsp/host/).

The virtual DSP's parts live in hexbuild's cache, outside the install and the package: deploy
installs the user's package byte for byte. The DSP's HTP version is ``qemu.npu`` (default v73).
Everything it produces is emulated, and says so: ``fidelity()`` is the mark every document made for
it carries (hexbuild/fidelity.py).
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from ..errors import EnvironmentMissing
from ..fidelity import fields
from .base import DeviceInfo, OutputSink, TargetCaps, TargetKind, TargetSettings
from .qemu import QemuTarget, default_root as qemu_default_root


class QemuNpuTarget(QemuTarget):
    kind = "qemu+npu"
    caps = TargetCaps(package_oses=("linux",), glibc_check=True, forward=True, emulator=True, this_machine=True,
                      virtual_npu=True)

    def __init__(self, spec: str, root: str, *, sysroot: str = "", npu: str = "v73", timeout: float = 15.0,
                 transfer_timeout: float = 600.0):
        super().__init__(spec, root, sysroot=sysroot, timeout=timeout, transfer_timeout=transfer_timeout)
        self.npu = npu
        self._parts = None

    @property
    def parts(self):
        """qemu-hexagon, the DSP runtime and the stand-in libcdsprpc.so, made once into the cache
        (from the kernel check's and the open toolchain's images, which a run does not build)."""
        if self._parts is None:
            from ..vnpu.parts import ensure_parts

            self._parts = ensure_parts(make_images=False)
        return self._parts

    def preflight(self) -> None:
        super().preflight()
        self.parts  # noqa: B018 (resolving them is the check)

    def check_runnable(self, argv: Sequence[str], cwd: str | None = None) -> None:
        """Before anything is written: qemu-aarch64, then the virtual NPU's parts (found, or made
        from images the engine has), which every run of this target needs."""
        super().check_runnable(argv, cwd)
        self.qemu  # noqa: B018
        self.parts  # noqa: B018

    def probe(self, dest: str) -> DeviceInfo:
        info = super().probe(dest)
        info.htp_arch = self.npu  # the DSP the stand-in answers ARCH_VER for
        info.extra.update(npu=self.fidelity()["npu_model"], emulated_npu=True)
        return info

    def fidelity(self) -> dict:
        return fields(self.npu)

    def check_npu_install(self, dest: str, manifest, env) -> None:
        """Before any session: CpuFallback (12) in one line when the emulated DSP cannot run the
        install's skel for qemu.npu (none there, or HMX code); a note when it runs with HMX off."""
        from pathlib import Path

        from ..ui import ui
        from ..vnpu.skel import check_install

        seen = {**os.environ, **(env or {})}  # the program's environment: the shell's, then the run's knobs
        note = check_install(Path(dest) / "lib", self.npu, manifest, seen, where=self.spec)
        if note:
            ui.note(note)

    def vnpu_env(self) -> dict[str, str]:
        """What the stand-in libcdsprpc.so and the DSP runtime read from the environment."""
        p = self.parts
        return {"HEXBUILD_VNPU_QEMU": str(p.qemu), "HEXBUILD_VNPU_RUNTIME": str(p.runtime),
                "HEXBUILD_VNPU_CPU": self.npu}

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output: OutputSink | None = None) -> int:
        if self.emulated(argv, cwd) == list(argv) and self._parts is None:
            # not an AArch64 program of the install (deploy's and doctor's sh scripts): no NPU to
            # give it, and no need for the parts before a program that uses them runs
            return super().run(argv, env=env, cwd=cwd, timeout=timeout, on_output=on_output)
        return super().run(argv, env=self.npu_program_env(env), cwd=cwd, timeout=timeout, on_output=on_output)

    def start_detached(self, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None,
                       log: str) -> tuple[int, str]:
        return super().start_detached(argv, env=self.npu_program_env(env), cwd=cwd, log=log)

    def npu_program_env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """``env`` with what an install's program needs to reach the virtual NPU."""
        merged = dict(env or {})
        merged.update(self.vnpu_env())
        # the stand-in comes first, so the host library's dlopen("libcdsprpc.so") finds it
        lib = str(self.parts.host_lib_dir("aarch64"))
        merged["LD_LIBRARY_PATH"] = lib + (":" + merged["LD_LIBRARY_PATH"] if merged.get("LD_LIBRARY_PATH") else "")
        return merged


def default_root() -> str:
    return os.path.join(os.path.dirname(qemu_default_root()), "..", "qemu-npu", "llama.cpp")


def _parse(spec: str, s: TargetSettings) -> QemuNpuTarget:
    from .spec import after_colon, malformed

    path = after_colon(spec, KIND)
    if path == "":
        raise malformed(spec, KIND, "the directory after 'qemu+npu:' is empty (or write just qemu+npu)")
    if s.npu not in ("v68", "v69", "v73", "v75"):
        raise EnvironmentMissing(f"qemu.npu {s.npu}: the virtual NPU emulates v68, v69, v73 or v75")
    return QemuNpuTarget(spec, path or os.path.normpath(default_root()), sysroot=s.sysroot, npu=s.npu,
                         timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="qemu+npu", form="qemu+npu[:DIR]", example="qemu+npu:/tmp/llama.cpp",
                  summary="the qemu: board with a virtual NPU: HTP sessions on an emulated cDSP",
                  parse=_parse, caps=QemuNpuTarget.caps)
