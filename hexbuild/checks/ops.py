"""`hexbuild test ops`: the deployed test-backend-ops in mode `test` against each HTP session (the
CPU is the reference it compares with), reported per op and weight type: passed, failed, not
supported, with the failing cases.

Upstream's tool prints "OK" when no backend but the CPU exists, having tested nothing; here a
session on which no case ran is a failure ("nothing was tested"), and so is a package with no HTP
session at all."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import runner
from ..errors import HexbuildError, Interrupted
from ..results.backend_ops import parse_case
from ..results.lines import clean
from ..ui import ui
from .report import Case, write

SCHEMA = "hexbuild.test-ops/1"
DEFAULT_OPS = ("MUL_MAT", "MUL_MAT_ID")
# The weight types the backend repacks for its matmuls, the HVX Q4_0 matmul first.
DEFAULT_TYPES = ("q4_0", "q8_0", "mxfp4")
_TYPE = re.compile(r"\btype(?:_a)?=([A-Za-z0-9_]+)")


@dataclass
class OpsRequest:
    target: str
    ndev: int | None = None
    devices: str | None = None
    ops: list[str] = field(default_factory=lambda: list(DEFAULT_OPS))
    types: list[str] = field(default_factory=lambda: list(DEFAULT_TYPES))
    dest: str = ""
    models_dir: str = ""
    out: str = ""
    timeout: float | None = None
    count_known: bool = False  # the known failures (data/known_op_failures.toml) count as failures


def known_failure(op: str, params: str) -> str | None:
    """Why a case is known to fail on silicon too (hexbuild/data/known_op_failures.toml), or None."""
    from ..data import table

    for known in table("known_op_failures").get("case", []):
        if known["op"] == op and re.search(known["case"], params):
            return known["why"]
    return None


def types_regex(types: list[str]) -> str | None:
    """test-backend-ops' -p regex for the cases whose (first) weight type is one of ``types``."""
    if not types:
        return None
    return "type(_a)?=(" + "|".join(re.escape(t) for t in types) + "),"


