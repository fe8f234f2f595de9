"""A release's stages as the report records them, and the report's human form."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HexbuildError
from ..ui import human_size, ui
from .options import REPORT


@dataclass
class Stage:
    name: str
    os: str | None = None
    status: str = "pending"  # pending | running | ok | failed | skipped
    duration_s: float | None = None
    summary: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)  # build / verify / devices details

    @property
    def title(self) -> str:
        return f"{self.name} ({self.os})" if self.os else self.name

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "os": self.os, "status": self.status,
               "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
               "summary": self.summary, "artifacts": self.artifacts, "error": self.error}
        out.update(self.data)
        return out


@dataclass
class _Built:
    os: str
    path: Path
    meta: dict[str, Any]
    verify: dict[str, Any] | None = None  # the build's own verify report (VerifyReport.to_json())
    verify_error: HexbuildError | None = None  # the build's package failed its verification


def _annotate_each(stage: str, failures: list[str]) -> None:
    """One annotation per failed target when there are several (the stage's own error names
    only the first)."""
    if len(failures) > 1:
        for f in failures:
            ui.error(f"{stage}: {f}")


def _verify_summary(report: dict[str, Any]) -> dict[str, Any]:
    checks = report.get("checks") or []
    return {"ok": bool(report.get("ok")), "checks_total": len(checks), "warnings": report.get("warnings", 0),
            "failures": report.get("failures", 0), "htp_versions": report.get("htp_versions") or [],
            "problems": [c for c in checks if c.get("status") != "ok"]}


def _verify_text(v: dict[str, Any]) -> str:
    return (f"{v['checks_total']} checks, {v['failures']} failed, {v['warnings']} warnings; "
            f"HTP {' '.join(v['htp_versions']) or 'none'}")


def _human(report: dict[str, Any]) -> str:
    lines = []
    for s in report["stages"]:
        title = s["name"] + (f" ({s['os']})" if s["os"] else "")
        dur = f"{s['duration_s']:.1f}s" if s["duration_s"] is not None else ""
        lines.append(f"{title:<20} {s['status']:<8} {dur:>8}  {s['summary'] or ''}".rstrip())
    if report["artifacts"]:
        lines.append("")
        for a in report["artifacts"]:
            lines.append(f"{a['path']}  {human_size(a['size'])}  sha256 {a['sha256']}")
    for d in report["devices"]:
        smoke = d.get("smoke") or {}
        lines.append(f"{d['target']}: deploy {d.get('deploy')}" + (f", smoke {smoke.get('status')}" if smoke else ""))
    lines.append("")
    lines.append(f"report: {Path(report['dist']) / REPORT}")
    return "\n".join(lines)
