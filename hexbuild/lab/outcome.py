"""A finished lab job as the document the local command writes: `run --json` for a completion,
`bench --json` for a bench, `test ops|ppl --json` for the tests, each with the job's URL and
LAVA's view of it under ``job``.

The verdicts come from the per-test-case results (one test case per step, its measurement the
step's exit code), never from the job's health: LAVA calls a job whose test failed Complete.
Each step's output, read back from the job's log, goes through the same results parser and
dispatch proof as a local run (runner.record_output), then through the local command's own
mapping (checks.ops, checks.ppl, bench.matrix), so nothing of it is a second copy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .. import runner
from ..errors import CpuFallback, HexbuildError, JobIncomplete, RemoteFailed, TestsFailed
from ..ui import ui
from .joblog import JobLog, StepOutput
from .job import Step


@dataclass
class JobOutcome:
    job_id: int
    doc: dict[str, Any]
    exit_code: int  # what the local command would exit with; a lab fault: 16
    error: HexbuildError | None = None
    human: str | None = None  # what the local command prints without --json


def job_info(client, job: dict[str, Any], log_path: str | None) -> dict[str, Any]:
    """LAVA's view of the job: where, when, how it ended."""
    from datetime import datetime

    def t(key: str):
        try:
            return datetime.fromisoformat(str(job.get(key)).replace("Z", "+00:00")) if job.get(key) else None
        except ValueError:
            return None

    sub, start, end = t("submit_time"), t("start_time"), t("end_time")
    return {"id": job.get("id"), "url": client.job_url(int(job["id"])), "lab": client.base,
            "device": job.get("actual_device"), "device_type": job.get("requested_device_type"),
            "state": job.get("state"), "health": job.get("health"),
            "submit_time": job.get("submit_time"), "start_time": job.get("start_time"), "end_time": job.get("end_time"),
            "queued_s": round((start - sub).total_seconds(), 3) if sub and start else None,
            "duration_s": round((end - start).total_seconds(), 3) if start and end else None,
            "failure_comment": job.get("failure_comment"), "lava_log": log_path}


def step_cases(tests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The test cases of hexbuild's own test definition, by name (not LAVA's own 'lava' suite)."""
    out: dict[str, dict[str, Any]] = {}
    for t in tests:
        if "definition: lava\n" in str(t.get("metadata") or ""):
            continue
        out.setdefault(str(t.get("name")), t)
    return out


def lava_error(tests: list[dict[str, Any]], log: JobLog) -> str | None:
    """Why LAVA stopped the job: its 'job' test case's error message, else its last error line."""
    for t in tests:
        meta = str(t.get("metadata") or "")
        if t.get("name") == "job" and "definition: lava\n" in meta and "error_msg:" in meta:
            return meta.split("error_msg:", 1)[1].splitlines()[0].strip().strip("'\"") or None
    return log.errors[-1] if log.errors else None


def _exit_code(step: Step, case: dict[str, Any] | None, out: StepOutput | None) -> int | None:
    """The step's exit code: its test case's measurement (what the lab recorded), else the end
    marker in the log."""
    if case is not None and case.get("measurement") not in (None, ""):
        try:
            code = int(float(case["measurement"]))
        except (TypeError, ValueError):
            code = None
        if code is not None:
            if out is not None and out.exit_code is not None and out.exit_code != code:
                ui.warn(f"step {step.name}: the test case says exit {code}, the log {out.exit_code}")
            return code
    return out.exit_code if out is not None else None


def _real(step: Step, log: JobLog) -> runner.Invocation:
    inv = step.invocation
    return replace(inv, argv=[log.real_path(a) for a in inv.argv],
                   env={k: log.real_path(v) for k, v in inv.env.items()}, cwd=log.real_path(inv.cwd))


def step_record(step: Step, log: JobLog, cases: dict[str, dict[str, Any]], spec: str, results_dir: Path,
                stem: str, *, save_json: bool) -> runner.RunRecord:
    """The step's run record, as a local run of the same invocation would have made it."""
    out = log.steps.get(step.name)
    code = _exit_code(step, cases.get(step.name), out)
    error = None
    if code is None:
        failed = [f"{s.name} exited {s.exit_code}" for s in log.steps.values() if s.exit_code]
        error = f"the job ended before {step.name} finished" if out is not None else f"the job never ran {step.name}"
        error += f" ({', '.join(failed)})" if failed else ""
    return runner.record_output(spec, _real(step, log), out.output if out else b"", exit_code=code,
                                duration_s=out.duration_s if out else 0.0, results_dir=results_dir, stem=stem,
                                save_json=save_json, error=error)


def map_job(request: dict[str, Any], log: JobLog, tests: list[dict[str, Any]], *, spec: str, results_dir: Path,
            stem: str, allow_cpu_fallback: bool = False) -> tuple[dict[str, Any], HexbuildError | None, str | None]:
    """(document, the error the local command would end with, its human text) of one job."""
    steps = [Step.from_json(s) for s in request.get("steps") or []]
    cases = step_cases(tests)
    kind = request.get("kind")
    args = request.get("args") or {}
    if kind == "completion":
        return _completion(steps, args, log, cases, spec, results_dir, stem, allow_cpu_fallback)
    if kind == "bench":
        return _bench(steps, args, log, cases, spec, results_dir, stem)
    if kind == "ops":
        return _ops(steps, args, log, cases, spec, results_dir / stem)
    if kind == "ppl":
        return _ppl(steps, args, log, cases, spec, results_dir / stem)
    raise JobIncomplete(f"the job's request names no kind hexbuild knows ({kind!r})")


