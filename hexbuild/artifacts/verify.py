"""`hexbuild verify`: is an installed package (bin/, lib/, include/) what a phone can run?

Checks the NPU skels (Hexagon ELF, arch from e_flags matching the file name, the FastRPC entry
point exported), the host side (AArch64 ELF of the right kind for the OS, the OS's program
interpreter) and that every DT_NEEDED resolves inside lib/ or to a library the OS provides
(hexbuild/data/system_libs.toml). Pure: builds a report, prints nothing.
"""

from __future__ import annotations

import functools
import os as _os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .elf import HTP_NAME, ElfInfo, NotElf, htp_key, is_elf, parse_htp_versions, read_elf

OSES = ("android", "linux")
HOST_LIB = "libggml-hexagon.so"
SKEL_SYMBOL = "htp_iface_skel_handle_invoke"  # what the FastRPC loader asks for (skel URI)
MATMUL_SYMBOL = "op_matmul"                    # the matmul entry point with the HVX Q4_0 path
_SHARED_NAME = re.compile(r"\.so(\.\d+)*$")

OK, WARN, FAIL = "ok", "warn", "fail"
_A_PROGRAM = {"android": "an Android program", "linux": "a Linux program"}
_OS_NAME = {"android": "Android", "linux": "Linux"}
PACKAGE = "(package)"


@dataclass(frozen=True)
class SystemLibs:
    interpreter: str
    libraries: frozenset[str]
    hints: dict[str, str]


@functools.lru_cache(maxsize=None)
def system_libs(os: str) -> SystemLibs:
    from ..data import table

    data = table("system_libs")
    if os not in data:
        raise UsageError(f"unknown OS {os!r}: expected one of {', '.join(OSES)}")
    table = data[os]
    return SystemLibs(table["interpreter"], frozenset(table["libraries"]), dict(table.get("hints", {})))


@dataclass(frozen=True)
class Check:
    file: str
    check: str
    status: str  # ok | warn | fail
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"file": self.file, "check": self.check, "status": self.status, "detail": self.detail}


@dataclass
class VerifyReport:
    package: str
    os: str
    htp_versions: list[str]           # found in lib/
    expected_htp: list[str] | None    # asked for (None: whatever was found)
    checks: list[Check] = field(default_factory=list)
    glibc: dict[str, Any] | None = None  # Linux: {"limit", "needs" (highest per family), "files"}
    toolchain: str = "vendor"         # open: no NPU libraries expected
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return sum(c.status == FAIL for c in self.checks)

    @property
    def warnings(self) -> int:
        return sum(c.status == WARN for c in self.checks)

    @property
    def ok(self) -> bool:
        return self.failures == 0

    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "package": self.package, "os": self.os, "htp_versions": self.htp_versions,
                "expected_htp": self.expected_htp, "checks": [c.to_json() for c in self.checks],
                "warnings": self.warnings, "failures": self.failures, "toolchain": self.toolchain,
                "notes": self.notes, **({"glibc": self.glibc} if self.glibc is not None else {})}


def verify_package(pkg: Path, *, os: str, htp_versions: list[str] | None = None,
                   glibc: str | None = None, toolchain: str | None = None) -> VerifyReport:
    """Check the package at ``pkg`` for ``os``; ``htp_versions`` must all be present (default:
    the versions found); Linux files must load on a system with ``glibc`` (e.g. "2.31") when it
    is given. ``toolchain`` "open" expects no NPU libraries (default: what the package's
    manifest says, else "vendor"). Raises UsageError only for bad arguments; findings go in the
    report."""
    pkg = Path(pkg)
    if not pkg.is_dir():
        raise UsageError(f"package directory not found: {pkg}" if not pkg.exists()
                         else f"not a directory: {pkg}", hint="pass the install prefix, e.g. pkg-snapdragon/llama.cpp")
    if os not in OSES:
        raise UsageError(f"unknown OS {os!r}: expected one of {', '.join(OSES)}")
    expected = parse_htp_versions(htp_versions) if htp_versions is not None else None
    if glibc is not None:
        if os != "linux":
            raise UsageError("--glibc applies to Linux packages (--os linux)")
        if not re.fullmatch(r"\d+\.\d+", glibc):
            raise UsageError(f"--glibc must be a glibc version like 2.31, got {glibc!r}")
    if toolchain is None:
        from .manifest import package_toolchain

        toolchain = package_toolchain(pkg)
    return _Verifier(pkg, os, expected, glibc, toolchain).run()


