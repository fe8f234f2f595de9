"""What hexbuild needs to know about one ELF file: machine, Hexagon arch, kind, interpreter,
DT_NEEDED, SONAME and whether a symbol is exported. pyelftools is imported lazily."""

from __future__ import annotations

import dataclasses
import os
import re
from contextlib import contextmanager

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

ELF_MAGIC = b"\x7fELF"
EM_QDSP6 = 164
# Where hexbuild's toolchain double names the NPU units it built empty (no HMX assembler).
NO_HMX_SECTION = ".hexbuild.no_hmx"
EM_AARCH64 = 183

# pyelftools' machine names → the names hexbuild prints and writes into manifests.
_MACHINE_NAMES = {"EM_AARCH64": "AArch64", "EM_QDSP6": "QDSP6", "EM_X86_64": "x86-64",
                  "EM_386": "x86", "EM_ARM": "ARM", "EM_RISCV": "RISC-V"}

# Hexagon e_flags bits[11:0] name the processor version. From V60 on the value is the version
# written in hex (0x73 → v73); the older ones are an enumeration. Bit 15 marks the "tiny" cores.
_HEXAGON_OLD = {0x1: "v2", 0x2: "v3", 0x3: "v4", 0x4: "v5", 0x5: "v55"}
_HEXAGON_MACH_MASK = 0xFFF
_HEXAGON_TINY = 0x8000
_DF_1_PIE = 0x08000000


class NotElf(Exception):
    """The file is not ELF, or too damaged for pyelftools to read."""


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def hexagon_arch(e_flags: int) -> str | None:
    """``0x73`` → ``"v73"``; None when the flags name no version."""
    mach = e_flags & _HEXAGON_MACH_MASK
    if mach in _HEXAGON_OLD:
        name = _HEXAGON_OLD[mach]
    else:
        digits = f"{mach:x}"
        if mach == 0 or not digits.isdigit():
            return None
        name = f"v{digits}"
    return name + ("t" if e_flags & _HEXAGON_TINY else "")


@dataclass(frozen=True)
class ElfInfo:
    machine: str               # "AArch64", "QDSP6", "x86-64", ...
    bits: int                  # 32 or 64
    e_type: str                # "ET_DYN", "ET_EXEC", ...
    e_flags: int
    interpreter: str | None    # PT_INTERP
    needed: tuple[str, ...]    # DT_NEEDED, in order
    soname: str | None
    pie: bool                  # DT_FLAGS_1 has DF_1_PIE
    symbols: dict[str, str]    # queried name → "exported" | "hidden" | "undefined" | "absent"
    version_needs: tuple[str, ...] = ()  # .gnu.version_r names: GLIBC_2.34, GLIBCXX_3.4.30, ...
    no_hmx: tuple[str, ...] = ()  # NPU units a toolchain without HMX built empty (NO_HMX_SECTION)

    @property
    def arch(self) -> str | None:
        return hexagon_arch(self.e_flags) if self.machine == "QDSP6" else None

    @property
    def kind(self) -> str:
        """EXEC for programs (including PIE), DYN for shared objects, else REL/CORE/..."""
        if self.e_type == "ET_EXEC":
            return "EXEC"
        if self.e_type == "ET_DYN":
            # A PIE is ET_DYN too; lld and the NDK mark it with DF_1_PIE. Older linkers do
            # not, so a PT_INTERP without a SONAME also counts as a program.
            if self.pie or (self.interpreter and not self.soname):
                return "EXEC"
            return "DYN"
        return self.e_type.removeprefix("ET_")

    @property
    def static(self) -> bool:
        return self.kind == "EXEC" and self.interpreter is None and not self.needed

    def describe(self) -> str:
        what = {"EXEC": "executable", "DYN": "shared object", "REL": "object file"}.get(self.kind, self.kind)
        if self.kind == "EXEC" and self.e_type == "ET_DYN":
            what = "PIE executable"
        arch = f" {self.arch}" if self.arch else ""
        return f"{self.machine}{arch} {what}"

    def summary(self) -> dict[str, Any]:
        """The manifest's ``elf`` object (``no_hmx`` only on a skel built without HMX)."""
        out: dict[str, Any] = {"machine": self.machine, "arch": self.arch, "type": self.kind}
        if self.no_hmx:
            out["no_hmx"] = list(self.no_hmx)
        return out


# Inside parse_once(), each file is parsed once: a build verifies its fresh package and then
# writes its manifest, both reading every ELF file, and nothing else writes the package
# meanwhile. Keyed by the file's identity and times all the same.
_PARSED: dict[tuple, tuple[frozenset[str], ElfInfo]] | None = None


@contextmanager
def parse_once() -> Iterator[None]:
    global _PARSED
    outer, _PARSED = _PARSED, ({} if _PARSED is None else _PARSED)
    try:
        yield
    finally:
        _PARSED = outer


