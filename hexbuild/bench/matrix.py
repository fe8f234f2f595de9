"""hexbuild bench: llama-bench over a matrix of targets × session counts × models, each run
``repeat`` times, with batch/ubatch/threads as llama-bench's own comma lists. Results are the
median tokens/s per configuration, written as JSON, CSV, a markdown table and a PNG chart.

Every run goes through the same renderer as `hexbuild run bench`, with ``-o jsonl`` so the
records parse exactly (field names from tools/llama-bench/llama-bench.cpp, test::get_fields()).
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .. import fidelity, runner
from ..paths import atomic_write, output_mode
from . import roofline
from .history import Recorder
from .tables import CONFIG_KEYS, chart_png, csv_text, markdown, selection
from ..errors import CpuFallback, EnvironmentMissing, HexbuildError, Interrupted, RemoteFailed, UsageError
from ..ui import ui

SCHEMA = "hexbuild.bench/1"
__all__ = ["CONFIG_KEYS", "SCHEMA", "BenchRequest", "PlannedRun", "chart_png", "csv_text", "int_list", "markdown",
           "plan", "plan_on", "run", "selection", "str_list", "summarize"]


@dataclass
class BenchRequest:
    targets: list[str]
    models: list[str]
    ndev: list[int] = field(default_factory=lambda: [1])
    devices: list[str] = field(default_factory=list)  # device lists (HTP0,HTP1), each a configuration
    ubatch: list[int] = field(default_factory=lambda: [1024])
    threads: list[int] = field(default_factory=list)  # empty: the target's (runner/defaults.py)
    batch: list[int] = field(default_factory=list)
    repeat: int = 1
    knobs: list[tuple[str, str]] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    dest: str = ""
    models_dir: str = ""
    out: str = ""
    timeout: float | None = None
    allow_cpu_fallback: bool = False  # a run whose HTP sessions did not open still counts
    sessions_given: bool = True  # --ndev/--devices/run.ndev said how many: a CPU-only package is then exit 12
    db: str | None = None  # the history database; None: <results_dir>/bench.sqlite, "": none
    gguf: list[str] = field(default_factory=list)  # local copies of the models, for the roofline
    soc: str | None = None  # the SoC whose DRAM bounds decode (default: each device's own)
    peak_gbs: float | None = None  # --peak-bandwidth: instead of the DRAM table's figure


def int_list(text: str | None, what: str, *, minimum: int = 1, maximum: int | None = None) -> list[int]:
    if text is None:
        return []
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise UsageError(f"{what}: {part!r} is not a whole number") from None
        if v < minimum or (maximum is not None and v > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f"at least {minimum}"
            raise UsageError(f"{what}: {v} is out of range ({bound})")
        if v not in out:
            out.append(v)
    return out


def str_list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    """llama-bench's own test label: pp512, tg128, pp512+tg128, with ' @ dN' for depth."""
    if n_prompt and n_gen:
        name = f"pp{n_prompt}+tg{n_gen}"
    elif n_prompt:
        name = f"pp{n_prompt}"
    else:
        name = f"tg{n_gen}"
    return name + (f" @ d{n_depth}" if n_depth else "")


def jsonl_records(stdout: bytes) -> list[dict[str, Any]]:
    records = []
    for line in stdout.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "avg_ts" in obj and "n_prompt" in obj:
            records.append(obj)
    return records


def _row(rec: dict[str, Any], *, target: str, ndev: int, model: str, rep: int, select: str | None = None,
         mark: dict[str, Any] | None = None) -> dict[str, Any]:
    n_prompt, n_gen, n_depth = int(rec.get("n_prompt", 0)), int(rec.get("n_gen", 0)), int(rec.get("n_depth", 0) or 0)
    return {"target": target, "ndev": ndev, "select": select, "model": model, "model_filename": rec.get("model_filename"),
            "devices": rec.get("devices"), "n_batch": rec.get("n_batch"), "n_ubatch": rec.get("n_ubatch"),
            "n_threads": rec.get("n_threads"), "test": test_name(n_prompt, n_gen, n_depth),
            "kind": "prompt" if n_prompt and not n_gen else "eval" if n_gen and not n_prompt else "mixed",
            "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": n_depth, "rep": rep,
            "avg_ts": float(rec["avg_ts"]), "stddev_ts": float(rec.get("stddev_ts") or 0.0),
            "build_commit": rec.get("build_commit"), **(mark or {})}


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The median (and spread) of avg_ts over the repeats of each configuration and test."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in CONFIG_KEYS) + (r.get("select"), r["test"]), []).append(r)
    out = []
    for key, items in groups.items():
        values = [i["avg_ts"] for i in items]
        out.append({**dict(zip(CONFIG_KEYS, key[:-2])), "select": key[-2], "test": key[-1], "kind": items[0]["kind"],
                    "median_ts": statistics.median(values), "min_ts": min(values), "max_ts": max(values),
                    "n": len(values), **{k: items[0].get(k, 0) for k in ("n_prompt", "n_gen", "n_depth")},
                    **fidelity.carried(items[0])})
    return out


