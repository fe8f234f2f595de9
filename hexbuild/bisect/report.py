"""What a bisect writes: bisect.json (the result), bisect.md (the steps and the answer) and
bisect.png (the metric of every tested commit, oldest first, with the baseline and threshold)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import EnvironmentMissing
from ..paths import atomic_write
from ..ui import ui

SCHEMA = "hexbuild.bisect/1"


def _fig(step: dict[str, Any] | None, unit: str) -> str:
    if not step:
        return "-"
    if step.get("median") is not None:
        good = step.get("good") or {}
        beside = f", good beside it {good['median']:.2f}" if good.get("median") is not None else ""
        return f"{step['median']:.2f} {unit} (n={step['n']}{beside})"
    if step.get("failed") is not None:
        return f"{step['failed']} failed / {step.get('passed', 0)} passed"
    if step.get("relative_diff") is not None:
        return f"PPL {step.get('ppl_htp')} vs CPU {step.get('ppl_cpu')} ({step['relative_diff']:.2%})"
    return "-"


def unit_of(metric: str) -> str:
    return "t/s" if metric in ("eval", "prompt") else ""


def headline(doc: dict[str, Any]) -> str:
    unit = unit_of(doc["metric"])
    counts = (f"{doc['steps_taken']} measured steps for {doc['revisions']} revisions "
              f"(at most {doc['expected_steps']} without skips), {doc['skipped']} skipped")
    if doc["status"] == "found":
        fb, lg = doc["first_bad"], doc["last_good"]
        ratio = f", {fb['ratio']:.3f}x the good revision beside it" if fb.get("ratio") is not None else ""
        return (f"first bad commit: {fb['short']} {fb['subject']}\n"
                f"  {doc['metric']}: {_fig(fb, unit)}{ratio}\n"
                f"  last good {lg['short']} {lg['subject']}: {_fig(lg, unit)}\n  {counts}")
    if doc["status"] == "no-regression":
        return f"no regression: the bad revision {doc['bad']['short']} {no_regression(doc)} ({_fig(doc['bad_step'], unit)})\n  {counts}"
    names = ", ".join(f"{c['short']} ({c['subject']})" for c in doc["suspects"])
    return f"the first bad commit is one of: {names}\n  (skipped revisions hide it)\n  {counts}"


def no_regression(doc: dict[str, Any]) -> str:
    """How the bad end of a bisect that found no regression measured."""
    from .measure import CONFIRM

    step = doc.get("bad_step") or {}
    interval = step.get("interval")
    if step.get("verdict") == "good" and doc.get("threshold_source") != "given" and interval:
        return (f"is not {1 - CONFIRM:.0%} slower than the good one beyond the noise: {step['ratio']:.3f}x, "
                f"interval {interval[0]:.3f}..{interval[1]:.3f} (a smaller regression: give --threshold RATIO)")
    if step.get("verdict") == "good":
        return "measured good"
    return ("did not measure slower than the good one beyond the noise"
            + (f": {step['ratio']:.3f}x, interval {interval[0]:.3f}..{interval[1]:.3f}" if interval else ""))


def markdown(doc: dict[str, Any]) -> str:
    unit = unit_of(doc["metric"])
    lines = [f"### hexbuild bisect: {doc['metric']} on {doc['target']}", "", "```", headline(doc), "```", "",
             "| step | commit | subject | verdict | figure | ratio | build | deploy | measure |",
             "|---:|---|---|---|---|---:|---:|---:|---:|"]
    for s in doc["steps"]:
        ratio = "" if s.get("ratio") is None else f"{s['ratio']:.3f}" + \
            (f" ({s['interval'][0]:.3f}..{s['interval'][1]:.3f})" if s.get("interval") else "")
        cells = [str(s["step"]), s["short"], s["subject"], s["verdict"] + (f" ({s['reason']})" if s.get("reason") else ""),
                 _fig(s, unit), ratio] + [f"{s[k]:.1f}s" if s.get(k) is not None else "" for k in
                                          ("build_s", "deploy_s", "measure_s")]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    threshold = ("" if doc.get("threshold") is None else
                 f" Threshold {doc['threshold']:.3f}: {doc.get('threshold_reason')}.")
    lines += ["", f"Each run of a revision is paired with a run of the good one ({doc['good']['short']}), installed "
                  f"beside it; ratio: the median of the pairs' ratios, bad below the threshold with its whole "
                  f"90 % confidence interval, good at or above it with the whole interval.{threshold}"
              if doc["metric"] in ("eval", "prompt") else f"Verdicts: `hexbuild test {doc['metric']}`'s gate."]
    return "\n".join(lines) + "\n"


def chart_png(doc: dict[str, Any]) -> bytes:
    """Each tested commit in history order. eval/prompt: its figure as a ratio of the good
    revision's runs beside it (the verdict's own measure: drift between steps cancels), with the
    ratio's interval and each step's t/s written by it; ops/ppl: the gate's figure. Colours:
    good, bad, skip (a dotted line)."""
    from ..results.chart import png, pyplot

    plt = pyplot()
    colours = {"good": "#3b9d5d", "bad": "#d8433b", "skip": "#999999"}
    steps = sorted(doc["steps"], key=lambda s: s["index"])
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * doc["revisions"] + 2), 4))
    perf = doc["metric"] in ("eval", "prompt")
    for s in steps:
        if perf:
            y = 1.0 if s["index"] == 0 and s["verdict"] == "good" else s.get("ratio")
        else:
            y = s.get("failed") if s.get("failed") is not None else s.get("relative_diff")
        if y is None:
            ax.axvline(s["index"], color=colours["skip"], linestyle=":", linewidth=1)
            continue
        err = None
        if perf and s.get("interval"):
            err = [[y - s["interval"][0]], [s["interval"][1] - y]]
        ax.errorbar([s["index"]], [y], yerr=err, fmt="o", color=colours[s["verdict"]], capsize=3)
        if perf and s.get("median") is not None:
            ax.annotate(f"{s['median']:.3g} t/s", (s["index"], y), textcoords="offset points", xytext=(6, 4),
                        fontsize=7)
    if perf:
        ax.axhline(1.0, color="black", linewidth=0.8, label="the good revision")
        if doc.get("threshold") is not None:
            ax.axhline(doc["threshold"], color="#d8433b", linestyle="--", linewidth=0.8,
                       label=f"threshold {doc['threshold']:.3g} ({doc.get('threshold_source') or 'given'})")
        highs = [s["interval"][1] for s in steps if s.get("interval")] + [s.get("ratio") or 0 for s in steps]
        ax.set_ylim(bottom=0, top=max([1.15, *(1.1 * h for h in highs)]))
        ax.legend(fontsize=7)
    if doc.get("first_bad"):
        ax.axvspan(doc["first_bad"]["index"] - 0.5, doc["first_bad"]["index"] + 0.5, color="#d8433b", alpha=0.12)
    ax.set_xticks([s["index"] for s in steps], [s["short"][:7] for s in steps], rotation=45, fontsize=7)
    ax.set_xlim(-0.5, doc["revisions"] - 0.5)
    ax.set_xlabel(f"tested commits, oldest first ({doc['revisions']} revisions from good to bad)")
    ax.set_ylabel(f"{doc['metric']} / the good revision's, paired runs" if perf
                  else ("failed cases" if doc["metric"] == "ops" else "relative PPL difference"))
    found = f"first bad {doc['first_bad']['short'][:7]}" if doc.get("first_bad") else doc["status"]
    target = doc["target"] if len(doc["target"]) <= 40 else "…" + doc["target"][-39:]
    ax.set_title(f"hexbuild bisect ({doc['metric']}, {target}): {found}", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return png(fig)


def write(out: Path, doc: dict[str, Any]) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "bisect.json", "markdown": out / "bisect.md"}
    md = markdown(doc)
    try:
        chart = chart_png(doc)
    except EnvironmentMissing as e:
        ui.warn(f"no chart: {e.message} ({e.hint})")
    else:
        files["chart"] = out / "bisect.png"
        atomic_write(files["chart"], chart, mode=0o644)
    doc["files"] = {k: str(v) for k, v in files.items()}
    atomic_write(files["json"], json.dumps(doc, indent=2) + "\n", mode=0o644)
    atomic_write(files["markdown"], md, mode=0o644)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(md + "\n")
    return doc["files"]
