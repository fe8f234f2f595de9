"""What ``hexbuild test kernels`` reports: the result document (--json and results.json), a
table per HTP version, junit.xml, results.md, the CI step summary. Every place says the results
are emulated, with which model, and not compared with silicon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..checks.report import Case, write as write_files
from . import build
from .image import QEMU_VERSION, patches
from .ops import families

QFLOAT_MODEL = "pre-v79"
FIDELITY = "emulated, qfloat model pre-v79, not compared with silicon"
NO_CASES = "hexbuild has no cases for this op yet"
NEEDS_HMX = "needs HMX: its unit holds HMX code that no open assembler takes"
UNMODELLED = ("this revision's op context (work queues, kernel parameters computed by the host) is not "
              "modelled by hexbuild's harness yet")


def document(tree, htps, ops, types, cases, per_version, image, seconds: float, *,
             explicit_ops: bool = False) -> dict[str, Any]:
    fams = families()
    rows: list[dict[str, Any]] = []
    not_covered: dict[str, str] = {}
    entry_unit = build.entry_units(tree)
    builds = []
    for pv in per_version:
        hb: build.HarnessBuild = pv["build"]
        dropped = {f.unit for f in hb.failures if f.hmx}
        for op, entry in tree.ops.items():
            if entry_unit.get(entry) in dropped and (op in ops or not explicit_ops):
                not_covered[op] = NEEDS_HMX
        builds.append({"htp": pv["htp"], "dropped_units": [{"unit": f.unit, "reason": NEEDS_HMX if f.hmx else
                                                             f.first_error} for f in hb.failures],
                       "unresolved_symbols": hb.undefined, "emulator_exit": pv["emulator_rc"],
                       "emulator_runs": pv["runs"]})
        for v in pv["cases"]:
            if v["op"] in not_covered:
                continue
            rows.append({**{k: val for k, val in v.items() if k != "output"}, "key": f"{v['htp']}|{v['op']}|"
                         f"{v['type']}|{v['shape']}"})
    for op in (ops if explicit_ops else sorted(tree.ops)):
        if not tree.runnable:
            not_covered.setdefault(op, UNMODELLED)
        elif op not in fams:
            not_covered.setdefault(op, NO_CASES)
    failed = [r for r in rows if not r["passed"]]
    covered = sorted({r["op"] for r in rows if r["passed"] or r["error"] is not None})
    if not rows:
        reason = "nothing ran: " + ("; ".join(f"{o}: {not_covered[o]}" for o in ops if o in not_covered)
                                    or "no case for the ops asked for")
    elif failed:
        first = failed[0]
        reason = (f"{len(failed)} of {len(rows)} cases failed (first: {first['op']} {first['type']} "
                  f"{first['shape']} on {first['htp']}: {first.get('reason')})")
    else:
        reason = None
    return {
        "ok": bool(rows) and not failed,
        "reason": reason,
        "emulated": True,
        "fidelity": FIDELITY,
        "source": str(tree.root),
        "revision": tree.revision,
        "htp": htps,
        "emulator": {"name": "qemu-hexagon", "qemu_version": QEMU_VERSION, "qfloat_model": QFLOAT_MODEL,
                     "patches": sorted(patches()), "image": image.image},
        "covered": covered,
        "not_covered": dict(sorted(not_covered.items())),
        "builds": builds,
        "summary": {"cases": len(rows), "passed": len(rows) - len(failed), "failed": len(failed)},
        "cases": rows,
        "duration_s": round(seconds, 3),
    }


def compare_lines(cmp: dict[str, Any]) -> list[str]:
    other = "a device" if not cmp["other_emulated"] else "another emulated run"
    lines = [f"\ncompared with {other} ({cmp['other']}): {cmp['compared']} cases, {cmp['differ']} differ beyond "
             "the tolerance"]
    for r in cmp["cases"]:
        if r["differ"]:
            lines.append(f"  {r['key']}: error {r['error']:.3g} (tolerance {r['tolerance']:.3g}); emulator "
                         f"{'passed' if r['emulator_passed'] else 'failed'}, other "
                         f"{'passed' if r['other_passed'] else 'failed'}")
    if cmp["only_here"] or cmp["only_there"]:
        lines.append(f"  {len(cmp['only_here'])} cases ran only here, {len(cmp['only_there'])} only there")
    return lines


def table(doc: dict[str, Any]) -> str:
    lines = [f"kernel check of {doc['source']} ({doc['revision'] or 'unknown revision'}): {doc['fidelity']}"]
    for v in doc["htp"]:
        lines.append(f"\nHTP {v}")
        lines.append(f"  {'op':<14} {'type':<6} {'shape':<22} {'error':>10} {'tolerance':>10}  result")
        for c in (r for r in doc["cases"] if r["htp"] == v):
            err = "-" if c["error"] is None else f"{c['error']:.3g}"
            lines.append(f"  {c['op']:<14} {c['type']:<6} {c['shape']:<22} {err:>10} {c['tolerance']:>10.3g}  "
                         + ("passed" if c["passed"] else f"FAILED ({c.get('reason')})"))
    if doc["not_covered"]:
        lines.append("\nnot covered: " + "; ".join(f"{op} ({why})" for op, why in doc["not_covered"].items()))
    if doc.get("compare_device"):
        lines += compare_lines(doc["compare_device"])
    s = doc["summary"]
    lines.append(f"\n{s['passed']}/{s['cases']} cases passed" + (f": {doc['reason']}" if doc["reason"] else ""))
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    out = [f"## hexbuild test kernels: {'passed' if doc['ok'] else 'FAILED'}", "",
           f"*{doc['fidelity']}* (QEMU {doc['emulator']['qemu_version']} with hexbuild's HVX patches)", "",
           f"Source: `{doc['source']}` ({doc['revision'] or 'unknown revision'})", ""]
    for v in doc["htp"]:
        out += [f"### HTP {v}", "", "| op | type | shape | error | tolerance | passed |", "|---|---|---|---|---|---|"]
        for c in (r for r in doc["cases"] if r["htp"] == v):
            err = "-" if c["error"] is None else f"{c['error']:.3g}"
            out.append(f"| {c['op']} | {c['type']} | {c['shape']} | {err} | {c['tolerance']:.3g} | "
                       + ("yes" if c["passed"] else f"**no**: {c.get('reason')}") + " |")
        out.append("")
    if doc["not_covered"]:
        out += ["### Not covered", ""] + [f"- {op}: {why}" for op, why in doc["not_covered"].items()] + [""]
    return "\n".join(out)


def junit(doc: dict[str, Any]) -> list[Case]:
    cases = []
    for c in doc["cases"]:
        name = f"{c['op']} {c['type']} {c['shape']}"
        fail = None if c["passed"] else (c.get("reason") or "failed")
        cases.append(Case(suite=f"kernels.{c['htp']}", name=name, failure=fail,
                          details=[f"error {c['error']}, tolerance {c['tolerance']} ({doc['fidelity']})"] if fail else []))
    for op, why in doc["not_covered"].items():
        cases.append(Case(suite="kernels.not-covered", name=op, skipped=why))
    return cases


def write(doc: dict[str, Any], out: Path) -> dict[str, str]:
    return write_files(out, title="hexbuild test kernels", doc=doc, cases=junit(doc), markdown=markdown(doc))