@dataclass
class PlannedRun:
    target: str
    ndev: int
    model: str
    invocation: runner.Invocation
    select: str | None = None  # the --devices list of this configuration
    mark: dict[str, Any] = field(default_factory=dict)  # the virtual NPU's (fidelity.py): in each row


def plan(req: BenchRequest, settings) -> list[PlannedRun]:
    """Render every configuration first, so that a bad one (a knob the revision does not read,
    several sessions on a v73 phone, a missing llama-bench) fails before anything runs."""
    planned = []
    for spec in req.targets:
        with runner.open_target(spec, settings) as target:
            planned += plan_on(target, spec, req)
    return planned


def plan_on(target, spec: str, req: BenchRequest) -> list[PlannedRun]:
    """The configurations of ``req`` for one target, rendered against what is installed there.
    A CPU-only package is said once (the one rule, artifacts/npu.py), and its runs open no
    session: ndev 0, shown as CPU."""
    planned = []
    said = False
    selections: list[tuple[int | None, str | None]] = [(n, None) for n in req.ndev] + [(None, d) for d in req.devices]
    for ndev, devices in selections:
        for model in req.models:
            # llama-bench runs the threads × ubatch × batch matrix itself (comma lists).
            prepared = runner.prepare_on(target, runner.RunRequest(
                kind="bench", target=spec, dest=req.dest, models_dir=req.models_dir,
                ndev=ndev if req.sessions_given else None, devices=devices,
                model=model, knobs=req.knobs, extra=req.extra, threads=req.threads or None,
                ubatch=",".join(map(str, req.ubatch)), batch=",".join(map(str, req.batch)) or None,
                bench_output="jsonl", timeout=req.timeout))
            count = ndev or len([d for d in (devices or "").split(",") if d.strip()])
            if prepared.cpu_only:
                count = 0
                if not said:
                    prepared.cpu_only.say()
                    said = True
            planned.append(PlannedRun(spec, count, model, prepared.invocation, devices, target.fidelity()))
    return planned


def run_stem(p: PlannedRun, rep: int) -> str:
    sel = f"dev{runner._slug(p.select)}" if p.select else f"ndev{p.ndev}"
    return f"{runner._slug(p.target)}-{sel}-{runner._slug(p.model)}-r{rep}"


def run_info(p: PlannedRun, rep: int) -> dict[str, Any]:
    return {"target": p.target, "ndev": p.ndev, "select": p.select, "model": p.model, "rep": rep,
            "argv": p.invocation.argv, "env": p.invocation.env}


