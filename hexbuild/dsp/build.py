"""Compiling the virtual NPU's DSP runtime: hexbuild/dsp/vnpu/ with the runtime it shares with the
kernel harness (hexbuild/dsp/runtime/), one static Hexagon program that qemu-hexagon runs as a
session's DSP process (``runtime FD``).

It is built for the oldest HTP version hexbuild knows (v68): it uses no HVX itself, and the
emulator's ``-cpu`` (the skel's version) decides what the skel may run. One clang call compiles
and links it (lld, no C library: the runtime makes its own system calls).

The target is the standalone Hexagon ABI (``hexagon-unknown-none-elf``), the one the SDK and the
toolchain double compile skels with, not the Linux one: they differ in how variadic arguments
travel (on the stack, or in registers with a save area), and a skel's FARF and snprintf calls
into the runtime would read garbage (the error callback's code printed as 0)."""

from __future__ import annotations

from pathlib import Path

VNPU_SOURCES = ("runtime/start.c", "runtime/libc.c", "runtime/stdio.c", "runtime/heap.c", "runtime/libm.c",
                "runtime/rt.c", "runtime/hap.c", "vnpu/main.c", "vnpu/session.c", "vnpu/loader.c", "vnpu/exports.c",
                "vnpu/mem.c", "vnpu/hap.c", "vnpu/qurt.c", "vnpu/queue.c", "vnpu/fault.c")
CFLAGS = ("--target=hexagon-unknown-none-elf", "-mv68", "-O2", "-G0", "-fno-pic", "-ffreestanding", "-fno-builtin",
          "-nostdlib", "-nostdlibinc", "-static", "-fuse-ld=lld", "-Wl,-e,_start", "-Wall", "-Wextra",
          "-Wno-unused-parameter")


def dsp_root() -> Path:
    """hexbuild/dsp of this installation (package data)."""
    return Path(__file__).resolve().parent


def vnpu_runtime_argv(out: str, *, dsp: str | None = None, clang: str = "clang-21") -> list[str]:
    """The clang command that builds the runtime into ``out``; ``dsp`` is where hexbuild/dsp is
    seen by that clang (a mount in a container, a path in a chroot), this installation's by default."""
    d = dsp or str(dsp_root())
    return [clang, *CFLAGS, f"-isystem{d}/include", f"-isystem{d}/include/qurt",
            *(f"{d}/{s}" for s in VNPU_SOURCES), "-o", out]
