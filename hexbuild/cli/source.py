"""hexbuild source info: what a llama.cpp checkout's revision says about its Hexagon backend."""

from __future__ import annotations

from typing import Optional

import typer

from . import common

source_app = typer.Typer(help="Read facts from a llama.cpp checkout.", no_args_is_help=True)


@source_app.command("info")
def info(
    source: Optional[str] = typer.Option(None, "--source", "-s", metavar="DIR",
                                         help="The llama.cpp checkout (default: current directory)."),
) -> None:
    """Report the revision's docs dir, presets, toolchain images, HTP versions, env vars and scripts."""
    from ..source import read_source
    from ..ui import ui

    s = common.settings(source=source)
    facts = read_source(common.source_dir(s))
    ui.result(facts.to_json(), _render(facts))


def _render(facts):
    from rich.table import Table

    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()

    def row(k, v):
        t.add_row(k, "-" if v in (None, [], {}) else str(v))

    row("path", facts.path)
    row("revision", facts.revision)
    row("hexagon", "yes" if facts.hexagon else "no (this revision has no ggml/src/ggml-hexagon)")
    if facts.hexagon:
        row("docs", facts.docs_dir)
        row("presets", ", ".join(facts.presets))
        for os_name, ref in facts.images.items():
            row(f"image ({os_name})", f"{ref}  [dim]from {facts.image_sources[os_name]}[/dim]" if ref else None)
        row("HTP versions", " ".join(facts.htp_versions))
        sel = facts.device_selection
        row("sessions", " / ".join(v for v in (sel["ndev_var"], sel["devices_var"]) if v) or None)
        row("device names", ", ".join(facts.device_names))
        row("env vars", " ".join(facts.env_vars))
        row("scripts", " ".join(facts.scripts))
        for os_name, conv in facts.conventions.items():
            row(f"layout ({os_name})", f"{conv['build_dir']} -> {conv['install_dir']}" if conv else None)
    row("tools", " ".join(facts.tools))
    return t


def register(app: typer.Typer) -> None:
    app.add_typer(source_app, name="source")
