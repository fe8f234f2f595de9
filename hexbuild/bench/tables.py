"""The bench's results for people: the markdown table (also $GITHUB_STEP_SUMMARY's), the CSV and
the PNG chart of median tokens/s per configuration."""

from __future__ import annotations

import csv
import io
from typing import Any, Sequence

CONFIG_KEYS = ("target", "ndev", "model", "n_batch", "n_ubatch", "n_threads")


def selection(ndev: int | None, select: str | None = None) -> str:
    """What a configuration opened: its --devices list, N sessions, or the CPU alone (ndev 0: a
    CPU-only package opens none)."""
    return select or (f"ndev {ndev}" if ndev else "CPU")


def _config_label(s: dict[str, Any], multi: dict[str, bool]) -> str:
    parts = []
    if multi["target"]:
        parts.append(s["target"])
    parts.append(selection(s["ndev"], s.get("select")))
    if multi["model"]:
        parts.append(s["model"])
    if multi["n_batch"]:
        parts.append(f"b {s['n_batch']}")
    parts.append(f"ub {s['n_ubatch']}")
    parts.append(f"t {s['n_threads']}")
    return " · ".join(str(p) for p in parts)


def _varies(summary: Sequence[dict[str, Any]]) -> dict[str, bool]:
    return {k: len({s[k] for s in summary}) > 1 for k in CONFIG_KEYS}


def markdown(summary: Sequence[dict[str, Any]], failures: Sequence[dict[str, Any]] = ()) -> str:
    from .roofline import markdown_notes

    tests = list(dict.fromkeys(s["test"] for s in summary))
    bounded = [t for t in tests if any((s.get("roofline") or {}).get("percent") is not None
                                       for s in summary if s["test"] == t)]
    configs: dict[tuple, dict[str, Any]] = {}
    for s in summary:  # a device list shows in the ndev column
        key = tuple((s.get("select") or s[k] or "CPU") if k == "ndev" else s[k] for k in CONFIG_KEYS)
        configs.setdefault(key, {})[s["test"]] = s
    head = ["target", "ndev", "model", "batch", "ubatch", "threads"] + [f"{t} t/s" for t in tests] + \
        [f"{t} % of DRAM bound" for t in bounded]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < 3 else "---:" for i in range(len(head))) + "|"]
    for key, values in configs.items():
        pct = [(values.get(t, {}).get("roofline") or {}).get("percent") for t in bounded]
        cells = [str(v) for v in key] + [f"{values[t]['median_ts']:.2f}" if t in values else "" for t in tests] + \
            ["" if v is None else f"{v:.1f}%" for v in pct]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    text = "\n".join(lines) + "\n"
    if summary:
        n = max(s["n"] for s in summary)
        text += f"\nMedian of {n} run(s) per configuration (tokens/s, higher is better).\n"
        text += markdown_notes(summary)
    for f in failures:
        text += f"\n**failed**: {f['target']} {selection(f['ndev'], f.get('select'))} {f['model']} run {f['rep']}: exit {f['exit_code']} ({f['log']})\n"
    return text


def csv_text(summary: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    cols = list(CONFIG_KEYS) + ["test", "kind", "median_ts", "min_ts", "max_ts", "n"]
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for s in summary:
        w.writerow({c: s[c] for c in cols})
    return buf.getvalue()


def chart_png(summary: Sequence[dict[str, Any]], title: str) -> bytes:
    """Prompt and eval tokens/s per configuration, side by side."""
    from ..results.chart import png, pyplot

    plt = pyplot()

    multi = _varies(summary)
    panels = [("prompt", "prompt processing (tokens/s)"), ("eval", "generation (tokens/s)")]
    panels = [p for p in panels if any(s["kind"] == p[0] for s in summary)] or [("mixed", "tokens/s")]
    labels = list(dict.fromkeys(_config_label(s, multi) for s in summary))
    height = max(2.5, 0.45 * len(labels) * max(1, len({s['test'] for s in summary}) // len(panels)) + 1.5)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), height), squeeze=False)
    for ax, (kind, heading) in zip(axes[0], panels):
        items = [s for s in summary if s["kind"] == kind]
        one_test = len({s["test"] for s in items}) == 1
        names = [_config_label(s, multi) + ("" if one_test else f" · {s['test']}") for s in items]
        values = [s["median_ts"] for s in items]
        errs = [[s["median_ts"] - s["min_ts"] for s in items], [s["max_ts"] - s["median_ts"] for s in items]]
        y = list(range(len(items)))
        bars = ax.barh(y, values, xerr=errs if any(any(e) for e in errs) else None,
                       color="#3b7dd8" if kind == "prompt" else "#e07b39", capsize=3)
        ax.set_yticks(y, names, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(heading + (f": {items[0]['test']}" if one_test and items else ""), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        for bar, s in zip(bars, items):  # the label right of the whisker, not on it
            pct = (s.get("roofline") or {}).get("percent")
            label = f"  {s['median_ts']:.1f}" + (f" ({pct:.1f}% of DRAM bound)" if pct is not None else "")
            ax.text(s["max_ts"], bar.get_y() + bar.get_height() / 2, label, va="center", fontsize=7)
        ax.margins(x=0.18)
    n = max(s["n"] for s in summary)
    if not multi["model"]:
        title += f" · {summary[0]['model']}"
    fig.suptitle(title + (f"\nbars: median of {n} runs; whiskers: min–max" if n > 1 else ""), fontsize=10)
    fig.tight_layout()
    return png(fig)
