"""`hexbuild bench compare`: two sets of benchmark rows (a revision or package in the history
database, or a bench's results.json / a database file) side by side, as upstream's
scripts/compare-llama-bench.py compares commits.

Per configuration: the median tokens/s of the repeats on each side, the ratio
candidate/baseline, and the noise: the half-range of the repeats relative to their median,
summed over both sides. A coarser ``--by`` (default: every configuration key) reports the
geometric mean of its configurations' ratios and their mean noise. A regression is a ratio
below ``threshold - noise``: slower by more than the allowed 5 % *beyond* what the repeats
themselves scatter.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import history
from ..errors import EnvironmentMissing, RegressionFound, UsageError
from ..ui import ui

SCHEMA = "hexbuild.bench-compare/1"
KEYS = ("device", "target", "model", "sessions", "devices", "batch", "ubatch", "threads", "test")
DEFAULT_BY = ("device", "model", "sessions", "devices", "batch", "ubatch", "threads", "test")
DEFAULT_THRESHOLD = 0.95


@dataclass
class Side:
    spec: str
    label: str          # what it resolved to (a revision, a package, a file)
    rows: list[dict[str, Any]]


def parse_by(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT_BY
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in keys if k not in KEYS]
    if bad or not keys:
        raise UsageError(f"--by: unknown key {bad[0] if bad else text!r}; valid: {', '.join(KEYS)}")
    return keys


def load_side(spec: str, db: Path) -> Side:
    """REV (a revision, a package sha256 or a bench id, or a unique prefix of one) from the
    database, or FILE: a results.json, a bench output directory, or another database."""
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "results.json").is_file():
        path = path / "results.json"
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(16)
        if head.startswith(b"SQLite format 3"):
            return Side(spec, str(path), history.select(path))
        return Side(spec, str(path), history.rows_from_results_json(path))
    if not spec.strip():
        raise UsageError("--baseline/--candidate is empty")
    for column in ("revision", "package_sha256", "bench_id"):
        rows = history.select(db, f"WHERE {column} = ?", (spec,))
        if rows:
            return Side(spec, f"{column} {spec}", rows)
    for column in ("revision", "package_sha256", "bench_id"):
        values = {r[0] for r in _distinct(db, column, spec)}
        if len(values) > 1:
            raise UsageError(f"{spec!r} matches several {column} values: {', '.join(sorted(values)[:5])}",
                             hint="give more characters")
        if values:
            value = values.pop()
            return Side(spec, f"{column} {value}", history.select(db, f"WHERE {column} = ?", (value,)))
    known = [r[0] for r in _distinct(db, "revision", "")][:8]
    raise UsageError(f"no results for {spec!r} in {db} (not a revision, package sha256, bench id or file)",
                     hint=f"revisions there: {', '.join(known)}" if known else "run hexbuild bench first")


def _distinct(db: Path, column: str, prefix: str) -> list[tuple[str]]:
    conn = history.connect(db, create=False)
    try:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return conn.execute(f"SELECT DISTINCT {column} FROM results WHERE {column} LIKE ? ESCAPE '\\' "
                            f"AND {column} IS NOT NULL", (escaped + "%",)).fetchall()
    finally:
        conn.close()


def _key_value(row: dict[str, Any], key: str) -> Any:
    if key == "device":
        return row.get("device_serial") or row.get("device_soc") or row.get("target")
    return row.get(key)


def _spread(values: Sequence[float]) -> float:
    """Half the range of the repeats relative to their median (0 for one run)."""
    med = statistics.median(values)
    return (max(values) - min(values)) / 2 / med if med else 0.0


def _emulated(row: dict[str, Any]) -> bool:
    return bool(row.get("emulated"))


def refuse_emulator_against_device(baseline: Side, candidate: Side) -> None:
    """One side measured on the virtual NPU (qemu+npu:, hexbuild/fidelity.py) and the other on a
    device: an emulator's wall time is no phone's timing, so the ratio would mean nothing."""
    sides = [(s, {_emulated(r) for r in s.rows}) for s in (baseline, candidate)]
    emulated = [s for s, flags in sides if flags == {True}]
    device = [s for s, flags in sides if flags == {False}]
    if emulated and device:
        model = next((r.get("npu_model") for r in emulated[0].rows if r.get("npu_model")), None)
        raise UsageError(f"{emulated[0].label} was measured on an emulated NPU{f' ({model})' if model else ''} and "
                         f"{device[0].label} on a device: an emulator's timings are not compared with a phone's",
                         hint="compare emulated runs with emulated runs (the same emulator's relative figures), "
                              "a device's with a device's")


def compare(baseline: Side, candidate: Side, *, by: Sequence[str] = DEFAULT_BY,
            threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    refuse_emulator_against_device(baseline, candidate)

    # Every key ends with whether the rows are an emulator's: emulated figures pair and group only
    # with emulated ones (a side may hold both, e.g. a revision benched on a phone and on qemu+npu:).
    def groups(rows: list[dict[str, Any]], keys: Sequence[str]) -> dict[tuple, list[float]]:
        out: dict[tuple, list[float]] = {}
        for r in rows:
            out.setdefault((*(_key_value(r, k) for k in keys), _emulated(r)), []).append(float(r["avg_ts"]))
        return out

    def head(key: tuple) -> tuple:  # a full configuration's --by group
        return key[:len(by)] + key[-1:]

    # Repeats are compared within one full configuration; --by then sets how those comparisons
    # are reported (a coarser --by averages them geometrically instead of pooling raw t/s of
    # different configurations, which would look like noise). --by also decides the pairing: a
    # group both sides have that shares no full configuration (the runs differ only in a key
    # --by leaves out, such as threads) is compared as a whole, each side's configurations
    # averaged geometrically.
    full = tuple(dict.fromkeys((*by, *DEFAULT_BY)))
    base, cand = groups(baseline.rows, full), groups(candidate.rows, full)
    bounds = {"baseline": _bounds(baseline.rows, by), "candidate": _bounds(candidate.rows, by)}
    per: dict[tuple, list[tuple[float, float, float, float, float, int, int]]] = {}
    for key in [k for k in base if k in cand]:
        per.setdefault(head(key), []).append(_pair([base[key]], [cand[key]]))
    for group in dict.fromkeys(head(k) for k in base):
        if group not in per and any(head(k) == group for k in cand):
            per[group] = [_pair([v for k, v in base.items() if head(k) == group],
                                [v for k, v in cand.items() if head(k) == group])]
    rows = []
    for key, items in per.items():
        mb = statistics.geometric_mean([i[0] for i in items])
        mc = statistics.geometric_mean([i[1] for i in items])
        ratio = statistics.geometric_mean([i[2] for i in items])
        sb, sc = statistics.fmean([i[3] for i in items]), statistics.fmean([i[4] for i in items])
        noise = sb + sc
        if ratio < threshold - noise:
            status = "regression"
        elif ratio > 1 + (1 - threshold) + noise:
            status = "faster"
        else:
            status = "same"
        rows.append({**dict(zip(by, key)), "baseline_ts": round(mb, 4), "candidate_ts": round(mc, 4),
                     "ratio": round(ratio, 4), "noise": round(noise, 4), "baseline_spread": round(sb, 4),
                     "candidate_spread": round(sc, 4), "baseline_n": sum(i[5] for i in items),
                     "candidate_n": sum(i[6] for i in items), "configurations": len(items), "status": status,
                     **_roofline_cells(key, mb, mc, bounds), **({"emulated": True} if key[-1] else {})})
    base = {head(k): v for k, v in base.items()}
    cand = {head(k): v for k, v in cand.items()}
    only = {"baseline": [dict(zip(by, k)) for k in base if k not in cand],
            "candidate": [dict(zip(by, k)) for k in cand if k not in base]}
    if not rows:
        raise UsageError(f"nothing to compare: {baseline.label} and {candidate.label} share no {'/'.join(by)}",
                         hint="compare runs of the same models and tests, or narrow --by")
    ratios = [r["ratio"] for r in rows]
    return {"schema": SCHEMA, "baseline": baseline.label, "candidate": candidate.label, "by": list(by),
            "threshold": threshold, "rows": rows, "only_in": only,
            "geomean_ratio": round(statistics.geometric_mean(ratios), 4) if all(x > 0 for x in ratios) else None,
            "regressions": sum(r["status"] == "regression" for r in rows),
            **_emulated_mark(rows, baseline.rows + candidate.rows)}


def _emulated_mark(rows: list[dict[str, Any]], measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The comparison's own mark (hexbuild/fidelity.py) when every row set emulated runs side by
    side: relative figures of the same emulator."""
    if not rows or not all(r.get("emulated") for r in rows):
        return {}
    models = sorted({str(r["npu_model"]) for r in measured if _emulated(r) and r.get("npu_model")})
    return {"emulated": True, **({"npu_model": ", ".join(models)} if models else {})}


