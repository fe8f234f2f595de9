"""hexbuild verify: check an installed package before it goes to a phone or a release."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}
# Rows worth showing even when they pass: the NPU side is what this tool is about.
_ALWAYS_SHOWN = ("lib/libggml-htp-", "lib/libggml-hexagon.so")


def verify(
    pkg: str = typer.Argument(..., metavar="PKG", help="The install prefix, e.g. pkg-snapdragon/llama.cpp."),
    os_name: Optional[str] = typer.Option(None, "--os", metavar="android|linux",
                                          help="Target OS (default: the package's manifest, else build.os)."),
    htp: Optional[List[str]] = typer.Option(None, "--htp", metavar="v73,v79",
                                            help="HTP versions that must be present (default: the ones found)."),
    glibc: Optional[str] = typer.Option(None, "--glibc", metavar="X.Y",
                                        help="Linux: fail for files a system with this glibc cannot load (e.g. 2.31)."),
) -> None:
    """Check the NPU skels, the AArch64 programs and libraries, every DT_NEEDED and (Linux) the glibc they need."""
    from pathlib import Path

    from ..artifacts import package_os, parse_htp_versions, verify_package
    from ..errors import VerifyFailed
    from ..ui import ui

    s = common.settings(**{"build.os": os_name})
    expected = parse_htp_versions(htp) if htp else None
    path = Path(pkg)
    target_os = package_os(path, os_name, s["build.os"])
    report = verify_package(path, os=target_os, htp_versions=expected, glibc=glibc)
    ui.result(report.to_json(), _table(report, ui.verbose > 0))
    summary = (f"{report.package} ({report.os}, HTP {', '.join(report.htp_versions) or 'none'}): "
               f"{len(report.checks)} checks, {report.failures} failed, {report.warnings} warnings")
    for note in report.notes:
        ui.info(f"note: {note}")
    if report.ok:
        ui.info(summary)
        return
    too_new = [c for c in report.failed() if c.check == "glibc"]
    if too_new:
        files = ", ".join(f"{c.file} ({c.detail.split(':')[0].removeprefix('needs ')})" for c in too_new)
        raise VerifyFailed(f"a glibc {glibc} system cannot load {len(too_new)} file(s): {files}",
                           hint="deploy with --bundle-runtime (ships the package's own loader and libc), "
                                "or build against an older glibc")
    first = report.failed()[0]
    more = f" (and {report.failures - 1} more)" if report.failures > 1 else ""
    raise VerifyFailed(f"{first.file}: {first.check}: {first.detail}{more}",
                       hint=summary if not ui.json else None)


def _table(report, verbose: bool):
    from rich.table import Table

    table = Table(title=f"{report.package} ({report.os})", title_justify="left")
    for col in ("file", "check", "status", "detail"):
        table.add_column(col, overflow="fold")
    clean: dict[str, int] = {}
    for c in report.checks:
        if c.status == "ok" and not verbose and not c.file.startswith(_ALWAYS_SHOWN):
            if not any(o.file == c.file and o.status != "ok" for o in report.checks):
                clean[c.file] = clean.get(c.file, 0) + 1
                continue
        table.add_row(c.file, c.check, f"[{_STYLE[c.status]}]{c.status}[/]", c.detail)
    if clean:
        table.add_row(f"{len(clean)} more files", f"{sum(clean.values())} checks", f"[{_STYLE['ok']}]ok[/]",
                      "all passed (-v lists them)")
    return table


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
