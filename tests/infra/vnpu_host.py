"""hexbuild's stand-in libcdsprpc.so (hexbuild/dsp/host/) for the tests: built from the checkout's
sources by its own build.sh, with ctypes bindings of its calls (the FastRPC headers' structs) and a
runner of a test's calls in a process of its own (the library's state, its sessions and the lines it
writes on stderr are per process).

Session fixture ``vnpu_host_libs``: {"x86_64": path, "aarch64": path} of the two builds (the
AArch64 one only when a cross compiler is installed), built once per test run into the test cache.
The DSP side: ``vnpu_stub_dsp.py`` beside this module (a stand-in speaking the protocol) and, when
present, the real DSP runtime under qemu-hexagon (``vnpu_real_dsp``).
"""

from __future__ import annotations

import ctypes as C
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST_SRC = ROOT / "hexbuild" / "dsp" / "host"
STUB = Path(__file__).with_name("vnpu_stub_dsp.py")

AEE_SUCCESS = 0
AEE_EEXPIRED = 0x0C
AEE_EBADSTATE = 0x0D
AEE_EBADPARM = 0x0E
AEE_EUNSUPPORTED = 0x14
AEE_EALREADY = 0x1A
AEE_EINTERRUPTED = 46
AEE_EBADHANDLE = 0x2C
AEE_EINVALIDDOMAIN = 0x39
AEE_ENOSUCHMAP = 0x48
AEE_EBADITEM = 0x10
AEE_ECONNREFUSED = 0x72
AEE_ENOSESSION = 0x8A
AEE_EWOULDBLOCK = 516
DSP_OFFSET = 0x80000400
TIMEOUT_NONE = 0xFFFFFFFF

# remote.h request ids
DSPRPC_CONTROL_LATENCY, DSPRPC_GET_DSP_INFO = 1, 2
FASTRPC_THREAD_PARAMS, DSPRPC_CONTROL_UNSIGNED_MODULE = 1, 2
FASTRPC_RESERVE_NEW_SESSION, FASTRPC_GET_EFFECTIVE_DOMAIN_ID, FASTRPC_GET_URI = 13, 14, 15
ARCH_VER = 6
FASTRPC_MAP_FD = 2


class RemoteBuf(C.Structure):
    _fields_ = [("pv", C.c_void_p), ("nLen", C.c_size_t)]


class DspqueueBuffer(C.Structure):
    _fields_ = [("fd", C.c_uint32), ("size", C.c_uint32), ("offset", C.c_uint32), ("flags", C.c_uint32),
                ("ptr", C.c_void_p)]


class ReserveNewSession(C.Structure):
    _fields_ = [("domain_name", C.c_char_p), ("domain_name_len", C.c_uint32), ("session_name", C.c_char_p),
                ("session_name_len", C.c_uint32), ("effective_domain_id", C.c_uint32), ("session_id", C.c_uint32)]


class EffectiveDomainId(C.Structure):
    _fields_ = [("domain_name", C.c_char_p), ("domain_name_len", C.c_uint32), ("session_id", C.c_uint32),
                ("effective_domain_id", C.c_uint32)]


class GetUri(C.Structure):
    _fields_ = [("domain_name", C.c_char_p), ("domain_name_len", C.c_uint32), ("session_id", C.c_uint32),
                ("module_uri", C.c_char_p), ("module_uri_len", C.c_uint32), ("uri", C.c_char_p),
                ("uri_len", C.c_uint32)]


class Capability(C.Structure):
    _fields_ = [("domain", C.c_uint32), ("attribute_ID", C.c_uint32), ("capability", C.c_uint32)]


def sc(method: int, nin: int, nout: int) -> int:
    """REMOTE_SCALARS_MAKEX(0, method, nin, nout, 0, 0)"""
    return (method << 24) | (nin << 16) | (nout << 8)


