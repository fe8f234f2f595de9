"""One library inspected: disassemble once, parse once, analyse every function."""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..verify import HTP_NAME, htp_key, parse_htp_versions
from .analysis import FunctionReport, analyze
from .elfmeta import ElfMeta, plt_names, read_meta
from .model import Function, parse
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
    parsed: list[Function] = field(default_factory=list, repr=False)
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


PARALLEL_MIN_BYTES = 1 << 20  # below this one process is faster than starting workers
_WORK: dict[str, Any] = {}    # what forked workers inherit: the library, its symbols, PLT names


def inspect_library(path: Path, objdump: Objdump, *, func: re.Pattern[str] | None = None,
                    with_lines: bool = True, workers: int | None = None) -> LibraryReport:
    """Disassemble, parse and analyse ``path``. A large library is cut at function boundaries
    into one address window per CPU, each disassembled and analysed by its own process."""
    meta = read_meta(path)
    flags, warn = objdump.flags(meta.arch, path)
    rep = LibraryReport(path, path.name, meta.arch, objdump.name, flags, debug_info=meta.debug_info, meta=meta)
    if warn:
        rep.warnings.append(warn)
    windows = _windows(meta, workers if workers is not None else _cpus())
    if not windows:
        functions = parse(objdump.disassemble(path, flags))
        plt = plt_names(meta, [p for f in functions if f.section == ".plt" for p in f.packets])
        rep.parsed = functions
        rep.functions = [analyze(fn, meta, plt) for fn in functions
                         if fn.section != ".plt" and (func is None or func.search(fn.name))]
    else:
        import concurrent.futures
        import multiprocessing

        plt_fns = parse(objdump.disassemble(path, flags, start=meta.plt[0], stop=meta.plt[0] + meta.plt[1])) \
            if meta.plt else []
        _WORK.update(path=path, objdump=objdump, flags=flags, meta=meta, func=func,
                     plt=plt_names(meta, [p for f in plt_fns for p in f.packets]))
        try:
            with concurrent.futures.ProcessPoolExecutor(len(windows), mp_context=multiprocessing.get_context("fork")) as pool:
                for part in pool.map(_window, windows):
                    rep.functions += part
        finally:
            _WORK.clear()
    unknown = sum(f.unknown for f in rep.functions)
    if unknown:
        rep.warnings.append(f"{path.name}: {unknown} instruction words were not decoded by {objdump.name} "
                            f"({' '.join(flags) or 'no --mcpu'}): counts may be low")
    if with_lines and meta.debug_info:
        from .addr2line import LineTable

        sites = [c for f in rep.functions for c in f.helper_calls]
        if sites:
            table = LineTable(path)
            for c in sites:
                loc = table.lookup(c.addr)
                c.line = f"{loc[0]}:{loc[1]}" if loc else None
    return rep


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
    try:
        return min(len(os.sched_getaffinity(0)), 8)
    except AttributeError:
        return min(os.cpu_count() or 1, 8)


def _windows(meta: ElfMeta, n: int) -> list[tuple[int, int]]:
    """[start, stop) windows over the code, cut at function starts, about equal in size; empty
    when one process should do it all."""
    code = [(s, e) for s, e, name in meta.exec_ranges if name != ".plt"]
    if n < 2 or len(code) != 1 or code[0][1] - code[0][0] < PARALLEL_MIN_BYTES:
        return []
    lo, hi = code[0]
    starts = sorted({s.addr for s in meta.symbols if lo < s.addr < hi})
    cuts = [lo]
    for k in range(1, n):
        i = bisect.bisect_left(starts, lo + (hi - lo) * k // n)
        if i < len(starts) and starts[i] > cuts[-1]:
            cuts.append(starts[i])
    cuts.append(hi)
    return list(zip(cuts, cuts[1:]))


def _window(window: tuple[int, int]) -> list[FunctionReport]:
    w = _WORK
    out = []
    for fn in parse(w["objdump"].disassemble(w["path"], w["flags"], start=window[0], stop=window[1])):
        if w["func"] is None or w["func"].search(fn.name):
            rep = analyze(fn, w["meta"], w["plt"])
            rep.spill_tags = {}  # only --disasm shows them; not worth sending back
            out.append(rep)
    return out
