"""``hexbuild serve stop``: the call and what it prints, without Typer, so that the command line
read before Typer is imported (fast.py) and the Typer command (serve.py) end in the same code."""

from __future__ import annotations

from . import common


def stop(target: str | None, port: int | None, all_: bool) -> None:
    from ..serve import control as serve_control
    from ..ui import ui

    recs = serve_control.select(target=target, port=port, all_=all_)
    done = serve_control.stop(recs, common.settings)
    ui.result(done, "\n".join(f"stopped {d['target']} (port {d['local_port']}, PID {d['pid']})" for d in done)
              or "nothing to stop")