class _Verifier:
    def __init__(self, pkg: Path, os: str, expected: list[str] | None, glibc: str | None = None,
                 toolchain: str = "vendor"):
        self.pkg = pkg
        self.glibc = glibc
        self.glibc_files: dict[str, dict[str, str]] = {}
        self.toolchain = toolchain
        self.notes: list[str] = []
        self.root = pkg.resolve()
        self.os = os
        self.sys = system_libs(os)
        self.expected = expected
        self.checks: list[Check] = []

    def add(self, file: str, check: str, status: str, detail: str) -> None:
        self.checks.append(Check(file, check, status, detail))

    def run(self) -> VerifyReport:
        lib, bin_ = self.pkg / "lib", self.pkg / "bin"
        lib_entries = _entries(lib)
        provided = {name for name, path in lib_entries if self._resolves_to_file(path)}
        found = sorted((m.group(1) for name, _ in lib_entries if (m := HTP_NAME.match(name))), key=htp_key)

        if lib.is_dir():
            self.add("lib/", "present", OK, f"{len(lib_entries)} entries")
        else:
            self.add("lib/", "present", FAIL, "no lib/ directory: is this an install prefix?")
        if bin_.is_dir():
            self.add("bin/", "present", OK, f"{len(_entries(bin_))} entries")
        else:
            self.add("bin/", "present", WARN, "no bin/ directory: no programs to run")
        if self.toolchain == "open":
            self._check_no_npu(found, provided)
        else:
            self._check_htp_set(found)
            if HOST_LIB not in provided:
                self.add(f"lib/{HOST_LIB}", "present", FAIL,
                         "missing: the CPU side of the Hexagon backend (built with GGML_HEXAGON=ON?)")

        for name, path in lib_entries:
            rel = f"lib/{name}"
            m = HTP_NAME.match(name)
            if m:
                if path.is_symlink() and not self._check_symlink(rel, path):
                    continue
                self._check_htp(rel, path, m.group(1))
            elif _SHARED_NAME.search(name) and not path.is_dir():
                if path.is_symlink():
                    self._check_symlink(rel, path)
                else:
                    self._check_host_lib(rel, path, provided)
        for name, path in _entries(bin_):
            rel = f"bin/{name}"
            if path.is_symlink():
                self._check_symlink(rel, path)
            elif path.is_file():
                self._check_program(rel, path, provided)
        report = VerifyReport(str(self.pkg), self.os, found, self.expected, self.checks, toolchain=self.toolchain,
                              notes=self.notes)
        if self.os == "linux":
            from .glibc import summary

            report.glibc = {"limit": self.glibc, "needs": summary(self.glibc_files), "files": self.glibc_files}
        return report

    # -- package level -----------------------------------------------------------------------
    def _check_htp_set(self, found: list[str]) -> None:
        if self.expected is None:
            if not found:
                self.add("lib/libggml-htp-v*.so", "present", FAIL, "no NPU libraries (libggml-htp-vNN.so) in lib/")
            return
        for v in self.expected:
            if v not in found:
                self.add(f"lib/libggml-htp-{v}.so", "present", FAIL, f"missing: {v} was expected")
        for v in found:
            if v not in self.expected:
                self.add(f"lib/libggml-htp-{v}.so", "expected", WARN,
                         f"{v} is in the package but was not expected ({', '.join(self.expected) or 'none'}): left over from an older build?")

    def _check_no_npu(self, found: list[str], provided: set[str]) -> None:
        """An open-toolchain package (GGML_HEXAGON=OFF): no NPU libraries is expected, and said."""
        npu = [f"lib/libggml-htp-{v}.so" for v in found] + ([f"lib/{HOST_LIB}"] if HOST_LIB in provided else [])
        if npu:
            self.add("lib/", "no NPU libraries", WARN, f"{', '.join(npu)} in an open-toolchain package, which "
                                                        "builds none: left over from another build?")
            return
        note = ("no NPU libraries, as expected: built with the open toolchain (GGML_HEXAGON=OFF); "
                "the programs run on the CPU only")
        self.add("lib/", "no NPU libraries", OK, note)
        self.notes.append(note)

    # -- one file ----------------------------------------------------------------------------
    def _resolves_to_file(self, path: Path) -> bool:
        if not path.is_symlink():
            return path.is_file()
        target = path.resolve()
        return target.is_file() and target.is_relative_to(self.root)

    def _check_symlink(self, rel: str, path: Path) -> bool:
        link = _os.readlink(path)
        target = path.resolve()
        if not target.exists():
            self.add(rel, "symlink", FAIL, f"dangling: -> {link}")
        elif not target.is_relative_to(self.root):
            self.add(rel, "symlink", FAIL, f"points outside the package: -> {link}")
        elif not target.is_file():
            self.add(rel, "symlink", FAIL, f"not a file: -> {link}")
        else:
            self.add(rel, "symlink", OK, f"-> {link}")
            return True
        return False

    def _read(self, rel: str, path: Path, symbols: tuple[str, ...] = ()) -> ElfInfo | None:
        try:
            return read_elf(path, symbols)
        except NotElf as e:
            self.add(rel, "format", FAIL, str(e))
        except OSError as e:
            self.add(rel, "format", FAIL, f"cannot read: {e.strerror or e}")
        return None

    def _check_htp(self, rel: str, path: Path, version: str) -> None:
        info = self._read(rel, path, (SKEL_SYMBOL, MATMUL_SYMBOL))
        if info is None:
            return
        if info.machine != "QDSP6" or info.kind != "DYN":
            self.add(rel, "format", FAIL, f"{info.describe()}, expected a Hexagon (QDSP6) shared object")
            return
        self.add(rel, "format", OK, info.describe())
        if info.arch == version:
            self.add(rel, "arch", OK, f"e_flags {info.e_flags:#x} -> {info.arch}")
        else:
            self.add(rel, "arch", FAIL, f"e_flags {info.e_flags:#x} -> {info.arch or 'no arch'}, "
                                        f"but the file name says {version}")
        state = info.symbols[SKEL_SYMBOL]
        if state == "exported":
            self.add(rel, "skel symbol", OK, f"{SKEL_SYMBOL} exported")
        else:
            why = {"hidden": "defined but hidden (not in .dynsym)", "undefined": "undefined",
                   "absent": "not defined"}[state]
            self.add(rel, "skel symbol", FAIL, f"{SKEL_SYMBOL} {why}: the FastRPC loader cannot open this skel")
        state = info.symbols[MATMUL_SYMBOL]
        if state == "exported":
            self.add(rel, "matmul symbol", OK, f"{MATMUL_SYMBOL} exported")
        else:
            why = {"hidden": "defined but hidden (not in .dynsym)", "undefined": "undefined",
                   "absent": "not found (stripped or renamed?)"}[state]
            self.add(rel, "matmul symbol", WARN, f"{MATMUL_SYMBOL} {why}: the HVX matmul entry point "
                                                 "is not visible to profilers and symbol lookups")
        if info.no_hmx:
            self.add(rel, "hmx", WARN, f"built without HMX: {', '.join(info.no_hmx)} empty (the toolchain "
                                       "cannot assemble HMX); only the HVX paths are in this skel")

    def _check_host_lib(self, rel: str, path: Path, provided: set[str]) -> None:
        info = self._read(rel, path)
        if info is None:
            return
        if info.machine != "AArch64" or info.bits != 64 or info.kind != "DYN":
            self.add(rel, "format", FAIL, f"{info.describe()}, expected an AArch64 shared object")
            return
        soname = f" (soname {info.soname})" if info.soname else ""
        self.add(rel, "format", OK, info.describe() + soname)
        self._check_needed(rel, info, provided)
        self._check_glibc(rel, path)

    def _check_program(self, rel: str, path: Path, provided: set[str]) -> None:
        if not is_elf(path):
            self.add(rel, "format", OK, f"not ELF: {_describe_non_elf(path)}")
            return
        info = self._read(rel, path)
        if info is None:
            return
        if info.machine != "AArch64" or info.bits != 64 or info.kind != "EXEC":
            self.add(rel, "format", FAIL, f"{info.describe()}, expected an AArch64 executable")
            return
        self.add(rel, "format", OK, info.describe())
        want = self.sys.interpreter
        if info.interpreter is None:
            if info.needed:
                self.add(rel, "interpreter", FAIL, f"no PT_INTERP but DT_NEEDED entries: needs {want}")
            else:
                self.add(rel, "interpreter", OK, "static executable")
        elif info.interpreter != want:
            self.add(rel, "interpreter", FAIL, f"{info.interpreter}; {_A_PROGRAM[self.os]} needs {want}")
        elif self.os == "android" and info.e_type != "ET_DYN":
            self.add(rel, "interpreter", FAIL, f"{want}, but not position-independent: "
                                               "Android's linker runs PIE programs only")
        else:
            self.add(rel, "interpreter", OK, info.interpreter)
        self._check_needed(rel, info, provided)
        self._check_glibc(rel, path)

    def _check_glibc(self, rel: str, path: Path) -> None:
        """The highest GLIBC_/GLIBCXX_/CXXABI_ version the file needs; with a limit, a file a
        system of that glibc cannot load fails."""
        if self.os != "linux":
            return
        from .glibc import key, needs

        found = needs(path)
        if not found:
            return
        self.glibc_files[rel] = found
        detail = ", ".join(f"{fam}_{v}" for fam, v in found.items())
        if self.glibc and "GLIBC" in found and key(found["GLIBC"]) > key(self.glibc):
            self.add(rel, "glibc", FAIL, f"needs GLIBC_{found['GLIBC']}: a glibc {self.glibc} system cannot load it")
        else:
            self.add(rel, "glibc", OK, f"needs {detail}")

    def _check_needed(self, rel: str, info: ElfInfo, provided: set[str]) -> None:
        ours = [n for n in info.needed if n in provided]
        system = [n for n in info.needed if n not in provided and n in self.sys.libraries]
        missing = [n for n in info.needed if n not in provided and n not in self.sys.libraries]
        if missing:
            parts = [f"{n} ({self.sys.hints[n]})" if n in self.sys.hints else n for n in missing]
            self.add(rel, "needed", FAIL, f"unresolved: {', '.join(parts)}; neither in lib/ nor a {_OS_NAME[self.os]} system library")
            return
        if not info.needed:
            self.add(rel, "needed", OK, "no DT_NEEDED")
            return
        where = []
        if ours:
            where.append(f"{', '.join(ours)} (package)")
        if system:
            where.append(f"{', '.join(system)} (system)")
        self.add(rel, "needed", OK, "; ".join(where))


def _entries(directory: Path) -> list[tuple[str, Path]]:
    try:
        return sorted((p.name, p) for p in directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _describe_non_elf(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(128)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if head.startswith(b"#!"):
        line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        return f"script ({line})"
    return "data file"
