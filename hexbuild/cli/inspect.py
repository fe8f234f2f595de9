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
        path, found = insp.addr2line_request(target, addrs or [], lib, sys.stdin)
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


def _tables(reports, gate, show_all: bool) -> str:
    # Plain columns, notes on their own line: readable in an 80-column CI log and greppable.
    out = []
    for r in reports:
        tot = r.totals()
        out.append(f"{r.name} ({r.arch or 'no arch'}, {r.disassembler}): {tot['functions']} functions, "
                   f"{tot['hardware_loops']} hardware loops, {tot['hvx_spills_in_loop']} in-loop HVX spills "
                   f"({tot['hvx_spills_in_hw_loops']} in hardware loops as upstream's inspect counts them), "
                   f"{tot['promotions']} promotions, {tot['divides']} divides, "
                   f"{tot['helpers_in_hot_loops']} helper calls in hot loops")
        rows = []
        for f in sorted(r.functions, key=lambda f: (-f.hvx_spills.in_loop, -len(f.hot_helpers()), f.addr)):
            j = f.to_json()
            busy = f.hvx_spills.total or f.scalar_spills.in_loop or f.helper_calls or j["calls"]["in_loop"] or f.unknown
            if show_all or busy:
                rows.append((f, j))
        if not rows:
            out.append("  nothing to report (--all lists every function)\n")
            continue
        width = max(24, *(len(f.name) for f, _ in rows))
        out.append(f"  {'function':<{width}} {'bytes':>6} {'hwloop':>6} {'V-spill':>8} {'S-spill':>8} "
                   f"{'promo':>6} {'div':>6} {'calls':>6}")
        for f, j in rows:
            out.append(f"  {f.name:<{width}} {f.size:>6} {j['hardware_loops']:>6} "
                       f"{f.hvx_spills.in_loop:>3}/{f.hvx_spills.total:<4} {f.scalar_spills.in_loop:>3}/{f.scalar_spills.total:<4} "
                       f"{_count(j['promotions']):>6} {_count(j['divides']):>6} {_count(j['calls']):>6}")
            notes = []
            if f.hvx_spills.in_loop:
                notes.append(f"HVX spills in loops: {f.hvx_spills.in_loop_stores} stores, {f.hvx_spills.in_loop_loads} loads")
            for helper, n in f.hot_helpers().items():
                notes.append(f"{n}x {helper} in a hot loop")
            if sum(f.hw_loop_hvx) != f.hvx_spills.in_loop:
                notes.append(f"HVX spills in hardware loops (upstream's view: loopN to its :endloop): "
                             f"{sum(f.hw_loop_hvx)}")
            if f.unknown:
                notes.append(f"{f.unknown} undecoded instruction words: that code is not analysed")
            for note in notes:
                out.append(f"    ! {note}")
        out.append("  (V-/S-spill: HVX/scalar stack spills in loops/all; promo, div, calls: in loops/all)\n")
    if gate.baseline is not None or gate.regressions:
        out.append(gate.text())
    return "\n".join(out)


def _count(c: dict) -> str:
    return f"{c['in_loop']}/{c['total']}"


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
