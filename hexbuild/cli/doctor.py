"""hexbuild doctor: check what the requested work needs, with a fix per failed check; with
--target, also why an HTP session would not open on that device."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common


def doctor(
    work: Optional[List[str]] = typer.Option(None, "--for", metavar="WORK",
                                             help="Work to check for: build, deploy, run, release, kernels (repeatable)."),
    source: Optional[str] = typer.Option(None, "--source", "-s", metavar="DIR", help="The llama.cpp checkout."),
    engine: Optional[str] = typer.Option(None, "--engine", help="docker or local (local needs no Docker)."),
    target: Optional[str] = typer.Option(None, "-t", "--target", metavar="T",
                                         help="Also check this device: SoC, package, FastRPC runtime, unsigned PD, tools."),
    package: Optional[str] = typer.Option(None, "--package", metavar="PKG",
                                          help="Compare the device with this local package instead of its deployed manifest."),
    model: Optional[str] = typer.Option(None, "--model", "-m", metavar="FILE.gguf",
                                        help="Check the device's free memory against the plan for this model."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
    sysroot: Optional[str] = typer.Option(None, "--sysroot", metavar="DIR",
                                          help="AArch64 glibc runtime for a qemu: target (default: the open toolchain image's)."),
) -> None:
    """Check Python packages, the Docker engine, adb and devices, SSH, and the source tree;
    with --target, the device checks behind a session that will not open."""
    from ..doctor import WORK, run_checks
    from ..errors import EnvironmentMissing, UsageError
    from ..ui import ui

    items = [w.strip() for x in (work or []) for w in x.split(",") if w.strip()]
    bad = [w for w in items if w not in WORK]
    if bad:
        raise UsageError(f"--for {bad[0]!r} is not a kind of work; choose from {', '.join(WORK)}")
    if (package or model or dest or sysroot) and not target:
        raise UsageError("--package, --model, --dest and --sysroot describe a device: give --target T too")
    if model:
        from pathlib import Path

        if not Path(model).is_file():
            raise UsageError(f"--model {model}: no such file" if not Path(model).exists() else f"--model {model}: not a file")
    s = common.settings(source=source, **{"build.engine": engine, "deploy.dest": dest, "linux.sysroot": sysroot})
    checks = run_checks(work=items, source=common.source_dir(s), docker_engine=s["build.engine"])
    device = None
    if target:
        from ..diagnose import check_device
        from ..runner import open_target

        with open_target(target, s) as t:
            info, device_checks = check_device(t, dest=s["deploy.dest"], package=package, model=model)
        device = {"target": target, "kind": info.kind, "os": info.os, "soc": info.soc, "htp_arch": info.htp_arch}
        for c in device_checks:
            c.name = f"device:{c.name}"
        checks += device_checks
    failed = [c for c in checks if c.required and c.status == "missing"]
    data = {"ok": not failed, "work": items, "checks": [c.to_json() for c in checks]}
    if device is not None:
        data["device"] = device
    ui.result(data, render(checks))
    if failed:
        raise EnvironmentMissing(f"missing for {', '.join(items) or target or 'hexbuild'}: "
                                 f"{', '.join(c.name for c in failed)}", hint=failed[0].fix)


def render(checks):
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    colours = {"ok": "green", "missing": "red", "warn": "yellow", "info": "dim"}
    for c in checks:
        status = c.status if c.status != "missing" or c.required else "absent"
        # Text, not markup: 'device:package:htp-lib' would print an emoji, a '[' in a path vanish
        table.add_row(Text(c.name + (" *" if c.required else "")), Text(status, style=colours[c.status]),
                      Text(c.detail), Text(c.fix or ""))
    return table


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
