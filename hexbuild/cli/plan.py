"""hexbuild plan: how many HTP sessions a model needs and the --tensor-split that balances them."""

from __future__ import annotations

from typing import Optional

import typer

from . import common


def plan(
    model: str = typer.Option(..., "--model", "-m", metavar="FILE.gguf", help="The model (first file of a split model)."),
    source: Optional[str] = typer.Option(None, "--source", "-s", metavar="DIR", help="Follow the rules of this llama.cpp checkout."),
    package: Optional[str] = typer.Option(None, "--package", metavar="PKG", help="Follow the rules recorded in this package (directory or .tar.gz)."),
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Follow the rules of the revision deployed on this target."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
    vmem: Optional[str] = typer.Option(None, "--vmem", help="Memory one HTP session can map: 3.5GiB, 3584MiB, bytes (default: the revision's GGML_HEXAGON_VMEM default, else 3.5GiB)."),
    max_ndev: Optional[int] = typer.Option(None, "--max-ndev", help="Most sessions to use (default 16)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", help="Use exactly this many sessions instead of the fewest that fit."),
    devices: Optional[str] = typer.Option(None, "--devices", help="Name the sessions, e.g. HTP0:0,HTP0:1 (virtual sessions, newer revisions); fixes their number."),
    htp_row_limit: Optional[int] = typer.Option(None, "--htp-row-limit", help="Override the revision's row limit: weights with more rows stay on the CPU (0: none)."),
    program: str = typer.Option("llama-cli", "--program", help="Program named in the printed command."),
) -> None:
    """Plan the layer split of a GGUF model across Hexagon sessions.

    What counts against a session follows the revision's rules (its repacked types and row
    limit), read from --source, --package or --target; without one, the newest known rules
    are assumed and the plan says so."""
    from ..plan import plan_model, render
    from ..plan.rules_lookup import resolve_rules
    from ..ui import ui

    settings = common.settings(**{"deploy.dest": dest}) if target else None
    rules = resolve_rules(source=source, package=package, target=target, settings=settings,
                          dest=settings["deploy.dest"] if settings else None)
    result = plan_model(model, rules=rules, vmem=vmem, max_ndev=max_ndev, ndev=ndev, devices=devices, row_limit=htp_row_limit,
                        program=program)
    ui.result(result, render(result))


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