def read_elf(path: Path, symbols: tuple[str, ...] = ()) -> ElfInfo:
    """Parse ``path``; ``symbols`` are looked up in .dynsym (exported) and .symtab (hidden)."""
    memo, key = _PARSED, None
    if memo is not None:
        try:
            st = os.stat(path)
            key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        except OSError:
            pass
    hit = memo.get(key) if memo is not None and key else None
    if hit is not None and hit[0] >= set(symbols):
        return dataclasses.replace(hit[1], symbols={n: hit[1].symbols[n] for n in symbols})
    info = _read_elf(path, symbols)
    if memo is not None and key is not None:
        memo[key] = (frozenset(symbols), info)
    return info


def _read_elf(path: Path, symbols: tuple[str, ...]) -> ElfInfo:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            if f.read(4) != ELF_MAGIC:
                raise NotElf("not an ELF file")
            f.seek(0)
            elf = ELFFile(f)
            return _info(elf, symbols)
    except ELFError as e:
        raise NotElf(f"damaged ELF file: {e}") from None
    except (ValueError, KeyError, IndexError) as e:  # pyelftools on truncated files
        raise NotElf(f"damaged ELF file: {type(e).__name__}: {e}") from None


def _info(elf, symbols: tuple[str, ...]) -> ElfInfo:
    machine_raw = elf.header.e_machine
    if isinstance(machine_raw, int):
        machine = {EM_QDSP6: "QDSP6", EM_AARCH64: "AArch64"}.get(machine_raw, f"machine {machine_raw}")
    else:
        machine = _MACHINE_NAMES.get(machine_raw, machine_raw.removeprefix("EM_"))
    interpreter = None
    needed: list[str] = []
    soname = None
    pie = False
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_INTERP":
            interpreter = seg.get_interp_name()
        elif seg["p_type"] == "PT_DYNAMIC":
            for tag in seg.iter_tags():
                t = tag.entry.d_tag
                if t == "DT_NEEDED":
                    needed.append(tag.needed)
                elif t == "DT_SONAME":
                    soname = tag.soname
                elif t == "DT_FLAGS_1":
                    pie = bool(tag.entry.d_val & _DF_1_PIE)
    return ElfInfo(machine=machine, bits=elf.elfclass, e_type=str(elf.header.e_type),
                   e_flags=int(elf.header.e_flags), interpreter=interpreter, needed=tuple(needed),
                   soname=soname, pie=pie, symbols={n: _symbol_state(elf, n) for n in symbols},
                   version_needs=_version_needs(elf), no_hmx=_no_hmx(elf) if machine == "QDSP6" else ())


def _no_hmx(elf) -> tuple[str, ...]:
    """The units the toolchain built empty because it cannot assemble HMX: hexbuild's toolchain
    double (open LLVM) leaves each one's name, NUL-terminated, in NO_HMX_SECTION."""
    sec = elf.get_section_by_name(NO_HMX_SECTION)
    if sec is None or sec["sh_type"] == "SHT_NOBITS":
        return ()
    return tuple(dict.fromkeys(n.decode("utf-8", "replace") for n in sec.data().split(b"\0") if n.strip()))


def _version_needs(elf) -> tuple[str, ...]:
    from elftools.elf.gnuversions import GNUVerNeedSection

    return tuple(aux.name for section in elf.iter_sections() if isinstance(section, GNUVerNeedSection)
                 for _verneed, auxiliaries in section.iter_versions() for aux in auxiliaries)


def _symbol_table(elf, kind: str):
    for sec in elf.iter_sections():
        if sec["sh_type"] == kind:
            return sec
    return None


def _symbol_state(elf, name: str) -> str:
    dynsym = _symbol_table(elf, "SHT_DYNSYM")
    undefined = False
    for sym in (dynsym.get_symbol_by_name(name) or []) if dynsym is not None else []:
        if sym["st_shndx"] == "SHN_UNDEF":
            undefined = True
            continue
        if (sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")):
            return "exported"
    symtab = _symbol_table(elf, "SHT_SYMTAB")
    for sym in (symtab.get_symbol_by_name(name) or []) if symtab is not None else []:
        if sym["st_shndx"] != "SHN_UNDEF":
            return "hidden"
    return "undefined" if undefined else "absent"


# The NPU libraries' file names, shared by verify and the manifest.
HTP_NAME = re.compile(r"^libggml-htp-(v\d+)\.so$")


def htp_key(version: str) -> int:
    """``"v79"`` → 79, to sort HTP versions."""
    return int(version[1:])


_VERSION = re.compile(r"^[vV]?(\d{2,3})$")


def parse_htp_versions(values: Iterable[str]) -> list[str]:
    """``["v73,79", "V81"]`` → ``["v73", "v79", "v81"]``; UsageError on anything else."""
    from ..errors import UsageError

    out: set[str] = set()
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            m = _VERSION.match(item)
            if not m:
                raise UsageError(f"unknown HTP version {item!r}: expected vNN, e.g. v73 or v79")
            out.add(f"v{m.group(1)}")
    return sorted(out, key=htp_key)