def _completion(steps, args, log, cases, spec, results_dir, stem, allow_cpu_fallback):
    from ..bench import roofline

    record = step_record(steps[0], log, cases, spec, results_dir, stem, save_json=True)
    doc = record.to_json()
    # as `hexbuild run` adds it; a lab board's SoC is not known here, so no DRAM bound unless
    # the model's traffic alone is worth saying
    roof = roofline.for_run(record.results, model=args.get("gguf"), gguf=None, soc=None)
    if roof is not None:
        doc["roofline"] = roof
    error: HexbuildError | None = None
    if record.exit_code is None:
        error = RemoteFailed(f"{spec}: {record.error}", hint=f"the output so far is in {record.log}")
    elif record.exit_code:
        error = RemoteFailed(f"{spec}: {record.invocation.tool} exited {record.exit_code}")
        error.exit_code = record.exit_code  # as `hexbuild run`: the program's own code
    else:
        try:
            runner.check_dispatch(record, allow_cpu_fallback=allow_cpu_fallback)
        except CpuFallback as e:
            error = e
    return doc, error, record.stdout.decode("utf-8", "replace")


def _bench(steps, args, log, cases, spec, results_dir, stem):
    from ..bench import matrix
    from ..bench.history import Recorder

    breq = matrix.BenchRequest(targets=[spec], models=list(args.get("models") or []),
                               ubatch=list(args.get("ubatch") or [1024]), threads=list(args.get("threads") or []),
                               knobs=[tuple(k) for k in args.get("knobs") or []],
                               extra=list(args.get("extra") or []), db=args.get("db"),
                               allow_cpu_fallback=bool(args.get("allow_cpu_fallback")))
    out = results_dir / f"bench-{stem}"
    recorder = Recorder(breq.db, str(results_dir))
    recorder.add_context(spec, {**(args.get("context") or {}), "device_serial": spec.split(":", 1)[-1],
                                "device_soc": args.get("device_type")}, args.get("model_sha256") or {})
    rows, runs, failures = [], [], []
    for i, step in enumerate(steps, 1):
        p = matrix.PlannedRun(spec, int(step.meta.get("ndev") or 0), str(step.meta.get("model")), step.invocation,
                            step.meta.get("select"))
        record = step_record(step, log, cases, spec, out / "logs", matrix.run_stem(p, 1), save_json=False)
        info = matrix.run_info(p, 1)
        info["argv"], info["env"] = record.invocation.argv, record.invocation.env
        got = matrix.rows_of(p, 1, breq, record, info) if record.exit_code is not None else []
        if record.exit_code is None:
            info.update(exit_code=None, error=record.error, records=0)
        runs.append(info)
        rows += recorder.label(SimpleNamespace(spec=spec), step.invocation, got)
        if not got:
            failures.append(info)
            ui.warn(matrix.failure_line(spec, p, 1, breq, info))
    try:
        doc = matrix.finish(breq, out, rows, runs, failures, recorder, {spec: None})
    except (CpuFallback, RemoteFailed) as e:
        return {**e.details, "schema": matrix.SCHEMA, "results": matrix.summarize(rows),
                "run_count": len(runs), "bench_id": recorder.bench_id}, e, None
    return doc, None, matrix.markdown(doc["results"])


def _ops(steps, args, log, cases, spec, out):
    from ..checks import ops

    oreq = ops.OpsRequest(target=spec, ndev=args.get("ndev"), devices=args.get("devices"),
                          ops=list(args.get("ops") or ops.DEFAULT_OPS), types=list(args.get("types") or []),
                          out=str(out))
    devices = []
    for step in steps:
        stem = f"test-ops-{runner._slug(step.session or step.name)}"
        record = step_record(step, log, cases, spec, out / "logs", stem, save_json=True)
        devices.append(ops.device_result(step.session or step.name, record) if record.exit_code is not None
                       else ops.failed_run(step.session or step.name, record.log, record.error or "no result"))
    names = [s.session or s.name for s in steps]
    doc = ops.report(oreq, names, devices, sum(d.get("duration_s") or 0 for d in devices), out)
    error = None if doc["ok"] else TestsFailed(f"test ops on {spec}: {doc['reason']}",
                                               hint=f"details in {doc['files']['markdown']}")
    return doc, error, ops.markdown(doc)


def _ppl(steps, args, log, cases, spec, out):
    from ..checks import ppl

    preq = ppl.PplRequest(target=spec, model=str(args.get("model") or ""), text=str(args.get("text") or ""),
                          reference_model=args.get("reference_model"), chunks=args.get("chunks"), ctx=args.get("ctx"),
                          max_diff=float(args.get("max_diff", 0.01)), out=str(out))
    runs = {}
    for step in steps:
        label = step.role.split("-", 1)[-1]
        record = step_record(step, log, cases, spec, out / "logs", f"ppl-{label}", save_json=True)
        runs[label] = (ppl.run_result(label, record.invocation, record) if record.exit_code is not None
                       else ppl.failed_run(label, record.error or "no result"))
    htp = runs.get("htp") or ppl.failed_run("htp", "the job never ran it")
    cpu = runs.get("cpu") or ppl.failed_run("cpu", "the job never ran it")
    doc = ppl.report(preq, htp, cpu, (htp.get("duration_s") or 0) + (cpu.get("duration_s") or 0), out)
    error = None if doc["ok"] else TestsFailed(f"test ppl on {spec}: {doc['reason']}",
                                               hint=f"details in {doc['files']['markdown']}")
    return doc, error, ppl.markdown(doc)
