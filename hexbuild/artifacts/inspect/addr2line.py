"""Crash offsets → function+offset and, with debug info, source lines; and finding those
offsets in device logs (``adb logcat``, ``dmesg``, FastRPC/QuRT crash reports).

An offset into a skel is its virtual address: the libraries are linked at 0 and the DSP loader
maps them whole. Symbols come from .symtab/.dynsym, lines from the DWARF line programs
(pyelftools); no SDK and no addr2line binary are needed.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .elfmeta import ElfMeta, read_meta

# "libggml-htp-v79.so+0x51a30", "libggml-htp-v79.so (+0x51a30)", "libggml-htp-v79.so (offset 0x51a30)"
_LIB_OFFSET = re.compile(r"(libggml-htp-v[0-9]+\.so)\W{0,3}(?:\+|offset\s*)(0x[0-9a-fA-F]+|[0-9a-fA-F]{3,8}\b)")
# QuRT's crash report: the object and where it was loaded, then the faulting PC (or ELR / LR).
_LOADED = re.compile(r"(libggml-htp-v[0-9]+\.so)\W.*?load\s*address\s*[:=]?\s*(0x[0-9a-fA-F]+)", re.I)
_PC = re.compile(r"\b(fault\s*pc|pc|elr|lr)\s*[:=]?\s*(0x[0-9a-fA-F]+)", re.I)
# Plain addresses in text given to --addr2line: "pc=0x…", "+0x…", any "0x…", a bare hex word.
_ANY_HEX = re.compile(r"\b0x([0-9a-fA-F]{3,8})\b|^\s*([0-9a-fA-F]{3,8})\s*$")


@dataclass(frozen=True)
class CrashSite:
    lib: str            # libggml-htp-vNN.so
    offset: int
    what: str = "pc"    # pc | lr | offset

    def to_json(self) -> dict[str, Any]:
        return {"lib": self.lib, "offset": self.offset, "what": self.what}


def crash_offsets(text: str) -> list[CrashSite]:
    """DSP crash offsets named in a device log, in order, each once: ``libggml-htp-vNN.so+0x…``
    frames and QuRT's "load address" + faulting PC reports. Empty when the log shows none."""
    out: list[CrashSite] = []
    loaded: tuple[str, int] | None = None
    for line in text.splitlines():
        for m in _LIB_OFFSET.finditer(line):
            out.append(CrashSite(m.group(1), int(m.group(2), 16), "offset"))
        m = _LOADED.search(line)
        if m:
            loaded = (m.group(1), int(m.group(2), 16))
            continue
        if loaded is not None:
            for m in _PC.finditer(line):
                pc = int(m.group(2), 16)
                if pc >= loaded[1]:
                    kind = "lr" if m.group(1).lower() == "lr" else "pc"
                    out.append(CrashSite(loaded[0], pc - loaded[1], kind))
    return list(dict.fromkeys(out))


def addresses_in(lines: Iterable[str], meta: ElfMeta) -> list[int]:
    """Addresses to resolve from free text: crash sites for this library first, else every hex
    number that falls in its code (so error codes and pointers elsewhere are left out)."""
    text = "".join(lines)
    sites = [s.offset for s in crash_offsets(text) if s.lib == meta.path.name]
    if sites:
        return list(dict.fromkeys(sites))
    found: list[int] = []
    for line in text.splitlines():
        for m in _ANY_HEX.finditer(line):
            value = int(m.group(1) or m.group(2), 16)
            if meta.section_of(value) and value not in found:
                found.append(value)
    return found


