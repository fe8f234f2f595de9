"""The plan for people: a table of sessions, then the lines that must not wrap."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def mib(n: int) -> str:
    return f"{n / 1024 ** 2:.2f} MiB"


def render(plan: dict[str, Any]) -> str:
    """The plan for people: a table of sessions, then lines that must not wrap (the command)."""
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(pad_edge=False)
    for col in ("device", "layers", "HTP MiB", "other MiB", "default split MiB"):
        table.add_column(col, justify="left" if col in ("device", "layers") else "right")
    for s, d in zip(plan["sessions"], plan["default_split"]["per_session_bytes"]):
        layers = "-" if s["first_layer"] is None else f"{s['first_layer']}-{s['last_layer']} ({s['n_layers']})"
        table.add_row(s["device"], layers, f"{s['htp_bytes'] / 1024 ** 2:.2f}",
                      f"{s['other_bytes'] / 1024 ** 2:.2f}", f"{d / 1024 ** 2:.2f}")
    buf = io.StringIO()
    Console(file=buf, width=120, force_terminal=False, highlight=False).print(table)
    lines = [f"{Path(plan['model']).name}: {plan['n_layer']} layers + output on {plan['ndev']} "
             f"session(s) of {mib(plan['vmem'])}",
             buf.getvalue().rstrip("\n"),
             f"balance (max/mean): {plan['balance']:.3f}   default split: {plan['default_split']['balance']:.3f}",
             f"CPU: {mib(plan['cpu']['input_bytes'] + plan['cpu']['row_limited_bytes'])} "
             f"(input layer {mib(plan['cpu']['input_bytes'])})",
             plan["command"],
             _rules_line(plan["rules"])]
    lines += [f"note: {n}" for n in plan["notes"]]
    return "\n".join(lines) + "\n"


def _rules_line(rules: dict[str, Any]) -> str:
    where = f"{rules['origin']} {rules['revision'] or '?'}"
    if rules["origin"] == "assumed":
        where += ", the newest revision hexbuild knows: give --source, --package or --target for yours"
    limit = f"{rules['row_limit']} rows" if rules["row_limit"] else "none"
    line = f"rules ({where}): repacks {' '.join(rules['repack_types'])}; row limit {limit}"
    vmem = rules.get("vmem")
    if vmem:
        default = f", default {mib(vmem['default_bytes'])}" if vmem.get("default_bytes") else ""
        line += f"; {vmem['env']} ({vmem['unit']}{default})"
    return line
