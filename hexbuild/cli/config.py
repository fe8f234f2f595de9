"""hexbuild config show: the effective settings and where each value came from."""

from __future__ import annotations

from typing import Optional

import typer

from . import common

config_app = typer.Typer(help="Inspect hexbuild's configuration.", no_args_is_help=True)


@config_app.command("show")
def show(
    source: Optional[str] = typer.Option(None, "--source", "-s", help="The llama.cpp checkout (default: current directory)."),
) -> None:
    """Print every setting, its value and its source (default, file, env or flag)."""
    from ..ui import ui

    s = common.settings(source=source)
    data = s.as_json()
    from rich.table import Table

    table = Table(title=f"config file: {data['config_file'] or '(none)'}", title_justify="left")
    for col in ("setting", "value", "source", "environment variable"):
        table.add_column(col)
    for key, item in data["settings"].items():
        table.add_row(key, repr(item["value"]), item["source"], item["env"])
    ui.result(data, table)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