class LineTable:
    """Address → (file, line) from every DWARF line program of ``path``."""

    def __init__(self, path: Path):
        self.rows: list[tuple[int, str | None, int]] = []  # (address, file, line); file None ends a sequence
        from elftools.elf.elffile import ELFFile

        with open(path, "rb") as f:
            elf = ELFFile(f)
            if not elf.has_dwarf_info():
                return
            dwarf = elf.get_dwarf_info()
            for cu in dwarf.iter_CUs():
                lp = dwarf.line_program_for_CU(cu)
                if lp is None:
                    continue
                comp_dir = _comp_dir(cu)
                for entry in lp.get_entries():
                    st = entry.state
                    if st is None:
                        continue
                    if st.end_sequence:
                        self.rows.append((st.address, None, 0))
                    else:
                        self.rows.append((st.address, _file_name(lp, st.file, comp_dir), st.line))
        self.rows.sort(key=lambda r: (r[0], r[1] is not None))
        self._addrs = [r[0] for r in self.rows]

    def lookup(self, addr: int) -> tuple[str, int] | None:
        if not self.rows:
            return None
        i = bisect.bisect_right(self._addrs, addr) - 1
        # Line 0 marks code the compiler made up (a helper call it inserted): the statement
        # before it in the same sequence is the one that asked for it.
        while i >= 0 and self.rows[i][1] is not None and not self.rows[i][2]:
            i -= 1
        if i < 0:
            return None
        _, name, line = self.rows[i]
        return (name, line) if name is not None and line else None


def _comp_dir(cu) -> str:
    try:
        attr = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
        return attr.value.decode("utf-8", "replace") if attr else ""
    except Exception:  # a damaged DIE: lines still resolve, only without their directory
        return ""


def _file_name(lp, index: int, comp_dir: str) -> str:
    entries = lp["file_entry"]
    dirs = lp["include_directory"]
    v5 = lp.header.version >= 5
    i = index if v5 else index - 1
    if not 0 <= i < len(entries):
        return "??"
    entry = entries[i]
    name = entry.name.decode("utf-8", "replace")
    d = entry.dir_index
    if v5:
        directory = dirs[d].decode("utf-8", "replace") if 0 <= d < len(dirs) else ""
    else:
        directory = dirs[d - 1].decode("utf-8", "replace") if 0 < d <= len(dirs) else comp_dir
    if directory and not os.path.isabs(name):
        name = os.path.join(directory, name)
    return name


@dataclass
class Resolved:
    addr: int
    function: str | None
    offset: int | None
    file: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.function}+{self.offset:#x}" if self.function else "??"

    def to_json(self) -> dict[str, Any]:
        return {"addr": self.addr, "function": self.function, "offset": self.offset,
                "file": self.file, "line": self.line}


def resolve(path: Path, addrs: list[int], meta: ElfMeta | None = None) -> list[Resolved]:
    meta = meta or read_meta(path)
    table = LineTable(path) if meta.debug_info else None
    out = []
    for a in addrs:
        sym = meta.function_at(a)
        r = Resolved(a, sym.name if sym else None, a - sym.addr if sym else None)
        loc = table.lookup(a) if table else None
        if loc:
            r.file, r.line = loc
        out.append(r)
    return out


def addr2line_offer(sites: list[CrashSite], package: str = "PKG") -> str:
    """The command that maps ``sites`` to functions and lines, for `run` to print after a DSP crash."""
    import shlex

    by_lib: dict[str, list[str]] = {}
    for s in sites:
        by_lib.setdefault(s.lib, []).append(f"{s.offset:#x}")
    return "; ".join(f"hexbuild inspect {shlex.quote(package)} --addr2line {' '.join(v)} --lib {lib}"
                     for lib, v in by_lib.items())


def name_sites(sites: list[CrashSite], lib_dir: Path | None) -> list[dict[str, Any]]:
    """Each site with its function (and source line, with debug info) when its library is in
    ``lib_dir`` on this machine (an install the programs ran from: qemu+npu:, local:), else as it
    is: {"lib", "offset", "what", "function", "file", "line", "where"} ("where": one phrase)."""
    out = []
    resolved: dict[str, dict[int, Resolved]] = {}
    for s in sites:
        path = lib_dir / s.lib if lib_dir else None
        if path is not None and path.is_file() and s.lib not in resolved:
            try:
                offsets = [x.offset for x in sites if x.lib == s.lib]
                resolved[s.lib] = {r.addr: r for r in resolve(path, offsets)}
            except Exception:  # a damaged library: the offsets still say where
                resolved[s.lib] = {}
        r = resolved.get(s.lib, {}).get(s.offset)
        where = f"{s.lib}+{s.offset:#x}"
        if r is not None and r.function:
            where += f" ({r.where}" + (f", {os.path.basename(r.file)}:{r.line}" if r.file and r.line else "") + ")"
        out.append({**s.to_json(), "function": r.function if r else None, "file": r.file if r else None,
                    "line": r.line if r else None, "where": where})
    return out
