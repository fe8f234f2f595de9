"""What `hexbuild inspect` asks of the package beyond one library's report: picking the library
for --addr2line, the function for --disasm, and the --strict gate over several libraries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ...errors import ParseFailed, UsageError, VerifyFailed, WarningsFatal
from .addr2line import addresses_in
from .analysis import analyze
from .baseline import Finding, compare, load_baseline
from .disasm import render_disasm
from .elfmeta import plt_names, read_meta
from .gate import baseline_path
from .model import parse
from .objdump import Objdump
from .report import LibraryReport, libraries

_ADDR = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,8})$")


def addr2line_request(target: str | None, args: list[str], lib: str | None,
                      stdin: TextIO | None) -> tuple[Path, list[int]]:
    """(library file, addresses) for ``inspect [TARGET] --addr2line ADDR... [--lib L]``. TARGET may
    be left out when --lib is a file; ``-``, or no ADDR and a stdin that is not a terminal, adds
    the addresses found in the log text on stdin."""
    args = list(args)
    if target is not None and not Path(target).exists() and _ADDR.match(target):
        args.insert(0, target)  # "inspect --addr2line 0x51a30 --lib FILE": no TARGET given
        target = None
    if target is None:
        if lib is None or not Path(lib).is_file():
            raise UsageError("--addr2line needs the library: a FILE.so, or a package and --lib NAME",
                             hint="hexbuild inspect pkg/llama.cpp --addr2line 0x51a30 --lib libggml-htp-v79.so")
        path = Path(lib)
    else:
        root = Path(target)
        if root.is_file():
            path = root
        elif lib is not None:
            candidates = [Path(lib), root / "lib" / lib, root / lib]
            path = next((c for c in candidates if c.is_file()), None)  # type: ignore[assignment]
            if path is None:
                raise UsageError(f"--lib {lib}: no such library in {root}")
        else:
            found = libraries(root)
            if len(found) > 1:
                raise UsageError(f"{root} has {len(found)} NPU libraries: say which with --lib",
                                 hint=f"--lib {found[-1].name}")
            path = found[0]
    meta = read_meta(path)
    addrs: list[int] = []
    for a in args:
        if a == "-":
            continue
        m = _ADDR.match(a.strip())
        if not m:
            raise UsageError(f"not an address: {a!r} (expected hex, e.g. 0x51a30)")
        addrs.append(int(m.group(1), 16))
    if stdin is not None and not ("-" in args or (not addrs and not _isatty(stdin))):
        stdin = None
    if stdin is not None:
        addrs += [a for a in addresses_in(stdin.readlines(), meta) if a not in addrs]
    if not addrs:
        raise ParseFailed("no addresses to resolve" + (" in the input" if stdin is not None else ""),
                          hint="give offsets (0x51a30) or pipe a log that names libggml-htp-vNN.so+0x… or a PC")
    return path, addrs


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def disasm_request(paths: list[Path], objdump: Objdump, name: str) -> tuple[dict[str, Any], str]:
    """(JSON, text) of every function named ``name`` (exactly, else matching it as a regex)."""
    try:
        pattern = re.compile(name)
    except re.error:
        pattern = None
    out_json, out_text = [], []
    for path in paths:
        meta = read_meta(path)
        exact = [s for s in meta.symbols if s.name == name]
        chosen = exact or ([s for s in meta.symbols if pattern.search(s.name)] if pattern else [])
        flags, _ = objdump.flags(meta.arch, path)
        full = None
        for sym in chosen:
            if sym.size:
                fns = parse(objdump.disassemble(path, flags, start=sym.addr, stop=sym.addr + sym.size))
            else:  # no size: take it from a whole disassembly
                full = full if full is not None else parse(objdump.disassemble(path, flags))
                fns = [f for f in full if f.addr == sym.addr]
            fn = next((f for f in fns if f.addr == sym.addr), None)
            if fn is None:
                continue
            plt = {}
            if meta.jump_slots:
                full = full if full is not None else parse(objdump.disassemble(path, flags))
                plt = plt_names(meta, [p for f in full if f.section == ".plt" for p in f.packets])
            rep = analyze(fn, meta, plt)
            out_json.append({"library": path.name, **rep.to_json()})
            out_text.append(f"== {path.name}\n" + render_disasm(fn, rep))
    if not out_json:
        raise UsageError(f"no function named or matching {name!r} in {', '.join(p.name for p in paths)}")
    return {"functions": out_json}, "\n\n".join(out_text)


def gate_baseline(settings, given: str | None) -> dict[str, Any] | None:
    path = baseline_path(settings, given)
    return load_baseline(path) if path else None


@dataclass
class Gate:
    reports: list[LibraryReport]
    baseline: dict[str, Any] | None
    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.findings = [f for r in self.reports for f in compare(r, self.baseline)]

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.regression]

    @property
    def total_findings(self) -> int:
        return len(self.findings)

    def to_json(self, strict: bool) -> dict[str, Any]:
        return {"strict": strict, "baseline": self.baseline is not None,
                "findings": [f.to_json() for f in self.findings], "regressions": len(self.regressions),
                "ok": not self.regressions}

    def text(self) -> str:
        if not self.regressions:
            return f"gate: ok ({self.total_findings} finding(s), all accepted by the baseline)"
        return "gate: beyond the baseline (--strict fails on these)\n" + "\n".join(f"  {f.library}: {f.describe()}" for f in self.regressions)

    def enforce(self) -> None:
        """--strict: exit 5 on a regression, else exit 10 when a library raised a warning."""
        bad = self.regressions
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise VerifyFailed(f"{bad[0].library}: {bad[0].describe()}{more}",
                               hint="fix the kernel, or accept known findings: --write-baseline FILE, then --baseline FILE")
        warnings = [w for r in self.reports for w in r.warnings]
        if warnings:
            raise WarningsFatal(f"{len(warnings)} warning(s) and --strict makes them fatal (first: {warnings[0]})")
