"""One library inspected: disassembled and scanned once (windows.py, scan.py), or read back from
the cache (cache.py); which libraries a package holds."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..verify import HTP_NAME, htp_key, parse_htp_versions
from . import windows
from .analysis import FunctionReport
from .cache import file_identity, load_reports, report_key, save_reports
from .elfmeta import ElfMeta, read_meta
from .objdump import Objdump


@dataclass
class LibraryReport:
    path: Path
    name: str
    arch: str | None
    disassembler: str
    flags: list[str]                # --mcpu/--mattr given to the disassembler
    functions: list[FunctionReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    debug_info: bool = False
    meta: ElfMeta | None = field(default=None, repr=False)

    def function(self, name: str) -> FunctionReport | None:
        return next((f for f in self.functions if f.name == name), None)

    def totals(self) -> dict[str, int]:
        fs = self.functions
        return {
            "functions": len(fs),
            "hardware_loops": sum(1 for f in fs for lp in f.loops if lp.kind != "branch"),
            "hvx_spills_in_loop": sum(f.hvx_spills.in_loop for f in fs),
            "hvx_spills": sum(f.hvx_spills.total for f in fs),
            "hvx_spills_in_hw_loops": sum(sum(f.hw_loop_hvx) for f in fs),
            "scalar_spills_in_loop": sum(f.scalar_spills.in_loop for f in fs),
            "scalar_spills": sum(f.scalar_spills.total for f in fs),
            "promotions": sum(f.count("promotion") for f in fs),
            "divides": sum(f.count("divide") for f in fs),
            "soft_float": sum(f.count("soft_float") for f in fs),
            "helpers_in_hot_loops": sum(sum(f.hot_helpers().values()) for f in fs),
            "unknown_words": sum(f.unknown for f in fs),
        }

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "arch": self.arch, "disassembler": self.disassembler,
                "disassembler_flags": self.flags, "debug_info": self.debug_info, "totals": self.totals(),
                "warnings": self.warnings, "functions": [f.to_json() for f in self.functions]}


def inspect_library(path: Path, objdump: Objdump, *, func: re.Pattern[str] | None = None,
                    with_lines: bool = True, workers: int | None = None, cache: bool = True) -> LibraryReport:
    """Disassemble and scan ``path`` (windows.py: in one address window per CPU for a large
    library), or read its reports from the cache when this library was inspected before with the
    same disassembler, flags and analysis code (cache.py)."""
    meta = read_meta(path)
    flags, warn = objdump.flags(meta.arch, path)
    rep = LibraryReport(path, path.name, meta.arch, objdump.name, flags, debug_info=meta.debug_info, meta=meta)
    if warn:
        rep.warnings.append(warn)
    lines = with_lines and meta.debug_info
    key = report_key(path, f"{objdump.path}|{objdump.version}|{file_identity(objdump.path)}", flags, lines) \
        if cache else None
    functions = load_reports(key) if key else None
    if functions is None:
        functions = windows.reports(objdump, path, flags, meta,
                                    windows.windows(meta, workers if workers is not None else _cpus() // 2))
        if lines:
            _add_lines(path, functions)
        if key:
            save_reports(key, functions)
    rep.functions = [f for f in functions if func is None or func.search(f.name)]
    unknown = sum(f.unknown for f in rep.functions)
    if unknown:
        rep.warnings.append(f"{path.name}: {unknown} instruction words were not decoded by {objdump.name} "
                            f"({' '.join(flags) or 'no --mcpu'}): counts may be low")
    return rep


def _add_lines(path: Path, functions: list[FunctionReport]) -> None:
    sites = [c for f in functions for c in f.helper_calls]
    if sites:
        from .addr2line import LineTable

        table = LineTable(path)
        for c in sites:
            loc = table.lookup(c.addr)
            c.line = f"{loc[0]}:{loc[1]}" if loc else None


def libraries(target: Path, htp: list[str] | None = None) -> list[Path]:
    """The NPU libraries to inspect: ``target`` itself when it is a file, else the
    ``lib/libggml-htp-vNN.so`` of the package at ``target`` (only the ``htp`` versions)."""
    if target.is_file():
        if htp:
            raise UsageError("--htp picks libraries from a package; pass a package directory, or drop --htp")
        return [target]
    if not target.exists():
        raise UsageError(f"not found: {target}", hint="pass a package (install prefix) or a libggml-htp-vNN.so")
    lib = target / "lib" if (target / "lib").is_dir() else target
    found = {}
    for p in lib.iterdir():
        m = HTP_NAME.match(p.name)
        if m and p.is_file():
            found[m.group(1)] = p
    wanted = parse_htp_versions(htp) if htp else sorted(found, key=htp_key)
    missing = [v for v in wanted if v not in found]
    if missing:
        raise UsageError(f"{target}: no libggml-htp-{missing[0]}.so in {lib}"
                         + (f" (found: {', '.join(sorted(found, key=htp_key))})" if found else ""))
    if not wanted:
        raise UsageError(f"{target}: no NPU libraries (lib/libggml-htp-vNN.so)",
                         hint="pass the install prefix of a Hexagon build, or one .so file")
    return [found[v] for v in wanted]


def _cpus() -> int:
    """CPUs this process may use (at most 8). A window keeps two busy, its disassembler and its
    scanner: on 2 CPUs two windows took longer than one (more CPU for the same text)."""
    try:
        return min(len(os.sched_getaffinity(0)), 8)
    except AttributeError:
        return min(os.cpu_count() or 1, 8)