def emulated_line(result: dict[str, Any]) -> str | None:
    """What the output says of emulated rows: whose figures they are."""
    n = sum(bool(r.get("emulated")) for r in result["rows"])
    if not n:
        return None
    what = f" ({result['npu_model']})" if result.get("npu_model") else ""
    whose = "Both sides were" if n == len(result["rows"]) else f"{n} of {len(result['rows'])} groups were"
    return (f"{whose} measured on an emulated NPU{what}: the ratios are the emulator's relative figures, "
            "not a phone's timings.")


def _pair(b: list[list[float]], c: list[list[float]]) -> tuple[float, float, float, float, float, int, int]:
    """(baseline t/s, candidate t/s, ratio, spreads, run counts) of configurations set against
    each other: one each when they pair, else each side's, averaged geometrically."""
    mb = statistics.geometric_mean([statistics.median(v) for v in b])
    mc = statistics.geometric_mean([statistics.median(v) for v in c])
    return (mb, mc, mc / mb if mb else float("inf"), statistics.fmean([_spread(v) for v in b]),
            statistics.fmean([_spread(v) for v in c]), sum(map(len, b)), sum(map(len, c)))


def _bounds(rows: list[dict[str, Any]], by: Sequence[str]) -> dict[tuple, float]:
    """The memory roofline bound (t/s) of each group (keyed as compare's groups), from the rows'
    bytes_per_token and peak_gbs (eval rows that bench gave a roofline)."""
    found: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get("bytes_per_token") and r.get("peak_gbs"):
            found.setdefault((*(_key_value(r, k) for k in by), _emulated(r)), []).append(
                r["peak_gbs"] * 1e9 / r["bytes_per_token"])
    return {k: statistics.median(v) for k, v in found.items()}