class Host:
    """The library's calls, with the types of the FastRPC headers. Codes come back unsigned."""

    def __init__(self, path: str | os.PathLike):
        lib = self.lib = C.CDLL(str(path))
        u32, i32, vp, u64 = C.c_uint32, C.c_int, C.c_void_p, C.c_uint64
        sig = {
            "rpcmem_alloc": (vp, [i32, u32, i32]), "rpcmem_alloc2": (vp, [i32, u32, C.c_size_t]),
            "rpcmem_free": (None, [vp]), "rpcmem_to_fd": (i32, [vp]),
            "fastrpc_mmap": (i32, [i32, i32, vp, i32, C.c_size_t, i32]),
            "fastrpc_munmap": (i32, [i32, i32, vp, C.c_size_t]),
            "remote_handle64_open": (i32, [C.c_char_p, C.POINTER(u64)]),
            "remote_handle64_invoke": (i32, [u64, u32, C.POINTER(RemoteBuf)]),
            "remote_handle64_close": (i32, [u64]),
            "remote_handle_control": (i32, [u32, vp, u32]),
            "remote_handle64_control": (i32, [u64, u32, vp, u32]),
            "remote_session_control": (i32, [u32, vp, u32]),
            "dspqueue_create": (i32, [i32, u32, u32, u32, vp, vp, vp, C.POINTER(vp)]),
            "dspqueue_close": (i32, [vp]), "dspqueue_export": (i32, [vp, C.POINTER(u64)]),
            "dspqueue_write": (i32, [vp, u32, u32, C.POINTER(DspqueueBuffer), u32, C.c_char_p, u32]),
            "dspqueue_read": (i32, [vp, C.POINTER(u32), u32, C.POINTER(u32), C.POINTER(DspqueueBuffer), u32,
                                    C.POINTER(u32), C.c_char_p, u32]),
            "remote_mmap": (i32, [i32, u32, u32, i32, C.POINTER(u32)]),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args

    @staticmethod
    def code(err: int) -> int:
        return err & 0xFFFFFFFF

    def open(self, uri: str) -> tuple[int, int]:
        h = C.c_uint64()
        return self.code(self.lib.remote_handle64_open(uri.encode(), C.byref(h))), h.value

    def invoke(self, h: int, method: int, ins: list[bytes], out_sizes: list[int]) -> tuple[int, list[bytes]]:
        keep = [C.create_string_buffer(b, len(b)) for b in ins] + [C.create_string_buffer(n) for n in out_sizes]
        args = (RemoteBuf * max(1, len(keep)))()
        for i, b in enumerate(keep):
            args[i].pv, args[i].nLen = C.cast(b, C.c_void_p), len(b)
        err = self.code(self.lib.remote_handle64_invoke(h, sc(method, len(ins), len(out_sizes)), args))
        return err, [keep[len(ins) + i].raw for i in range(len(out_sizes))]

    def close(self, h: int) -> int:
        return self.code(self.lib.remote_handle64_close(h))

    def alloc(self, size: int) -> tuple[int, int]:
        p = self.lib.rpcmem_alloc2(25, 1, size)
        return p, self.lib.rpcmem_to_fd(p) if p else -1

    def queue(self, domain: int = 3) -> tuple[int, int | None, int]:
        q, qid = C.c_void_p(), C.c_uint64()
        err = self.code(self.lib.dspqueue_create(domain, 0, 4096, 4096, None, None, None, C.byref(q)))
        if err:
            return err, None, 0
        return self.code(self.lib.dspqueue_export(q, C.byref(qid))), q.value, qid.value

    def write(self, q: int, bufs: list[tuple[int, int, int]], msg: bytes, timeout: int = TIMEOUT_NONE) -> int:
        arr = (DspqueueBuffer * max(1, len(bufs)))()
        for i, (fd, off, size) in enumerate(bufs):
            arr[i].fd, arr[i].offset, arr[i].size = fd, off, size
        return self.code(self.lib.dspqueue_write(q, 0, len(bufs), arr, len(msg), msg, timeout))

    def read(self, q: int, timeout: int = TIMEOUT_NONE, max_bufs: int = 4, max_msg: int = 4096):
        flags, nb, ml = C.c_uint32(), C.c_uint32(), C.c_uint32()
        arr = (DspqueueBuffer * max_bufs)()
        msg = C.create_string_buffer(max_msg)
        err = self.code(self.lib.dspqueue_read(q, C.byref(flags), max_bufs, C.byref(nb), arr, max_msg,
                                               C.byref(ml), msg, timeout))
        bufs = [(arr[i].fd, arr[i].offset, arr[i].size, arr[i].ptr) for i in range(nb.value)] if not err else []
        return err, bufs, msg.raw[:ml.value] if not err else b""

    def session_control(self, req: int, struct) -> int:
        return self.code(self.lib.remote_session_control(req, C.byref(struct), C.sizeof(struct)))


def run_host(lib: Path, code: str, *, env: dict[str, str] | None = None, timeout: float = 60
             ) -> subprocess.CompletedProcess:
    """Runs ``code`` in a Python process of its own with ``host`` = Host(lib) (and this module's
    names) in scope; returns the finished process (stdout, stderr as text)."""
    prelude = "from tests.infra.vnpu_host import *\nimport ctypes as C, json, os, sys, time, threading\n" \
              f"host = Host({str(lib)!r})\n"
    full = dict(os.environ)
    for k in [k for k in full if k.startswith("HEXBUILD_VNPU_")]:
        del full[k]
    full["PYTHONPATH"] = str(ROOT)
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=full,
                          cwd=ROOT, timeout=timeout)


def build(out: Path, *archs: str) -> dict[str, Path]:
    """The library built by hexbuild/dsp/host/build.sh into out/ARCH/libcdsprpc.so."""
    subprocess.run([str(HOST_SRC / "build.sh"), str(out), *archs], check=True, capture_output=True, text=True)
    return {a: out / a / "libcdsprpc.so" for a in archs}


def have_aarch64_compiler() -> bool:
    return bool(shutil.which("aarch64-linux-gnu-gcc") or shutil.which("clang"))


@pytest.fixture(scope="session")
def vnpu_host_libs(tmp_path_factory) -> dict[str, Path]:
    archs = ["x86_64"] + (["aarch64"] if have_aarch64_compiler() else [])
    return build(tmp_path_factory.mktemp("vnpu-host"), *archs)


@pytest.fixture(scope="session")
def vnpu_stub(tmp_path_factory) -> Path:
    """The stub DSP as an executable (HEXBUILD_VNPU_QEMU), whatever the checkout's file modes."""
    exe = tmp_path_factory.mktemp("vnpu-stub") / "stub-dsp"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {STUB} \"$@\"\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture(scope="session")
def vnpu_real_dsp(vnpu_parts) -> dict[str, str]:
    """The real DSP side: hexbuild's patched qemu-hexagon and the virtual NPU's DSP runtime
    (hexbuild/dsp/vnpu/), made by hexbuild (tests/infra/qemu_npu.py), as HEXBUILD_VNPU_QEMU /
    HEXBUILD_VNPU_RUNTIME take them."""
    return {"HEXBUILD_VNPU_QEMU": str(vnpu_parts.qemu), "HEXBUILD_VNPU_RUNTIME": str(vnpu_parts.runtime)}


@pytest.fixture(scope="session")
def vnpu_hexagon_package(real_hexagon_package) -> Path:
    """The real Hexagon build's package (tests/infra/real_hexagon.py): llama-completion,
    test-backend-ops, libggml-hexagon.so and the v73/v79 skels of the 0.3.28 tree."""
    return real_hexagon_package
