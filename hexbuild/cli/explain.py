"""hexbuild explain CODE|LOGFILE: what a FastRPC/AEE error code or the first ggml-hex failure
of a log means for the Hexagon backend, one line of cause and one of fix."""

from __future__ import annotations

from typing import Optional

import typer

from . import common


def explain(
    what: str = typer.Argument(..., metavar="CODE|LOGFILE",
                               help="An error code (0x80000406, 0x72, AEE_EUNABLETOLOAD) or a log file ('-': stdin)."),
    target: Optional[str] = typer.Option(None, "-t", "--target", metavar="T",
                                         help="Add the device checks behind the cause (as doctor --target)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
) -> None:
    """Decode a FastRPC/AEE error code, or find and explain the first ggml-hex failure in a log."""
    from ..diagnose import explain_code, explain_log, related_facts
    from ..errors import ParseFailed
    from ..ui import ui

    expl = None
    text = _read_log(what)
    if text is None:
        expl = explain_code(what)
    else:
        expl = explain_log(text.splitlines())
        if expl is None:
            raise ParseFailed(f"{what}: no ggml-hex failure line hexbuild knows",
                              hint="give the code itself (hexbuild explain 0x80000406) or the whole log of the run")
    if target:
        from ..diagnose import check_device
        from ..runner import open_target
        from ..runner.proof import fit_diagnosis

        fitted = fit_diagnosis(target, {"fix": expl.fix, "checks": expl.checks}) or {}
        expl.fix, expl.checks = fitted["fix"], list(fitted["checks"])  # the checks that target has

        s = common.settings(**{"deploy.dest": dest})
        with open_target(target, s) as t:
            _, checks = check_device(t, dest=s["deploy.dest"])
        expl.facts = related_facts(expl, [c.to_json() for c in checks])
    ui.result(expl.to_json(), _human(expl))


def _read_log(what: str) -> str | None:
    """The log's text when ``what`` names a file (or '-'), else None (it is a code)."""
    import sys
    from pathlib import Path

    from ..errors import UsageError

    if what == "-":
        return sys.stdin.read()
    p = Path(what)
    if p.is_dir():
        raise UsageError(f"{what}: is a directory, not a log file")
    if p.is_file():
        return p.read_bytes().decode("utf-8", "replace")
    return None


def _human(expl) -> str:
    lines = []
    if expl.line:
        where = f"line {expl.line_number}: " if expl.line_number else ""
        lines.append(f"{where}{expl.line}")
    lines.append(f"cause: {expl.summary()}")
    lines.append(f"fix:   {expl.fix}")
    lines.append(f"source: {expl.source}")
    for f in expl.facts:
        mark = {"ok": "ok", "missing": "FAILED", "warn": "warn", "info": "info"}.get(f["status"], f["status"])
        lines.append(f"device {f['name']}: {mark}: {f['detail']}" + (f" — fix: {f['fix']}" if f.get("fix") and f["status"] != "ok" else ""))
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