def _roofline_cells(key: tuple, mb: float, mc: float, bounds: dict[str, dict[tuple, float]]) -> dict[str, Any]:
    b, c = bounds["baseline"].get(key), bounds["candidate"].get(key)
    return {"baseline_pct_of_bound": round(100 * mb / b, 2) if b else None,
            "candidate_pct_of_bound": round(100 * mc / c, 2) if c else None}


def markdown(result: dict[str, Any]) -> str:
    by = result["by"]
    roof = any(r.get("candidate_pct_of_bound") is not None for r in result["rows"])
    head = [*by, "baseline t/s", "candidate t/s", "speedup", "± noise", "status"] + \
        (["% of DRAM bound (baseline → candidate)"] if roof else [])
    lines = [f"Baseline **{result['baseline']}**, candidate **{result['candidate']}**", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" if i < len(by) else "---:" for i in range(len(head))) + "|"]
    for r in result["rows"]:
        status = "**regression**" if r["status"] == "regression" else r["status"]
        cells = [str(r[k]) for k in by] + [f"{r['baseline_ts']:.2f}", f"{r['candidate_ts']:.2f}",
                                             f"{r['ratio']:.3f}", f"{r['noise'] * 100:.1f}%",
                                             status + (" (emulated)" if r.get("emulated") else "")]
        if roof:
            cells.append(" → ".join("-" if v is None else f"{v:.1f}%"
                                    for v in (r.get("baseline_pct_of_bound"), r.get("candidate_pct_of_bound"))))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    if result["geomean_ratio"] is not None:
        lines.append(f"Geometric mean speedup {result['geomean_ratio']:.3f}; "
                     f"{result['regressions']} regression(s) below {result['threshold']:.2f} beyond the noise "
                     "(noise: half-range of the repeats relative to their median, both sides summed).")
    for side, keys in result["only_in"].items():
        if keys:
            lines.append(f"Only in the {side}: {len(keys)} group(s).")
    if emulated_line(result):
        lines.append(emulated_line(result))
    return "\n".join(lines) + "\n"


def chart_png(result: dict[str, Any]) -> bytes:
    """The speedup of each group with its noise as a whisker, 1.0 and the threshold marked."""
    from ..results.chart import png, pyplot

    plt = pyplot()

    rows = result["rows"]
    names = [" · ".join(str(r[k]) for k in result["by"] if r[k] is not None) for r in rows]
    colors = ["#d8433b" if r["status"] == "regression" else "#3b9d5d" if r["status"] == "faster" else "#3b7dd8"
              for r in rows]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.4 * len(rows) + 1.5)))
    y = list(range(len(rows)))
    ax.barh(y, [r["ratio"] for r in rows], xerr=[r["noise"] for r in rows], color=colors, capsize=3)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(result["threshold"], color="#d8433b", linewidth=0.8, linestyle="--")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup (candidate / baseline tokens/s)")
    ax.set_title(f"{result['candidate']} vs {result['baseline']}", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return png(fig)


def run_compare(*, db: Path, baseline: str, candidate: str, by: str | None, fail_below: float | None,
                out: Path, boards_as_one: bool = False) -> dict[str, Any]:
    """``boards_as_one``: rows are one device by their SoC (a lab's device type), not by serial:
    a lab runs each job on whichever board of the type is free."""
    import os

    from ..paths import atomic_write, output_mode

    if fail_below is not None and not 0 < fail_below <= 1:
        raise UsageError("--fail-below must be a ratio in (0, 1], e.g. 0.95")
    sides = [load_side(baseline, db), load_side(candidate, db)]
    if boards_as_one:
        for side in sides:
            side.rows = [{**r, "device_serial": None} for r in side.rows]
    result = compare(*sides, by=parse_by(by), threshold=fail_below if fail_below is not None else DEFAULT_THRESHOLD)
    md = markdown(result)
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "compare.json", "markdown": out / "compare.md", "chart": out / "compare.png"}
    result["files"] = {k: str(v) for k, v in files.items()}
    atomic_write(files["json"], json.dumps(result, indent=2) + "\n", mode=output_mode())
    atomic_write(files["markdown"], md, mode=output_mode())
    try:  # the regression gate below must not depend on the optional chart extra
        atomic_write(files["chart"], chart_png(result), mode=output_mode())
    except EnvironmentMissing as e:
        ui.warn(f"no chart: {e.message} ({e.hint})")
        del files["chart"], result["files"]["chart"]
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(f"### hexbuild bench compare\n\n{md}\n")
    result["markdown"] = md
    if fail_below is not None and result["regressions"]:
        worst = min(result["rows"], key=lambda r: r["ratio"])
        raise RegressionFound(
            f"{result['regressions']} regression(s): worst {worst['ratio']:.3f}× "
            f"({' '.join(str(worst[k]) for k in result['by'])}), below {fail_below} beyond "
            f"±{worst['noise'] * 100:.1f}% noise", details={"result": {k: v for k, v in result.items() if k != "markdown"}})
    return result
