"""hexbuild plan: how many HTP sessions a model needs and the --tensor-split that balances them."""

from __future__ import annotations

from typing import Optional

import typer


def plan(
    model: str = typer.Option(..., "--model", "-m", metavar="FILE.gguf", help="The model (first file of a split model)."),
    vmem: Optional[str] = typer.Option(None, "--vmem", help="Memory one HTP session can map: 3.5GiB (default), 3584MiB, bytes."),
    max_ndev: Optional[int] = typer.Option(None, "--max-ndev", help="Most sessions to use (default 16)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", help="Use exactly this many sessions instead of the fewest that fit."),
    htp_row_limit: Optional[int] = typer.Option(None, "--htp-row-limit", help="Weights with more rows stay on the CPU (default 16384, the lm-head limit; 0: none)."),
    program: str = typer.Option("llama-cli", "--program", help="Program named in the printed command."),
) -> None:
    """Plan the layer split of a GGUF model across Hexagon sessions."""
    from ..plan import plan_model, render
    from ..ui import ui

    result = plan_model(model, vmem=vmem, max_ndev=max_ndev, ndev=ndev, row_limit=htp_row_limit, program=program)
    ui.result(result, render(result))


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
