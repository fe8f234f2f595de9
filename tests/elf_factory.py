"""Genuine ELF files for tests, compiled with clang-19 and ld.lld-19 (no SDK, no NDK needed).

    from tests import elf_factory as ef
    ef.hexagon_so(path, "v73")                                    # NPU skel: QDSP6, e_flags 0x73
    ef.hexagon_so(path, "v73", hidden=("op_matmul",))             # op_matmul not in .dynsym
    ef.aarch64_so(path, os="android", soname="libllama.so", needed=["libggml.so", "libc.so"])
    ef.aarch64_exe(path, os="android", needed=["libllama.so"])    # PIE, PT_INTERP /system/bin/linker64
    ef.aarch64_exe(path, os="linux", interpreter="/other/ld.so")  # any interpreter
    ef.x86_64_exe(path)                                           # the wrong machine
    pkg = ef.make_package(tmp_path, os="android", htp=["v68", "v73"])  # → tmp_path/"llama.cpp"

Every function writes ``out`` (parents created) and returns it as a Path. DT_NEEDED entries
come from stub libraries built with that SONAME, so any name can be needed. Compiled files are
cached by content under $HEXBUILD_TEST_CACHE/elf (default ~/.cache/hexbuild-tests/elf): the
first run compiles, later runs copy. clang 19 knows Hexagon v68, v69, v71 and v73 (not v75+).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

CLANG = "clang-19"
SKEL_SYMBOL = "htp_iface_skel_handle_invoke"
INTERPRETERS = {"android": "/system/bin/linker64", "linux": "/lib/ld-linux-aarch64.so.1"}
TRIPLES = {"android": "aarch64-linux-android31", "linux": "aarch64-linux-gnu"}
SYSTEM_NEEDED = {"android": ["libc.so", "libm.so", "libdl.so"],
                 "linux": ["libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"]}
_COMMON = ["-O2", "-nostdlib", "-fuse-ld=lld", "-Wno-unused-command-line-argument"]


def cache_dir() -> Path:
    base = os.environ.get("HEXBUILD_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hexbuild-tests")
    path = Path(base) / "elf"
    path.mkdir(parents=True, exist_ok=True)
    return path


_clang_version: str | None = None


def _clang_id() -> str:
    global _clang_version
    if _clang_version is None:
        if shutil.which(CLANG) is None or shutil.which("ld.lld-19") is None:
            raise RuntimeError("clang-19 and ld.lld-19 are needed for genuine ELF test files: run scripts/setup-test-env.sh")
        _clang_version = subprocess.run([CLANG, "--version"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    return _clang_version


def _compile(source: str, flags: Sequence[str], inputs: Sequence[Path] = ()) -> Path:
    """Compile+link ``source`` with ``flags`` (plus ``inputs`` on the link line); cached by content."""
    key_data = json.dumps([_clang_id(), source, list(flags), [p.name for p in inputs]]).encode()
    key = hashlib.sha256(key_data).hexdigest()[:24]
    cached = cache_dir() / f"{key}.elf"
    if cached.exists():
        return cached
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        src = Path(tmp) / "src.c"
        src.write_text(source)
        built = Path(tmp) / "out.elf"
        argv = [CLANG, *flags, *_COMMON, str(src), *map(str, inputs), "-o", str(built)]
        cp = subprocess.run(argv, capture_output=True, text=True)
        if cp.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{cp.stderr}")
        os.replace(built, cached)  # atomic: parallel test runs may race on the same key
    return cached


def _place(cached: Path, out: Path | str, mode: int) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.is_symlink() or out.exists():
        out.unlink()
    shutil.copyfile(cached, out)
    out.chmod(mode)
    return out


def _c_name(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _functions(exports: Iterable[str], hidden: Iterable[str]) -> str:
    body = []
    for i, name in enumerate(exports):
        body.append(f"int {name}(int x) {{ return x * {i + 3} + 1; }}")
    for i, name in enumerate(hidden):
        body.append(f'__attribute__((visibility("hidden"))) int {name}(int x) {{ return x ^ {i + 7}; }}')
    return "\n".join(body) + "\n"


def _stub(soname: str, triple: str) -> Path:
    """A shared object whose only job is to carry SONAME ``soname`` into DT_NEEDED."""
    source = f"int hexbuild_stub_{_c_name(soname)}(void) {{ return 0; }}\n"
    built = _compile(source, [f"--target={triple}", "-fPIC", "-shared", f"-Wl,-soname,{soname}"])
    # The link line names the file; lld records its SONAME, so the file name does not matter.
    return built


def _needed_inputs(needed: Iterable[str], triple: str) -> tuple[list[str], list[Path]]:
    stubs = [_stub(n, triple) for n in needed]
    return (["-Wl,--no-as-needed"] if stubs else []), stubs


# -- Hexagon ------------------------------------------------------------------------------------

def hexagon_so(out: Path | str, version: str = "v73", *, exports: Sequence[str] = (SKEL_SYMBOL, "op_matmul"),
               hidden: Sequence[str] = (), mode: int = 0o644) -> Path:
    """A Hexagon (QDSP6) shared object built for ``version`` (v68, v69, v71, v73) with HVX,
    exporting ``exports`` and defining ``hidden`` with hidden visibility."""
    arch = version.lstrip("vV")
    source = ("typedef int HVX_Vector __attribute__((__vector_size__(128), __aligned__(128)));\n"
              "void hexbuild_hvx_add(const HVX_Vector *a, const HVX_Vector *b, HVX_Vector *c, int n) {\n"
              "  for (int i = 0; i < n; i++) c[i] = __builtin_HEXAGON_V6_vaddw_128B(a[i], b[i]);\n}\n"
              + _functions(exports, hidden))
    flags = ["--target=hexagon", f"-mv{arch}", "-mhvx", "-mhvx-length=128b", "-fPIC", "-shared"]
    return _place(_compile(source, flags), out, mode)


# -- AArch64 ------------------------------------------------------------------------------------

def aarch64_so(out: Path | str, *, os: str = "android", soname: str | None = None, needed: Sequence[str] = (),
               exports: Sequence[str] = ("ggml_fn",), mode: int = 0o755) -> Path:
    """An AArch64 shared object with SONAME ``soname`` (default: the file name) and DT_NEEDED
    ``needed`` (any names)."""
    out = Path(out)
    triple = TRIPLES[os]
    extra, inputs = _needed_inputs(needed, triple)
    flags = [f"--target={triple}", "-fPIC", "-shared", f"-Wl,-soname,{soname or out.name}", *extra]
    return _place(_compile(_functions(exports, ()), flags, inputs), out, mode)


def aarch64_exe(out: Path | str, *, os: str = "android", needed: Sequence[str] = (),
                interpreter: str | None = None, pie: bool = True, mode: int = 0o755) -> Path:
    """An AArch64 program with PT_INTERP ``interpreter`` (default: the OS's) and DT_NEEDED
    ``needed``; PIE unless ``pie=False``."""
    triple = TRIPLES[os]
    extra, inputs = _needed_inputs(needed, triple)
    flags = [f"--target={triple}", f"-Wl,--dynamic-linker={interpreter or INTERPRETERS[os]}", "-Wl,-e,_start", *extra]
    flags += ["-fPIE", "-pie"] if pie else ["-fno-pie", "-no-pie"]
    source = "int main(void) { return 0; }\nvoid _start(void) { main(); for (;;) ; }\n"
    return _place(_compile(source, flags, inputs), out, mode)


# -- other machines -----------------------------------------------------------------------------

def x86_64_exe(out: Path | str, *, mode: int = 0o755) -> Path:
    flags = ["--target=x86_64-linux-gnu", "-fPIE", "-pie", "-Wl,--dynamic-linker=/lib64/ld-linux-x86-64.so.2",
             "-Wl,-e,_start"]
    source = "int main(void) { return 0; }\nvoid _start(void) { main(); for (;;) ; }\n"
    return _place(_compile(source, flags), out, mode)


def x86_64_so(out: Path | str, *, mode: int = 0o755) -> Path:
    out = Path(out)
    flags = ["--target=x86_64-linux-gnu", "-fPIC", "-shared", f"-Wl,-soname,{out.name}"]
    return _place(_compile(_functions(["ggml_fn"], ()), flags), out, mode)


# -- a whole package ----------------------------------------------------------------------------

# name → libraries it needs from the package (system libraries are added per OS)
_LIBS = {
    "libggml-base": [],
    "libggml-cpu": ["libggml-base"],
    "libggml-opencl": ["libggml-base"],
    "libggml-hexagon": ["libggml-base"],
    "libggml": ["libggml-base", "libggml-cpu", "libggml-opencl", "libggml-hexagon"],
    "libllama": ["libggml", "libggml-base"],
}
_EXTRA_SYSTEM = {"libggml-opencl": {"android": ["libOpenCL.so"], "linux": ["libOpenCL.so.1"]},
                 "libggml-hexagon": {"android": ["liblog.so"], "linux": []}}
PROGRAMS = ("llama-cli", "llama-bench", "test-backend-ops")
LINUX_VERSION = "0.9.4"  # GGML_VERSION: CMake installs libX.so -> libX.so.0 -> libX.so.0.9.4 on Linux


def _lib_file_names(name: str, os: str) -> tuple[str, str]:
    """(file to write, SONAME): Android gets plain names (CMake does not version sonames
    there), Linux gets versioned files with symlinks."""
    if os == "android":
        return f"{name}.so", f"{name}.so"
    return f"{name}.so.{LINUX_VERSION}", f"{name}.so.0"


def make_package(root: Path | str, os: str = "android", htp: Sequence[str] = ("v68", "v69", "v73"), *,
                 name: str = "llama.cpp", hexagon: bool = True) -> Path:
    """A realistic install prefix ``root/name`` as `cmake --install` lays it out: bin/ with
    programs and a script, lib/ with the ggml/llama libraries, the NPU skels for ``htp``, cmake
    and pkg-config files, include/ with headers. Returns the package directory."""
    pkg = Path(root) / name
    lib, bin_, inc = pkg / "lib", pkg / "bin", pkg / "include"
    system = SYSTEM_NEEDED[os]
    for lib_name, deps in _LIBS.items():
        if not hexagon:  # a build without the Hexagon backend (GGML_HEXAGON=OFF, the open toolchain)
            if lib_name == "libggml-hexagon":
                continue
            deps = [d for d in deps if d != "libggml-hexagon"]
        file_name, soname = _lib_file_names(lib_name, os)
        needed = [_lib_file_names(d, os)[1] for d in deps] + _EXTRA_SYSTEM.get(lib_name, {}).get(os, []) + system
        aarch64_so(lib / file_name, os=os, soname=soname, needed=needed, exports=[_c_name(lib_name) + "_init"])
        if os == "linux":
            (lib / soname).symlink_to(file_name)
            (lib / f"{lib_name}.so").symlink_to(soname)
    for v in htp:
        hexagon_so(lib / f"libggml-htp-{v}.so", v)
    prog_needed = [_lib_file_names(d, os)[1] for d in ("libllama", "libggml", "libggml-base")] + system
    for prog in PROGRAMS:
        aarch64_exe(bin_ / prog, os=os, needed=prog_needed)
    script = bin_ / "convert_hf_to_gguf.py"
    script.write_text("#!/usr/bin/env python3\nprint('convert')\n")
    script.chmod(0o755)
    (lib / "cmake" / "llama").mkdir(parents=True)
    (lib / "cmake" / "llama" / "llama-config.cmake").write_text("set(LLAMA_VERSION 0.0.1)\n")
    (lib / "pkgconfig").mkdir()
    (lib / "pkgconfig" / "llama.pc").write_text(f"prefix={pkg}\nName: llama\nLibs: -lllama\n")
    inc.mkdir()
    for header in ("llama.h", "ggml.h", "ggml-hexagon.h"):
        (inc / header).write_text(f"#pragma once\n/* {header} */\n")
        (inc / header).chmod(0o644)
    return pkg
