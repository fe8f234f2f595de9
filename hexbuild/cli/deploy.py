"""hexbuild deploy: push a package (and models, and launch scripts) to one or many targets."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from . import common

# Written out, not read from targets.registry: that would import every target module at every
# start. tests/test_targets.py holds it to the registry's forms.
TARGET_FORMS = ("adb | adb:SERIAL | adb://HOST[:PORT][/SERIAL] | adb+ssh://[USER@]HOST[:PORT][/SERIAL] | "
                "adb+tcp://HOST[:PORT] | ssh://[USER@]HOST[:PORT] | local:DIR | qemu[:DIR]")
# rich markup: a literal '[' is written '\\['
TARGET_HELP = (TARGET_FORMS + " (repeatable)").replace("[", "\\[")


def deploy_command(
    package: Optional[str] = typer.Argument(None, metavar="[PKG]",
                                            help="Install dir or .tar.gz (default: the last build's pkg-*/llama.cpp)."),
    target: Optional[List[str]] = typer.Option(None, "--target", "-t", metavar="TARGET", help=TARGET_HELP),
    all_devices: bool = typer.Option(False, "--all", help="Every ready device on the local adb server."),
    model: Optional[List[str]] = typer.Option(None, "--model", "-m", metavar="FILE.gguf",
                                              help="Model to put in the models directory (repeatable)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", metavar="N",
                                       help="Write launch scripts opening N HTP sessions (1-16) into <dest>/scripts."),
    verify: bool = typer.Option(False, "--verify", help="Re-hash every file on the device and repair drift."),
    rollback: bool = typer.Option(False, "--rollback", help="Switch back to the previous install."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan against the device: list what would be pushed and removed."),
    dest: Optional[str] = typer.Option(None, "--dest", metavar="DIR", help="Install directory on the target."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", metavar="DIR", help="Models directory on the target."),
    parallel: Optional[int] = typer.Option(None, "--parallel", metavar="N", help="Targets deployed at once."),
    wait: Optional[float] = typer.Option(None, "--wait", metavar="SECONDS",
                                         help="Wait this long for another deploy to the same destination (default 10)."),
    stale_lock: Optional[float] = typer.Option(None, "--stale-lock", metavar="SECONDS",
                                               help="Break another deploy's lock older than this (default 3600)."),
    source: Optional[str] = typer.Option(None, "--source", "-s", metavar="DIR", help="The llama.cpp checkout."),
    bundle_runtime: Optional[bool] = typer.Option(None, "--bundle-runtime/--no-bundle-runtime",
                                                  help="Ship the glibc loader and runtime libraries (runtime/) for boards with an older glibc."),
    sysroot: Optional[str] = typer.Option(None, "--sysroot", metavar="DIR",
                                          help="AArch64 glibc runtime for qemu: targets and --bundle-runtime (default: the open toolchain image's)."),
) -> None:
    """Deploy incrementally and atomically: only changed files travel, the switch is one rename."""
    from ..errors import UsageError

    if ndev is not None and not 1 <= ndev <= 16:
        raise UsageError(f"--ndev must be from 1 to 16, got {ndev}")
    if rollback and (model or ndev or verify):
        raise UsageError("--rollback switches installs only; it takes no --model, --ndev or --verify")
    from ..deploy.models import require_gguf

    for m in model or []:  # the models are what they claim before the package is read
        require_gguf(m)
    pkg = _early_package(package, rollback)
    targets = []
    try:
        from ..deploy import default_package, load_package, raise_for_failures
        from ..targets import parse_target
        from ..ui import ui

        s = common.settings(source=source, **{"deploy.dest": dest, "deploy.models_dir": models_dir,
                                              "deploy.ndev": ndev, "deploy.parallel": parallel, "deploy.wait": wait,
                                              "deploy.stale_lock": stale_lock,
                                              "deploy.bundle_runtime": bundle_runtime, "linux.sysroot": sysroot})
        specs = list(target or []) or ([] if all_devices else list(s["deploy.targets"]))
        if all_devices:
            specs += _ready_devices(s, specs)
        if not specs:
            raise UsageError("no target given", hint="--target adb (one phone), --target adb:SERIAL, or --all")
        if len(set(specs)) != len(specs):
            raise UsageError("the same target is given twice: " + next(x for x in specs if specs.count(x) > 1))
        targets = [parse_target(spec, s) for spec in specs]  # all malformed specs fail before any work
        path = None
        if not rollback:  # its files are hashed in the background from here on (deploy/package.py)
            path = Path(package) if package else default_package(common.source_dir(s), s["build.install_dir"])
            pkg = pkg or load_package(path)
        results = _deploy(pkg, targets, s, model=model, verify=verify, rollback=rollback, dry_run=dry_run,
                          path=path)
    finally:
        if pkg is not None:
            pkg.close()
        for t in targets:
            t.close()
    ui.result([r.to_json() for r in results], lambda: _table(results, dry_run))
    raise_for_failures(results)


def _early_package(package: str | None, rollback: bool):
    """The package named on the command line, loaded first: its hashing (a thread of its own,
    deploy/package.py) then runs while the settings and targets are read and the devices probed,
    and no longer holds up the release's name. One that cannot be loaded is left for its turn,
    so that a bad target is still named before a bad package."""
    from ..errors import HexbuildError

    if rollback or not package:
        return None
    from ..deploy.package import load_package

    try:
        return load_package(Path(package))
    except HexbuildError:
        return None


def _deploy(pkg, targets, s, *, model, verify: bool, rollback: bool, dry_run: bool, path):
    from ..deploy import DeployOptions, deploy
    from ..ui import ui

    opts = DeployOptions(dest=s["deploy.dest"] or None, models=[Path(m) for m in model or []],
                         models_dir=s["deploy.models_dir"] or None, ndev=s["deploy.ndev"], verify=verify,
                         rollback=rollback, dry_run=dry_run, parallel=s["deploy.parallel"], wait=s["deploy.wait"],
                         stale_lock=s["deploy.stale_lock"], bundle_runtime=s["deploy.bundle_runtime"],
                         sysroot=s["linux.sysroot"])
    if pkg is not None:
        ui.info(f"package {path}: {len(pkg.files)} files, {_size(pkg.bytes)}")
    if not ui.json:
        from ..ui import warm_rich

        warm_rich()  # the result table's: imported while the devices answer
    with ui.progress() as progress:
        opts.progress = progress
        return deploy(pkg, targets, opts)


def _ready_devices(s, already: list[str]) -> list[str]:
    from ..targets.adb import ready_local_devices
    from ..targets.posix import not_ready_message
    from ..ui import ui
    from ..errors import EnvironmentMissing

    ready, others = ready_local_devices(s["ssh.timeout"])
    for d in others:
        what, fix = not_ready_message(d.state)
        ui.warn(f"skipping {d.serial}: it {what}; {fix}")
    if not ready and not already:
        raise EnvironmentMissing("--all: no ready device on the local adb server",
                                 hint="adb devices -l; plug in a phone with USB debugging on or adb connect HOST:PORT")
    return [f"adb:{serial}" for serial in ready if f"adb:{serial}" not in already]


def _size(n: int) -> str:
    from ..ui import human_size

    return human_size(n)


def _table(results, dry_run: bool):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title="deploy plan (dry run)" if dry_run else None, title_justify="left")
    for col in ("target", "device", "htp", "status", "pushed", "removed", "time"):
        table.add_column(col, overflow="fold")
    colours = {"ok": "green", "unchanged": "cyan", "failed": "red"}
    notes: list[str] = []
    for r in results:
        device = " ".join(x for x in (r.serial, r.soc) if x) or "-"
        sent = (r.plan or {}).get("bytes_to_push", 0) if dry_run else r.bytes_pushed
        files = (r.plan or {}).get("files_to_push", 0) if dry_run else r.files_pushed
        verb = "to push" if dry_run else "pushed"
        wire = "" if dry_run or r.wire_bytes == r.bytes_pushed else f" ({_size(r.wire_bytes)} on the wire)"
        table.add_row(r.target, device, r.htp_arch or "?", f"[{colours.get(r.status, 'white')}]{r.status}[/]",
                      f"{files}/{r.files_total} files {verb}, {_size(sent)}{wire}", str(r.files_removed),
                      f"{r.duration_s:.1f}s" + (f" ({r.push_s:.1f}s sending)" if r.push_s >= 0.05 else ""))
        if r.error:
            notes.append(f"{r.serial or r.target}: {r.error}" + (f" ({r.hint})" if r.hint else ""))
        elif dry_run and r.plan:
            lines = [f"  push   {p}" for p in r.plan.get("push", [])]
            lines += [f"  repair {p}" for p in r.plan.get("repair", [])]
            lines += [f"  remove {p}" for p in r.plan.get("remove", [])]
            lines += [f"  model  {m}" for m in r.plan.get("models_push", [])]
            if r.plan.get("swap"):
                lines.append(f"  switch to {r.plan.get('release')}")
            notes.append(f"{r.serial or r.target}:\n" + ("\n".join(lines) if lines else "  nothing to do"))
    return Group(table, *(Text(n) for n in notes))


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy_command)
