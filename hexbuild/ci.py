"""CI-provider output beyond log lines: compiler diagnostics as annotations, and the markdown
summary GitHub Actions shows on the run's page ($GITHUB_STEP_SUMMARY).

Folding (``ui.group``), ``::error::``/``::warning::`` lines and the timestamped plain log live in
hexbuild/ui.py; this module turns a build log into located annotations and a release report
into markdown.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from .ui import human_size, ui

# GitHub shows at most 10 error and 10 warning annotations per step; more only add log noise.
MAX_ANNOTATIONS = 10

# clang/gcc: `path:line:col: error: message`, `path:line: fatal error: message`.
_COMPILER = re.compile(
    r"^(?P<file>[^\s:][^:\n]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
    r"(?P<sev>fatal error|error|warning):\s*(?P<msg>.+?)\s*$")
# CMake: `CMake Error at ggml/src/ggml-hexagon/CMakeLists.txt:12 (message):` then indented text.
_CMAKE = re.compile(r"^CMake (?P<sev>Error|Warning)(?: \(dev\))? at (?P<file>[^:\n]+):(?P<line>\d+)\b.*:\s*$")
# ninja's progress prefix and make's job prefix in front of a compiler line.
_PREFIX = re.compile(r"^(?:\[\d+/\d+\]\s+|\S+\s*\|\s*)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    col: int | None
    severity: str  # error | warning
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "col": self.col, "severity": self.severity,
                "message": self.message}


def relative_path(path: str, roots: Iterable[str]) -> str:
    """A path as the repository sees it: container and host roots of the checkout stripped, so
    that GitHub can place the annotation on the file."""
    p = posixpath.normpath(path.replace("\\", "/"))
    for root in roots:
        root = posixpath.normpath(str(root).replace("\\", "/"))
        if root in ("", ".", "/"):
            continue
        if p == root:
            return "."
        if p.startswith(root + "/"):
            return p[len(root) + 1:]
    return p[2:] if p.startswith("./") else p


def parse_diagnostics(text: str, *, roots: Iterable[str] = ("/workspace",)) -> list[Diagnostic]:
    """Compiler and CMake errors/warnings in a build log, in order, without duplicates (the
    same error is often printed once per translation unit or per HTP version)."""
    roots = list(roots)
    lines = _ANSI.sub("", text).splitlines()
    out: list[Diagnostic] = []
    seen: set[tuple[str, int, str]] = set()

    def add(file: str, line: int, col: int | None, sev: str, msg: str) -> None:
        rel = relative_path(file, roots)
        key = (rel, line, msg)
        if key not in seen:
            seen.add(key)
            out.append(Diagnostic(rel, line, col, sev, msg))

    for i, raw in enumerate(lines):
        line = _PREFIX.sub("", raw.rstrip())
        m = _COMPILER.match(line)
        if m:
            sev = "warning" if m.group("sev") == "warning" else "error"
            add(m.group("file"), int(m.group("line")), int(m.group("col")) if m.group("col") else None,
                sev, m.group("msg"))
            continue
        m = _CMAKE.match(line)
        if m:
            body = []
            for nxt in lines[i + 1:i + 8]:
                if not nxt.strip():
                    if body:
                        break
                    continue
                if not nxt.startswith((" ", "\t")):
                    break
                body.append(nxt.strip())
            msg = " ".join(body) or f"CMake {m.group('sev').lower()}"
            add(m.group("file"), int(m.group("line")), None, m.group("sev").lower(), msg)
    return out


def annotate(diagnostics: Iterable[Diagnostic], *, severities: tuple[str, ...] = ("error",),
             limit: int = MAX_ANNOTATIONS) -> int:
    """Report diagnostics through ui (``::error file=…,line=…::`` on GitHub, a plain
    ``file:line: error: …`` line elsewhere). Returns how many were reported."""
    n = 0
    for d in diagnostics:
        if d.severity not in severities:
            continue
        if n >= limit:
            break
        if d.severity == "warning":
            ui.warn(d.message if ui.ci == "github" else f"{d.file}:{d.line}: {d.message}",
                    file=d.file, line=d.line, col=d.col)
        elif ui.ci == "github":
            ui.error(d.message, file=d.file, line=d.line, col=d.col)
        else:  # the compiler's own form: editors and GitLab's log make it clickable
            ui.info(f"{d.file}:{d.line}:" + (f"{d.col}:" if d.col else "") + f" error: {d.message}")
        n += 1
    return n


# How much of a failed build's log is searched for compiler errors.
LOG_TAIL_BYTES = 256 * 1024


def build_log_text(details: Mapping[str, Any]) -> str:
    """The end of a failed build's log: the log file BuildFailed names (its last 256 KiB),
    else the tail the error carries."""
    path = details.get("log")
    if isinstance(path, str) and path:
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError:
            pass
    tail = details.get("log_tail")
    if isinstance(tail, list):
        return "\n".join(str(v) for v in tail)
    return tail if isinstance(tail, str) else ""


def repo_path(rel: str, source: Path, env: Mapping[str, str] | None = None) -> str:
    """A checkout-relative path made relative to the repository GitHub checked out
    (GITHUB_WORKSPACE) when the checkout is a subdirectory of it."""
    env = os.environ if env is None else env
    workspace = env.get("GITHUB_WORKSPACE")
    if rel.startswith("/") or not workspace:
        return rel
    try:
        sub = source.resolve().relative_to(Path(workspace).resolve())
    except ValueError:
        return rel
    return (sub / rel).as_posix() if str(sub) != "." else rel


def annotate_build_log(details: Mapping[str, Any], source: Path, container_root: str) -> list[Diagnostic]:
    """Annotate the errors in a failed build's log (BuildFailed.details: ``log``, ``log_tail``)
    on the checkout's files; returns the errors found."""
    text = build_log_text(details)
    if not text:
        return []
    roots = [container_root, str(source.resolve()), str(source)]
    diags = [d for d in parse_diagnostics(text, roots=roots) if d.severity == "error"]
    diags = [Diagnostic(repo_path(d.file, source), d.line, d.col, d.severity, d.message) for d in diags]
    annotate(diags)
    return diags