def rows_of(p: PlannedRun, rep: int, req: BenchRequest, record, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows one llama-bench run gave (none when it failed or fell back to the CPU); ``info``
    (its entry in results.json's runs) gets what happened."""
    recs = jsonl_records(record.stdout)
    info.update(exit_code=record.exit_code, duration_s=round(record.duration_s, 3), log=record.log,
                records=len(recs), dispatch=record.dispatch)
    if record.exit_code != 0:
        return []
    reason = (record.dispatch or {}).get("fallback_reason")
    if reason and not req.allow_cpu_fallback:  # CPU numbers under an NPU label are no result
        info.update(error=f"the run fell back to the CPU: {reason}", cpu_fallback=True)
        return []
    return [_row(r, target=p.target, ndev=p.ndev, model=p.model, rep=rep, select=p.select, mark=p.mark) for r in recs]


def run_once(target, p: PlannedRun, rep: int, req: BenchRequest, logs: Path) -> tuple[dict[str, Any], list]:
    """One llama-bench run: its record for results.json and the JSONL rows it printed."""
    stem = run_stem(p, rep)
    info = run_info(p, rep)
    try:
        record = runner.execute(target, p.invocation, results_dir=logs, passthrough=False,
                                timeout=req.timeout, stem=stem, save_json=False)
    except Interrupted:
        raise
    except HexbuildError as e:  # a timeout or a lost device: the next run may still work
        info.update(exit_code=None, error=e.message, log=str(logs / f"{stem}.log"), records=0)
        return info, []
    return info, rows_of(p, rep, req, record, info)


def failure_line(spec: str, p: PlannedRun, rep: int, req: BenchRequest, info: dict[str, Any]) -> str:
    why = info.get("error") or f"llama-bench exited {info['exit_code']} with {info['records']} records"
    return f"{spec}: {why} ({selection(p.ndev, p.select)}, {p.model}, run {rep}); log: {info['log']}"


def run(req: BenchRequest, settings) -> dict[str, Any]:
    if not req.targets:
        raise UsageError("no target: give -t TARGET (once per target) or set run.target")
    if not req.models:
        raise UsageError("no model: give --model NAME[,NAME...] or set run.model")
    if req.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    planned = plan(req, settings)
    out = Path(req.out or Path(settings["run.results_dir"]) / f"bench-{runner._timestamp()}")
    logs = out / "logs"
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    total, done = len(planned) * req.repeat, 0
    recorder = Recorder(req.db, settings["run.results_dir"])
    socs: dict[str, str | None] = {}
    wants_roofline = bool(req.gguf) or any(roofline.local_model(m, None) for m in req.models)
    try:
        for spec in req.targets:
            with runner.open_target(spec, settings) as target:
                # the device's context labels the history's rows and gives the roofline its SoC
                ctx = recorder.open_target(target, req.dest) if recorder.path is not None or wants_roofline else {}
                socs[spec] = req.soc or ctx.get("device_soc")
                for p in (p for p in planned if p.target == spec):
                    for rep in range(1, req.repeat + 1):
                        done += 1
                        ui.info(f"[{done}/{total}] {spec}: {selection(p.ndev, p.select)}, {p.model}, "
                                f"run {rep}/{req.repeat}")
                        info, got = run_once(target, p, rep, req, logs)
                        runs.append(info)
                        rows += recorder.label(target, p.invocation, got)
                        if not got:
                            failures.append(info)
                            ui.warn(failure_line(spec, p, rep, req, info))
    except Interrupted:
        if runs:
            write_outputs(out, req, rows, runs, summarize(rows), failures, recorder)
            recorder.save(rows)
        raise
    return finish(req, out, rows, runs, failures, recorder, socs)


def finish(req: BenchRequest, out: Path, rows: list[dict[str, Any]], runs: list[dict[str, Any]],
           failures: list[dict[str, Any]], recorder: Recorder, socs: dict[str, str | None]) -> dict[str, Any]:
    """Write the outputs and the history rows; the result, or the error when a run failed
    (exit 12 when every failure was a CPU fallback, else 8)."""
    summary = summarize(rows)
    roofline.attach(summary, rows, socs=socs, gguf=req.gguf, peak_gbs=req.peak_gbs)
    files = write_outputs(out, req, rows, runs, summary, failures, recorder)
    saved = recorder.save(rows)
    result = {"schema": SCHEMA, "out": str(out), "files": files, "results": summary,
              "run_count": len(runs), "failures": failures, "bench_id": recorder.bench_id,
              "db": str(recorder.path) if recorder.path else None, "db_rows": saved}
    if failures:
        if not ui.json:
            ui.result(result, markdown(summary, failures))
        error = CpuFallback if all(f.get("cpu_fallback") for f in failures) else RemoteFailed
        raise error(f"{len(failures)} of {len(runs)} llama-bench runs failed; results so far in {out}",
                    details={"out": str(out), "files": files, "failures": failures})
    return result


def write_outputs(out: Path, req: BenchRequest, rows, runs, summary, failures, history=None) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(summary, failures)
    doc = {"schema": SCHEMA, "bench_id": getattr(history, "bench_id", None), "time": getattr(history, "time", None),
           "matrix": {"targets": req.targets, "ndev": req.ndev, "devices": req.devices, "models": req.models,
                                        "ubatch": req.ubatch, "threads": req.threads, "batch": req.batch,
                                        "repeat": req.repeat, "extra": req.extra,
                                        "knobs": dict(req.knobs)},
           "results": summary, "records": rows, "runs": runs, "failures": failures}
    doc = fidelity.stamp(doc)  # every target emulated: the whole document is the emulator's
    files = {"json": out / "results.json", "csv": out / "results.csv", "markdown": out / "results.md"}
    atomic_write(files["json"], json.dumps(doc, indent=2) + "\n", mode=output_mode())
    atomic_write(files["csv"], csv_text(summary), mode=output_mode())
    atomic_write(files["markdown"], md, mode=output_mode())
    if summary:
        try:
            chart = chart_png(summary, f"llama-bench on {', '.join(req.targets)}")
        except EnvironmentMissing as e:
            ui.warn(f"no chart: {e.message} ({e.hint})")
        else:
            files["chart"] = out / "results.png"
            atomic_write(files["chart"], chart, mode=output_mode())
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(f"### hexbuild bench\n\n{md}\n")
    return {k: str(v) for k, v in files.items()}
