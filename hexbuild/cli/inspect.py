"""hexbuild inspect: kernel quality (spills, loops, helper calls) and crash addresses of the NPU
libraries, from the binaries alone."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common


def inspect(
    target: Optional[str] = typer.Argument(None, metavar="PKG|FILE.so",
                                           help="A package (install prefix) or one libggml-htp-vNN.so."),
    addrs: Optional[List[str]] = typer.Argument(None, metavar="[ADDR...]",
                                                help="With --addr2line: offsets to resolve (- reads stdin)."),
    htp: Optional[List[str]] = typer.Option(None, "--htp", metavar="v73,v79",
                                            help="Only these HTP libraries of the package."),
    func: Optional[str] = typer.Option(None, "--func", metavar="REGEX", help="Only functions whose name matches."),
    show_all: bool = typer.Option(False, "--all", help="List every function, not only those with findings."),
    strict: bool = typer.Option(False, "--strict",
                                help="Exit 5 on in-loop HVX spills or helper calls in hot loops beyond the baseline."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="FILE",
                                           help="Accepted findings (default: inspect.baseline)."),
    write_baseline: Optional[str] = typer.Option(None, "--write-baseline", metavar="FILE",
                                                 help="Write the current findings as the baseline."),
    disasm: Optional[str] = typer.Option(None, "--disasm", metavar="FUNC",
                                         help="Print FUNC's annotated disassembly (a name, else a regex)."),
    addr2line: bool = typer.Option(False, "--addr2line",
                                   help="Resolve ADDR... (or log text on stdin) to function+offset and source line."),
    lib: Optional[str] = typer.Option(None, "--lib", metavar="NAME|FILE",
                                      help="With --addr2line: which library of the package (or a file)."),
    objdump: Optional[str] = typer.Option(None, "--objdump", metavar="PATH",
                                          help="Disassembler (default: inspect.objdump, else the newest llvm-objdump 17+)."),
) -> None:
    """Spills, loops, soft-float and divide helpers per function; a baseline gate; annotated
    disassembly; crash offsets to source lines. Exit codes: 2 bad input, 3 no llvm-objdump,
    5 --strict found a regression, 9 no address in the input, 10 --strict and a warning."""
    import re
    import sys
    from pathlib import Path

    from ..artifacts import inspect as insp
    from ..errors import UsageError
    from ..ui import ui

    s = common.settings()
    if addr2line:
        stdin = sys.stdin if ("-" in (addrs or []) or (not addrs and not sys.stdin.isatty())) else None
        path, found = insp.addr2line_request(target, addrs or [], lib, stdin)
        resolved = insp.resolve(path, found)
        ui.result({"library": str(path), "addresses": [r.to_json() for r in resolved]}, _addr_text(resolved))
        return
    if addrs:
        raise UsageError(f"unexpected argument {addrs[0]!r}", hint="addresses go with --addr2line")
    if target is None:
        raise UsageError("missing PKG|FILE.so", hint="hexbuild inspect pkg-android/llama.cpp")
    try:
        pattern = re.compile(func) if func else None
    except re.error as e:
        raise UsageError(f"--func is not a regular expression: {e}") from None
    tool = insp.find_objdump(objdump or s["inspect.objdump"] or None)
    paths = insp.libraries(Path(target), htp)
    if disasm:
        ui.result(*insp.disasm_request(paths, tool, disasm))
        return
    reports = []
    for p in paths:
        ui.info(f"inspecting {p} with {tool.name}")
        reports.append(insp.inspect_library(p, tool, func=pattern))
    gate = insp.Gate(reports, insp.gate_baseline(s, baseline) if (strict or baseline) else None)
    if write_baseline:
        insp.write_baseline(Path(write_baseline), reports)
        ui.info(f"wrote the baseline {write_baseline} ({gate.total_findings} findings accepted)")
    for r in reports:
        for w in r.warnings:
            ui.warn(w)
    data = {"libraries": [r.to_json() for r in reports], "gate": gate.to_json(strict)}
    ui.result(data, _tables(reports, gate, show_all or bool(func)))
    if strict:
        gate.enforce()


def _addr_text(resolved) -> str:
    lines = []
    for r in resolved:
        src = f"{r.file}:{r.line}" if r.file else "(no line info: build with -g)"
        lines.append(f"{r.addr:#010x} -> {r.where:<40} {src}")
    return "\n".join(lines)


def _tables(reports, gate, show_all: bool):
    from rich.console import Group
    from rich.table import Table

    out = []
    for r in reports:
        t = Table(title=f"{r.name} ({r.arch or 'no arch'}, {r.disassembler})", title_justify="left")
        # Short headers: the table must stay readable in an 80-column CI log.
        t.add_column("function", no_wrap=True)
        for col in ("bytes", "hwloop", "V-spill", "S-spill", "promo", "div", "loop calls"):
            t.add_column(col, justify="right")
        t.add_column("notes", overflow="fold")
        shown = 0
        for f in sorted(r.functions, key=lambda f: (-f.hvx_spills.in_loop, -len(f.hot_helpers()), f.addr)):
            j = f.to_json()
            busy = f.hvx_spills.total or f.scalar_spills.in_loop or f.helper_calls or j["calls"]["in_loop"] or f.unknown
            if not (show_all or busy):
                continue
            shown += 1
            notes = []
            hot = f.hot_helpers()
            if f.hvx_spills.in_loop:
                notes.append("[red]HVX spills in loop[/]")
            if hot:
                notes.append("[red]in hot loop: " + ", ".join(f"{k}×{v}" for k, v in hot.items()) + "[/]")
            if f.unknown:
                notes.append(f"{f.unknown} undecoded words")
            t.add_row(f.name, str(f.size), str(j["hardware_loops"]),
                      f"{f.hvx_spills.in_loop}/{f.hvx_spills.total}", f"{f.scalar_spills.in_loop}/{f.scalar_spills.total}",
                      _count(j["promotions"]), _count(j["divides"]), str(j["calls"]["in_loop"]), "; ".join(notes))
        tot = r.totals()
        t.caption = (f"V-/S-spill: HVX/scalar stack spills in loops/all. {tot['functions']} functions ({shown} shown; --all lists all), {tot['hardware_loops']} hardware "
                     f"loops, {tot['hvx_spills_in_loop']} in-loop HVX spills, {tot['promotions']} promotions, "
                     f"{tot['divides']} divides, {tot['helpers_in_hot_loops']} helper calls in hot loops")
        out.append(t)
    if gate.baseline is not None or gate.regressions:
        out.append(gate.text())
    return Group(*out)


def _count(c: dict) -> str:
    return f"{c['in_loop']}/{c['total']}"


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
