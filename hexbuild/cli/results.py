"""hexbuild results parse: llama.cpp console output (perf, buffers, llama-bench, test-backend-ops) as JSON."""

from __future__ import annotations

from typing import List

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


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
