"""hexbuild results: llama.cpp console output as JSON (parse), the Hexagon backend's op profile as
a table (profile) and as a Perfetto trace (trace)."""

from __future__ import annotations

from typing import List, Optional

import typer

results_app = typer.Typer(help="Read the results llama.cpp programs print.", no_args_is_help=True)


@results_app.command("parse")
def parse(
    logs: List[str] = typer.Argument(..., metavar="LOG...", help="Log files; - reads stdin."),
) -> None:
    """Turn llama.cpp output into one JSON document (schema: hexbuild/results/__init__.py)."""
    from ..results import parse_logs, render
    from ..ui import ui

    data = parse_logs(logs)
    ui.result(data, render(data))


@results_app.command("profile")
def profile(
    log: str = typer.Argument(..., metavar="LOG", help="A log of a run with --hex-profile; - reads stdin."),
    top: Optional[int] = typer.Option(None, "--top", "-n", min=1, help="Only the N op groups that took longest."),
    op_filter: Optional[str] = typer.Option(None, "--filter", metavar="REGEX", help="Only profile-op lines matching REGEX."),
    device: Optional[str] = typer.Option(None, "--device", metavar="HTP1", help="Only these sessions (HTP0 takes HTP0:N too)."),
    sort: str = typer.Option("tot-usec", "--sort", help="tot-usec, avg-usec, max-usec, count, tot-cycles, avg-cycles, max-cycles."),
    csv_out: Optional[str] = typer.Option(None, "--csv", metavar="FILE", help="Also write the table as CSV."),
    md_out: Optional[str] = typer.Option(None, "--md", metavar="FILE", help="Also write the table as markdown."),
    chart: Optional[str] = typer.Option(None, "--chart", metavar="FILE.png", help="Also draw a bar chart (PNG)."),
) -> None:
    """Per-op time on the NPU from profile-op lines (both formats): count, total/avg/max µs and cycles."""
    from ..results import profile as prof
    from ..paths import atomic_write, output_mode
    from ..ui import ui

    doc = prof.read(log, device=device, op_filter=op_filter, top=top, sort=sort)
    if csv_out:
        atomic_write(_path(csv_out), prof.csv_text(doc), mode=output_mode())
    if md_out:
        atomic_write(_path(md_out), prof.markdown(doc), mode=output_mode())
    if chart:
        atomic_write(_path(chart), prof.chart_png(doc), mode=output_mode())
    ui.result(doc, prof.markdown(doc))


@results_app.command("trace")
def trace(
    log: str = typer.Argument(..., metavar="LOG", help="A log of a run with --hex-profile (3 adds trace events)."),
    output: str = typer.Option(..., "-o", "--output", metavar="FILE.json", help="Where the trace goes."),
) -> None:
    """Op timings and trace events as Chrome trace-event JSON (open it in Perfetto)."""
    import json
    import sys

    from ..errors import UsageError
    from ..results.trace import trace as make_trace
    from ..paths import atomic_write, output_mode
    from ..ui import ui

    if log == "-":
        doc = make_trace(sys.stdin, source="-")
    else:
        path = _path(log)
        if not path.is_file():
            raise UsageError(f"{log}: no such file")
        with path.open("r", encoding="utf-8", errors="replace") as f:
            doc = make_trace(f, source=log)
    atomic_write(_path(output), json.dumps(doc, separators=(",", ":")) + "\n", mode=output_mode())
    n = sum(1 for e in doc["traceEvents"] if e["ph"] != "M")
    summary = {"output": output, "events": n, "sessions": doc["otherData"]["sessions"]}
    ui.result(summary, f"{n} events from {', '.join(summary['sessions'])} in {output} (open it in Perfetto)")


def _path(name: str):
    from pathlib import Path

    return Path(name).expanduser()


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
