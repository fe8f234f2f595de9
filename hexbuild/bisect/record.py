"""A bisect in the bench history (the same SQLite file as `hexbuild bench`): the request and how it
ended (table ``bisects``), each step's verdict and figures (``bisect_steps``), and each llama-bench
run as an ordinary results row whose bench_id is ``<bisect id>-<commit>`` and whose revision is the
built one, so `bench compare` can set any two steps side by side. `bisect --resume` reads it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..bench import history
from ..errors import UsageError

RUNNING, DONE, INTERRUPTED, FAILED = "running", "done", "interrupted", "failed"


def step_bench_id(bisect_id: str, sha: str) -> str:
    return f"{bisect_id}-{sha[:12]}"


def _write(db: Path, sql: str, params: tuple) -> None:
    conn = history.connect(db)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, params)
        conn.execute("COMMIT")
    finally:
        conn.close()


def start(db: Path, bisect_id: str, source: str, request: dict[str, Any]) -> None:
    _write(db, "INSERT INTO bisects (id, time, source, status, request, result) VALUES (?, ?, ?, ?, ?, NULL)",
           (bisect_id, history.now(), source, RUNNING, json.dumps(request)))


def set_status(db: Path, bisect_id: str, status: str, result: dict[str, Any] | None = None) -> None:
    _write(db, "UPDATE bisects SET status = ?, result = ? WHERE id = ?",
           (status, json.dumps(result) if result is not None else None, bisect_id))


def save_step(db: Path, bisect_id: str, step: int, sha: str, verdict: str, reason: str | None,
              data: dict[str, Any]) -> None:
    _write(db, "INSERT OR REPLACE INTO bisect_steps (bisect_id, step, commit_sha, verdict, reason, data, time) "
               "VALUES (?, ?, ?, ?, ?, ?, ?)", (bisect_id, step, sha, verdict, reason, json.dumps(data), history.now()))


def unfinished(db: Path, source: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """The latest bisect of ``source`` that did not finish: its id, request and steps."""
    if not db.is_file():
        raise UsageError(f"nothing to resume: no bench history at {db}", hint="give --db, or start a bisect")
    conn = history.connect(db, create=False)
    try:
        row = conn.execute("SELECT id, request FROM bisects WHERE source = ? AND status != ? ORDER BY time DESC, "
                           "rowid DESC LIMIT 1", (source, DONE)).fetchone()
        if row is None:
            raise UsageError(f"nothing to resume: every bisect of {source} in {db} finished",
                             hint="start a new one with --good and --bad")
        steps = [{"step": s, "commit": c, "verdict": v, "reason": r, **json.loads(d)} for s, c, v, r, d in conn.execute(
            "SELECT step, commit_sha, verdict, reason, data FROM bisect_steps WHERE bisect_id = ? ORDER BY step",
            (row[0],))]
        return row[0], json.loads(row[1]), steps
    finally:
        conn.close()


def prior_runs(db: Path | None, bench_id: str, kind: str) -> list[float]:
    """The figure of each llama-bench run the history has under ``bench_id`` (a step cut short)."""
    if db is None or not db.is_file():
        return []
    rows = history.select(db, "WHERE bench_id = ? AND kind = ?", (bench_id, kind))
    per_rep: dict[Any, float] = {}
    for r in rows:  # the first record of the metric's kind in each run, as the step read it
        per_rep.setdefault(r["rep"], float(r["avg_ts"]))
    return [v for _, v in sorted(per_rep.items(), key=lambda kv: kv[0] or 0)]
