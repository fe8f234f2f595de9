"""The inspect gate inside `verify --strict` and `release` (strict under CI=true): one verify
check per NPU library, ``fail`` when a function has more in-loop HVX spills or helper calls in
hot loops than the baseline accepts (exit 5, like any failed verification), ``warn`` when no
disassembler is installed (fatal under --strict: exit 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import EnvironmentMissing
from ..verify import FAIL, OK, WARN, Check, HTP_NAME
from .baseline import compare, load_baseline
from .objdump import find_objdump
from .report import inspect_library

CHECK = "inspect"


def baseline_path(settings, given: str | None = None) -> Path | None:
    """--baseline, else inspect.baseline (relative to the config file that names it)."""
    if given:
        return Path(given).expanduser()
    value = settings["inspect.baseline"]
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute() and settings.origin("inspect.baseline") == "file" and settings.config_file:
        path = settings.config_file.parent / path
    return path


def gate_checks(pkg: Path, *, baseline: Path | None = None, objdump: str | None = None) -> list[Check]:
    libs = sorted(p for p in (Path(pkg) / "lib").glob("libggml-htp-v*.so") if HTP_NAME.match(p.name) and p.is_file())
    if not libs:
        return []
    accepted = load_baseline(baseline) if baseline else None
    try:
        tool = find_objdump(objdump)
    except EnvironmentMissing as e:
        return [Check("lib/libggml-htp-v*.so", CHECK, WARN, f"not inspected: {e.message}; {e.hint}")]
    checks = []
    for lib in libs:
        rel = f"lib/{lib.name}"
        report = inspect_library(lib, tool, with_lines=False)
        found = compare(report, accepted)
        bad = [f for f in found if f.regression]
        if bad:
            more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
            checks.append(Check(rel, CHECK, FAIL, "; ".join(f.describe() for f in bad[:3]) + more
                                + " - hexbuild inspect shows them; a baseline (--baseline) accepts known ones"))
        elif found:
            checks.append(Check(rel, CHECK, OK, f"{len(found)} known finding(s), all within the baseline"))
        else:
            checks.append(Check(rel, CHECK, OK, "no in-loop HVX spills, no helper calls in hot loops"))
        for w in report.warnings:
            checks.append(Check(rel, CHECK, WARN, w))
    return checks


def add_to_report(report: dict[str, Any], pkg: Path, settings, warn=None) -> dict[str, Any]:
    """``report`` (VerifyReport.to_json()) with the gate's checks added and its counts redone;
    ``warn(text)`` is called for each warning the gate raises."""
    checks = [c.to_json() for c in gate_checks(pkg, baseline=baseline_path(settings),
                                               objdump=settings["inspect.objdump"] or None)]
    for c in checks:
        if c["status"] == WARN and warn is not None:
            warn(f"{c['file']}: {c['check']}: {c['detail']}")
    all_checks = list(report.get("checks") or []) + checks
    failures = sum(c["status"] == FAIL for c in all_checks)
    return {**report, "checks": all_checks, "failures": failures,
            "warnings": sum(c["status"] == WARN for c in all_checks), "ok": failures == 0}
