"""The human view of parsed logs (what `hexbuild results parse` prints without --json)."""

from __future__ import annotations

from typing import Any


def render(data: dict[str, Any]) -> str:
    """A compact view of parsed logs: per log, its sections as rich tables, then failing cases
    one per line, never wrapped (they are what test-backend-ops -o/-p take)."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    for log in data["logs"]:
        parts.append(f"== {log['source']}")
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column("what", style="bold")
        table.add_column("value")
        perf = log["perf"]
        if perf:
            for key, label in (("prompt_eval", "prompt eval"), ("eval", "eval")):
                s = perf[key]
                if s:
                    count = s.get("tokens", s.get("runs"))
                    table.add_row(label, f"{_fmt(s['tokens_per_second'])} t/s  ({count} x {_fmt(s['ms_per_token'])} ms)")
            if perf["total"]:
                table.add_row("total", f"{_fmt(perf['total']['ms'])} ms / {perf['total']['tokens']} tokens")
            if perf["graphs_reused"] is not None:
                table.add_row("graphs reused", str(perf["graphs_reused"]))
        if log["sampler"]:
            s = log["sampler"]
            table.add_row("sampling", f"{_fmt(s['sampling_ms'] if s['sampling_ms'] is not None else s['samplers_ms'])} ms / {s['runs']} runs")
        if log["offload"]:
            table.add_row("offloaded", f"{log['offload']['offloaded']}/{log['offload']['total']} layers")
        hx = log["hexagon"]
        if hx:
            skel = next((s["skel"] for s in hx["sessions"] if s["skel"]), None)
            arch = f"v{hx['arch']}" if hx["arch"] is not None else "arch not printed"  # a session that never opened
            table.add_row("hexagon", f"{arch}  sessions {len(hx['sessions'])}" + (f"  skel {skel}" if skel else ""))
            for err in hx["errors"]:
                table.add_row("", Text(err))
        ops = log["backend_ops"]
        if ops:
            table.add_row("backend-ops", f"{ops['passed']} OK, {ops['failed']} FAIL, {ops['not_supported']} not supported")
            for b in ops["backends"]:
                counts = "" if b["tests_total"] is None else f"{b['tests_passed']}/{b['tests_total']} tests passed "
                table.add_row("", f"{b['name']}: {counts}{b['status'] or ''}")
        parts.append(table)
        if ops:
            # one line each, folded rather than wrapped: the case string is what -o/-p take
            parts += [f"FAIL {f['case']}" for f in ops["failures"][:20]]
            if len(ops["failures"]) > 20:
                parts.append(f"... {len(ops['failures']) - 20} more failures (see --json)")
        if log["devices"]:
            dt = Table(title_justify="left", pad_edge=False)
            for col in ("device", "model MiB", "repack MiB", "KV MiB", "compute MiB"):
                dt.add_column(col, justify="left" if col == "device" else "right")
            for d in log["devices"]:
                dt.add_row(d["device"], _fmt(d["model_mib"]), _fmt(d["repack_mib"]), _fmt(d["kv_mib"]),
                           _fmt(d["compute_mib"]))
            parts.append(dt)
        if log["bench"]:
            bt = Table(pad_edge=False)
            for col in ("model", "backend", "test", "t/s"):
                bt.add_column(col, justify="right" if col == "t/s" else "left")
            for r in log["bench"]:
                bt.add_row(str(r["model"]), str(r["backend"]), r["test"], f"{_fmt(r['avg_ts'])} ± {_fmt(r['stddev_ts'])}")
            parts.append(bt)
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        buf = io.StringIO()
        Console(file=buf, width=120, force_terminal=False, highlight=False).print(part)
        out.append(buf.getvalue().rstrip("\n"))
    return "\n".join(out) + "\n"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"
