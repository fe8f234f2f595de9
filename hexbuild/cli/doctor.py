"""hexbuild doctor: check what the requested work needs, with a fix per failed check."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common


def doctor(
    work: Optional[List[str]] = typer.Option(None, "--for", metavar="WORK",
                                             help="Work to check for: build, deploy, run, release (repeatable)."),
    source: Optional[str] = typer.Option(None, "--source", "-s", metavar="DIR", help="The llama.cpp checkout."),
    engine: Optional[str] = typer.Option(None, "--engine", help="docker or local (local needs no Docker)."),
) -> None:
    """Check Python packages, the Docker engine, adb and devices, SSH, and the source tree."""
    from ..doctor import WORK, run_checks
    from ..errors import EnvironmentMissing, UsageError
    from ..ui import ui

    items = [w.strip() for x in (work or []) for w in x.split(",") if w.strip()]
    bad = [w for w in items if w not in WORK]
    if bad:
        raise UsageError(f"--for {bad[0]!r} is not a kind of work; choose from {', '.join(WORK)}")
    s = common.settings(source=source, **{"build.engine": engine})
    checks = run_checks(work=items, source=common.source_dir(s), docker_engine=s["build.engine"])
    failed = [c for c in checks if c.required and c.status == "missing"]
    data = {"ok": not failed, "work": items, "checks": [c.to_json() for c in checks]}

    from rich.table import Table

    table = Table()
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    colours = {"ok": "green", "missing": "red", "warn": "yellow", "info": "dim"}
    for c in checks:
        status = c.status if c.status != "missing" or c.required else "absent"
        table.add_row(c.name + (" *" if c.required else ""), f"[{colours[c.status]}]{status}[/]", c.detail, c.fix or "")
    ui.result(data, table)
    if failed:
        raise EnvironmentMissing(f"missing for {', '.join(items) or 'hexbuild'}: {', '.join(c.name for c in failed)}",
                                 hint=failed[0].fix)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
