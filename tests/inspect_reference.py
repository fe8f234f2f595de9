"""What `hexbuild inspect` reported before the one-pass scanner (hexbuild/artifacts/inspect/scan.py):
the model (model.parse: an object per instruction) analysed function by function by
analysis.analyze, as --disasm still does. The tests and benchmarks/inspect_skel.py hold the
scanner's reports to these, field by field.

    from tests.inspect_reference import reference_reports, fields
    assert fields(inspect_library(lib, tool, cache=False).functions) == fields(reference_reports(lib, tool))
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path


def reference_reports(lib: Path, tool, *, with_lines: bool = True) -> list:
    from hexbuild.artifacts.inspect.analysis import analyze
    from hexbuild.artifacts.inspect.elfmeta import plt_names, read_meta
    from hexbuild.artifacts.inspect.model import parse
    from hexbuild.artifacts.inspect.report import _add_lines

    meta = read_meta(lib)
    flags, _ = tool.flags(meta.arch, lib)
    functions = parse(tool.disassemble(lib, flags))
    plt = plt_names(meta, [p for f in functions if f.section == ".plt" for p in f.packets])
    reports = [analyze(fn, meta, plt) for fn in functions if fn.section != ".plt"]
    if with_lines and meta.debug_info:
        _add_lines(lib, reports)
    return reports


def fields(reports) -> list[dict]:
    """Every field of every report (more than the JSON shows: the frame spills' stores and loads
    apart), but --disasm's tags and the scanner's own record of the address each call reaches."""
    out = []
    for r in reports:
        d = asdict(r)
        d.pop("spill_tags")
        for c in d["calls"]:
            c.pop("dest")
        out.append(d)
    return out