def summarize(lines: list[str], *, count_known: bool = False) -> dict[str, Any]:
    """Per (op, type) counts and failing cases of one test-backend-ops run. A failing case known to
    fail on silicon too is a ``known`` one (listed with why), a failure only with ``count_known``;
    one that passes is listed in ``known_passed``."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    known_passed: list[str] = []
    for line in lines:
        case = parse_case(clean(line))
        if case is None:
            continue
        op, params, status, detail = case
        m = _TYPE.search(params)
        g = groups.setdefault((op, m.group(1) if m else "-"), {"op": op, "type": m.group(1) if m else "-",
                                                                "passed": 0, "failed": 0, "known": 0,
                                                                "not_supported": 0, "skipped": 0, "failures": []})
        why = known_failure(op, params) if status in ("failed", "passed") else None
        if why and status == "passed":
            known_passed.append(f"{op}({params})")
        if why and status == "failed" and not count_known:
            status = "known"
        g[status] += 1
        if status in ("failed", "known"):
            g["failures"].append({"case": f"{op}({params})", "detail": detail, **({"known": why} if why else {})})
    rows = sorted(groups.values(), key=lambda g: (g["op"], g["type"]))
    return {"by_op": rows, **{k: sum(g[k] for g in rows) for k in ("passed", "failed", "known", "not_supported", "skipped")},
            "known_passed": known_passed}


def device_invocation(target, req: OpsRequest, name: str) -> runner.Invocation:
    """test-backend-ops in mode test against session ``name``, rendered for what is installed."""
    extra = ["test-backend-ops", "test", "-o", ",".join(req.ops), "-b", name]
    regex = types_regex(req.types)
    if regex:
        extra += ["-p", regex]
    # Upstream runs test-backend-ops on HTP with host buffers off (docs/backend/snapdragon's
    # `HB=0 run-tool.sh test-backend-ops`, the QDC runner's GGML_HEXAGON_HOSTBUF=0): with them on,
    # the CPU reference reads the repacked weights' bytes as the plain type and computes NaN.
    return runner.prepare_on(target, runner.RunRequest(kind="tool", target=req.target, dest=req.dest,
                                                       models_dir=req.models_dir, ndev=req.ndev,
                                                       devices=req.devices, extra=extra,
                                                       tool_knobs={"GGML_HEXAGON_HOSTBUF": "0"})).invocation


def sessions_to_test(target, req: OpsRequest) -> list[str]:
    """The HTP sessions the request names on what is installed (none for a CPU-only package)."""
    prepared = runner.prepare_on(target, runner.RunRequest(kind="tool", target=req.target, dest=req.dest,
                                                           models_dir=req.models_dir, ndev=req.ndev,
                                                           devices=req.devices, extra=["test-backend-ops"]))
    return [] if prepared.invocation.cpu_only else list(prepared.sessions)


def failed_run(name: str, log: str, reason: str) -> dict[str, Any]:
    """A session whose run gave no result (a timeout, a lost device): a failure."""
    return {"device": name, "exit_code": None, "log": log, "dispatch": None, "verdict": "failed", "reason": reason,
            "by_op": [], "passed": 0, "failed": 0, "known": 0, "not_supported": 0, "skipped": 0, "known_passed": [],
            "duration_s": None}


def device_result(name: str, record, *, count_known: bool = False) -> dict[str, Any]:
    """One session's verdict from its run's record (its log, exit code and dispatch proof)."""
    text = Path(record.log).read_text("utf-8", "replace").splitlines()
    res = {"device": name, "exit_code": record.exit_code, "log": record.log, "dispatch": record.dispatch,
           "duration_s": round(record.duration_s, 3), **summarize(text, count_known=count_known)}
    fallback = (record.dispatch or {}).get("fallback_reason")
    if fallback:
        res.update(verdict="failed", reason=f"the session did not open: {fallback}")
    elif res["failed"]:
        res.update(verdict="failed", reason=f"{res['failed']} case(s) failed, first: "
                                            f"{next(f['case'] for g in res['by_op'] for f in g['failures'] if 'known' not in f or count_known)}")
    elif res["passed"] == 0:
        res.update(verdict="nothing-tested",
                   reason=f"nothing was tested on {name}: test-backend-ops ran no case on it "
                          f"({res['not_supported']} not supported, {res['skipped']} skipped)")
    elif record.exit_code and not (res["known"] and record.exit_code == 1):
        # (test-backend-ops exits 1 when a case failed: a known one alone is not a failure here)
        res.update(verdict="failed", reason=f"test-backend-ops exited {record.exit_code}")
    else:
        res.update(verdict="passed", reason=None)
    return res


def _device_run(target, req: OpsRequest, name: str, logs: Path) -> dict[str, Any]:
    inv = device_invocation(target, req, name)
    stem = f"test-ops-{runner._slug(name)}"
    try:
        record = runner.execute(target, inv, results_dir=logs, passthrough=False, timeout=req.timeout, stem=stem)
    except Interrupted:
        raise
    except HexbuildError as e:  # a timeout, a lost device: this session's result is a failure
        return failed_run(name, str(logs / f"{stem}.log"), e.message)
    return device_result(name, record, count_known=req.count_known)


def run(req: OpsRequest, settings) -> dict[str, Any]:
    out = Path(req.out or Path(settings["run.results_dir"]) / f"test-ops-{runner._timestamp()}")
    devices: list[dict[str, Any]] = []
    start = time.monotonic()
    with runner.open_target(req.target, settings) as target:  # one connection for every session
        names = sessions_to_test(target, req)
        for name in names:
            ui.info(f"test-backend-ops on {req.target} {name}: {','.join(req.ops)} "
                    f"{','.join(req.types) or 'all types'}")
            devices.append(_device_run(target, req, name, out / "logs"))
            d = devices[-1]
            known = f", {d['known']} known to fail on phones too" if d.get("known") else ""
            ui.info(f"{name}: {d['passed']} passed, {d['failed']} failed{known}, {d['not_supported']} not supported")
            for case in d.get("known_passed") or []:
                ui.note(f"{name}: {case} passed, though it is known to fail on phones (data/known_op_failures.toml)")
    return report(req, names, devices, time.monotonic() - start, out)


def report(req: OpsRequest, names: list[str], devices: list[dict[str, Any]], duration_s: float,
           out: Path) -> dict[str, Any]:
    """The document of a test ops run (results.json, junit.xml, results.md written under ``out``)."""
    reason = None if names else (f"nothing was tested: the package on {req.target} has no HTP session "
                                 "(CPU only), and test-backend-ops compares HTP sessions with the CPU")
    failed = [d for d in devices if d["verdict"] != "passed"]
    ok = bool(names) and not failed
    doc = {"schema": SCHEMA, "target": req.target, "ops": req.ops, "types": req.types, "count_known": req.count_known, "ok": ok,
           "reason": reason or (failed[0]["reason"] if failed else None), "devices": devices,
           "duration_s": round(duration_s, 3)}
    doc["files"] = write(out, title="hexbuild test ops", doc=doc, cases=junit_cases(doc), markdown=markdown(doc))
    return doc


def junit_cases(doc: dict[str, Any]) -> list[Case]:
    cases: list[Case] = []
    if not doc["devices"]:
        cases.append(Case(f"test ops {doc['target']}", "HTP sessions", failure=doc["reason"]))
    for d in doc["devices"]:
        suite = f"test ops {d['device']}"
        if d["verdict"] == "nothing-tested" or (d["verdict"] == "failed" and not d["failed"]):
            cases.append(Case(suite, f"{d['device']} session", failure=d["reason"]))
        for g in d["by_op"]:
            name = f"{g['op']} {g['type']}"
            if g["failed"]:
                cases.append(Case(suite, name, failure=f"{g['failed']} of {g['passed'] + g['failed']} cases failed",
                                  details=[f"{f['case']}: {f['detail'] or 'FAIL'}" for f in g["failures"]
                                           if "known" not in f or doc.get("count_known")]))
            elif g["passed"]:
                cases.append(Case(suite, name))
            else:
                cases.append(Case(suite, name, skipped="not supported on this session"))
    return cases


def markdown(doc: dict[str, Any]) -> str:
    status = "passed" if doc["ok"] else "FAILED"
    lines = [f"### hexbuild test ops on {doc['target']}: {status}", ""]
    if doc["reason"]:
        lines += [f"**{doc['reason']}**", ""]
    if doc["devices"]:
        lines += ["| session | op | type | passed | failed | known | not supported |", "|---|---|---|---:|---:|---:|---:|"]
        for d in doc["devices"]:
            for g in d["by_op"] or [{"op": "-", "type": "-", "passed": 0, "failed": 0, "not_supported": 0}]:
                lines.append(f"| {d['device']} | {g['op']} | {g['type']} | {g['passed']} | {g['failed']} | "
                             f"{g.get('known', 0)} | {g['not_supported']} |")
        failing = [(d["device"], f) for d in doc["devices"] for g in d["by_op"] for f in g["failures"]]
        known = [(dev, f) for dev, f in failing if "known" in f and not doc.get("count_known")]
        failing = [(dev, f) for dev, f in failing if (dev, f) not in known]
        if known:
            lines += ["", "Known to fail on phones too (not counted; `--count-known` counts them):", ""]
            lines += [f"- {dev} `{f['case']}` {f['detail'] or ''}: {f['known']}" for dev, f in known]
        if failing:
            lines += ["", "Failing cases:", ""] + [f"- {dev} `{f['case']}` {f['detail'] or ''}".rstrip()
                                                   for dev, f in failing[:50]]
            if len(failing) > 50:
                lines.append(f"- … and {len(failing) - 50} more (results.json)")
    return "\n".join(lines) + "\n"