# -- GitHub step summary ---------------------------------------------------------------------
def step_summary_path(env: Mapping[str, str] | None = None) -> Path | None:
    """Where GitHub Actions collects this step's markdown summary, when running there."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") != "true":
        return None
    value = env.get("GITHUB_STEP_SUMMARY", "").strip()
    return Path(value) if value else None


def append_step_summary(markdown: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Append to $GITHUB_STEP_SUMMARY (the runner concatenates what every process appends).
    A summary that cannot be written is a warning, never a failed release."""
    path = step_summary_path(env)
    if path is None:
        return None
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(markdown if markdown.endswith("\n") else markdown + "\n")
    except OSError as e:
        ui.warn(f"cannot write the step summary {path}: {e.strerror or e}")
        return None
    return path


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ").strip() or "-"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


_ICON = {"ok": "✅", "failed": "❌", "skipped": "⏭️", "running": "…"}


def release_summary(report: Mapping[str, Any]) -> str:
    """Markdown for a release report (the dict written as release-report.json): stages,
    artifacts with size and sha256, verification, device results."""
    ok = report.get("status") == "ok"
    title = "hexbuild release: " + ("succeeded" if ok else f"failed at {report.get('failed_stage') or '?'}")
    lines = [f"## {title}", ""]
    meta = []
    if report.get("revision"):
        meta.append(f"llama.cpp `{report['revision']}`")
    if report.get("os"):
        meta.append("OS " + ", ".join(report["os"]))
    meta.append(f"exit code {report.get('exit_code')}")
    lines += [" · ".join(meta), ""]
    err = report.get("error") or {}
    if err:
        lines += [f"> **error:** {_cell(err.get('message'))}"]
        if err.get("hint"):
            lines += [">", f"> hint: {_cell(err['hint'])}"]
        lines.append("")
        diags = (err.get("details") or {}).get("diagnostics") or []
        if diags:
            lines += ["### Build errors", ""]
            lines += _table(["file", "line", "message"],
                            [[f"`{d['file']}`", d["line"], d["message"]] for d in diags[:MAX_ANNOTATIONS]])
            lines.append("")

    stages = report.get("stages") or []
    lines += ["### Stages", ""]
    lines += _table(["stage", "status", "duration", "detail"],
                    [[s.get("name") + (f" ({s['os']})" if s.get("os") else ""),
                      f"{_ICON.get(s.get('status'), '')} {s.get('status')}",
                      f"{s['duration_s']:.1f}s" if s.get("duration_s") is not None else "-",
                      (s.get("error") or {}).get("message") or s.get("summary") or ""] for s in stages])
    lines.append("")

    assets = report.get("artifacts") or []
    if assets:
        lines += ["### Artifacts", ""]
        lines += _table(["file", "size", "sha256"],
                        [[f"`{a['name']}`", human_size(a["size"]), f"`{a['sha256']}`"] for a in assets])
        lines.append("")

    verifications = [s for s in stages if s.get("name") == "verify" and s.get("verify")]
    if verifications:
        lines += ["### Verification", ""]
        rows = []
        for s in verifications:
            v = s["verify"]
            rows.append([s.get("os"), "✅ ok" if v.get("ok") else "❌ failed", v.get("checks_total"),
                         v.get("warnings"), v.get("failures"), " ".join(v.get("htp_versions") or [])])
        lines += _table(["OS", "result", "checks", "warnings", "failures", "HTP versions"], rows)
        problems = [(s.get("os"), c) for s in verifications for c in s["verify"].get("problems") or []]
        if problems:
            lines += ["", "<details><summary>Failed and warning checks</summary>", ""]
            lines += _table(["OS", "file", "check", "status", "detail"],
                            [[o, f"`{c['file']}`", c["check"], c["status"], c["detail"]] for o, c in problems])
            lines += ["", "</details>"]
        lines.append("")

    devices = report.get("devices") or []
    if devices:
        lines += ["### Devices", ""]
        rows = []
        for d in devices:
            smoke = d.get("smoke") or {}
            rows.append([f"`{d.get('target')}`", d.get("device") or "-",
                         f"{_ICON.get(d.get('deploy'), '')} {d.get('deploy')}",
                         (f"{_ICON.get(smoke.get('status'), '')} {smoke.get('status')}"
                          + (f" (exit {smoke['exit_code']})" if smoke.get("exit_code") is not None else ""))
                         if smoke else "-",
                         d.get("error") or ""])
        lines += _table(["target", "device", "deploy", "smoke", "error"], rows)
        lines.append("")

    warnings = report.get("warnings") or []
    if warnings:
        lines += [f"### Warnings ({len(warnings)})" + (" — fatal (--strict)" if report.get("strict") else ""), ""]
        lines += [f"- {_cell(w)}" for w in warnings[:50]]
        lines.append("")
    return "\n".join(lines)
