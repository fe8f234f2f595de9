"""`hexbuild bisect`: which commit made it slower, or wrong. Each step checks a revision out in the
bisect's worktree, builds it (the up-to-date check, the kept build directory and ccache: only
what changed is rebuilt), deploys it (only changed files travel) and measures it; the search
(search.py) picks the next revision until one first bad commit is left."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import fidelity
from ..bench import history
from ..errors import (BisectUndecided, BuildFailed, CpuFallback, DeployFailed, HexbuildError, Interrupted,
                      PackageFailed, RemoteFailed, UsageError, VerifyFailed)
from ..ui import ui
from . import record, report
from .gitrepo import Commit, Repo
from .measure import CONFIRM, GateJob, Outcome, PerfJob, measure_gate, measure_perf, threshold_from_ends
from .search import BAD, GOOD, SKIP, Search, expected_steps
from .workspace import Workspace

METRICS = ("eval", "prompt", "ppl", "ops")
GOOD_SUFFIX = "-bisect-good"  # the good revision's install, beside the measured one


@dataclass
class BisectRequest:
    source: str
    good: str | None = None
    bad: str | None = None
    target: str = ""
    model: str = ""
    metric: str = "eval"
    threshold: float | None = None  # None: the geometric middle of the measured ends (measure.threshold_from_ends)
    reps: int = 10
    ndev: int | None = None
    devices: str | None = None
    threads: int | None = None
    ubatch: int = 1024
    knobs: list[tuple[str, str]] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    dest: str = ""
    models_dir: str = ""
    timeout: float | None = None
    allow_cpu_fallback: bool = False
    text: str | None = None           # ppl
    max_diff: float = 0.01            # ppl
    ops: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    build: dict[str, Any] = field(default_factory=dict)  # build's settings flags (build.os, ...)
    db: str | None = None
    out: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BisectRequest":
        known = {f.name for f in dataclasses.fields(cls)}
        req = cls(**{k: v for k, v in data.items() if k in known})
        req.knobs = [tuple(k) for k in req.knobs]
        return req

    def check(self) -> None:
        if not self.good or not self.bad:
            raise UsageError("give --good REV and --bad REV (or --resume to continue an interrupted bisect)")
        if self.metric not in METRICS:
            raise UsageError(f"--metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.threshold is not None and not 0 < self.threshold <= 1:
            raise UsageError("--threshold must be a ratio in (0, 1], e.g. 0.95")
        if not self.target:
            raise UsageError("no target: give -t TARGET or set run.target")
        if self.metric in ("eval", "prompt", "ppl") and not self.model:
            raise UsageError(f"--metric {self.metric} needs --model (a file here, or a name in the models directory)")
        if self.metric == "ppl" and not self.text:
            raise UsageError("--metric ppl needs --text FILE (the text llama-perplexity measures)")
        from ..deploy.models import check_local

        check_local([self.model])  # a local model is a GGUF before the first revision is built


def run_bisect(req: BisectRequest, settings_for: Callable[[BisectRequest], Any], *,
               resume: bool = False) -> dict[str, Any]:
    """``settings_for(request)``: the settings a step builds with (the request's build flags over
    the checkout's config), loaded after --resume has read the stored request."""
    repo = Repo(req.source)
    settings = settings_for(req)
    db = Path(req.db).expanduser() if req.db else history.default_path(settings["run.results_dir"])
    steps: list[dict[str, Any]] = []
    if resume:
        bisect_id, stored, steps = record.unfinished(db, str(repo.top))
        req = dataclasses.replace(BisectRequest.from_json(stored), db=str(db), out=req.out or stored.get("out", ""))
        settings = settings_for(req)
        ui.info(f"resuming bisect {bisect_id}: {len(steps)} step(s) in the history")
    else:
        req.check()
        bisect_id = "bisect-" + history.new_bench_id()[:10]
    good, bad = repo.resolve(req.good or "", "--good"), repo.resolve(req.bad or "", "--bad")
    commits = repo.history(good, bad)
    out = Path(req.out or Path(settings["run.results_dir"]) / bisect_id)
    if not resume:
        req.out, req.good, req.bad = str(out), good, bad
    search = Search(len(commits))
    index = {c.sha: i for i, c in enumerate(commits)}
    for st in steps:
        search.set(index[st["commit"]], st["verdict"])
    runner = _Stepper(req, settings, db, bisect_id, out, last=len(commits) - 1)
    for st in steps:  # a resumed bisect: the threshold its bad end gave
        runner.after(st)
    with Workspace(repo) as ws:  # the checkout's lock first: a second bisect of it records nothing
        if resume:
            record.set_status(db, bisect_id, record.RUNNING)
        else:
            record.start(db, bisect_id, str(repo.top), req.to_json())
        ui.info(f"bisect {bisect_id}: {len(commits)} revisions from {commits[0].short} (good) to {commits[-1].short} "
                f"(bad), {req.metric} on {req.target}; at most {expected_steps(len(commits))} measured steps")
        _preload_chart()
        runner.good_package = ws.base / f"{bisect_id}-good"
        if isinstance(runner.job, PerfJob) and req.threshold is not None:
            ui.info(f"threshold {req.threshold:g}x the good revision: given (--threshold)")
        try:
            while not runner.no_regression and (i := search.next()) is not None:
                st = runner.step(ws, commits[i], i, len(steps) + 1)
                steps.append(st)
                search.set(i, st["verdict"])
                record.save_step(db, bisect_id, st["step"], commits[i].sha, st["verdict"], st.get("reason"), st)
                if i == 0 and st["verdict"] != GOOD:
                    raise BisectUndecided(f"the good revision {commits[0].short} {st['verdict']}: {st.get('reason')}; "
                                          "there is nothing to compare the others with",
                                          hint="pick a --good revision that builds, runs and passes")
                runner.after(st, announce=True)
        except (KeyboardInterrupt, Interrupted):
            record.set_status(db, bisect_id, record.INTERRUPTED)
            raise Interrupted(f"interrupted after {len(steps)} step(s): the bisect's worktree was removed and the "
                              f"checkout is as it was; `hexbuild bisect --resume --source {repo.top}` continues from "
                              "the history") from None
        except HexbuildError:
            record.set_status(db, bisect_id, record.FAILED)
            raise
    import shutil

    shutil.rmtree(runner.good_package, ignore_errors=True)
    doc = _result(req, bisect_id, repo, commits, search, steps, db, out, runner)
    record.set_status(db, bisect_id, record.DONE, {k: v for k, v in doc.items() if k != "steps"})
    report.write(out, doc)
    return doc


class _Stepper:
    """Build, deploy and measure one revision."""

    def __init__(self, req: BisectRequest, settings: Any, db: Path, bisect_id: str, out: Path, *, last: int) -> None:
        self.req, self.settings, self.db, self.bisect_id, self.out = req, settings, db, bisect_id, out
        self.last = last  # the bad end's index
        self.threshold: float | None = req.threshold
        self.threshold_reason = "given (--threshold)" if req.threshold is not None else None
        self.no_regression = False  # the bad end did not measure slower than the good one
        self.good_package: Path | None = None  # a copy of the good revision's package (perf metrics)
        self.good_dest: str | None = None
        self.good_revision: str | None = None
        self.compiled: list[str] = []
        local = Path(req.model).expanduser() if req.model else None
        self.local_model = local if local is not None and local.is_file() else None
        model = self.local_model.name if self.local_model else req.model
        if req.metric in ("eval", "prompt"):
            self.job: Any = PerfJob(target=req.target, model=model, metric=req.metric, reps=req.reps, ndev=req.ndev, devices=req.devices, threads=req.threads,
                                    ubatch=req.ubatch, knobs=list(req.knobs), extra=list(req.extra), dest=req.dest,
                                    models_dir=req.models_dir, timeout=req.timeout,
                                    allow_cpu_fallback=req.allow_cpu_fallback, db=str(db))
        else:
            self.job = GateJob(metric=req.metric, target=req.target, model=model, text=req.text,
                               max_diff=req.max_diff, ndev=req.ndev, devices=req.devices, ops=list(req.ops),
                               types=list(req.types), dest=req.dest, models_dir=req.models_dir, timeout=req.timeout)

    def step(self, ws: Workspace, commit: Commit, index: int, number: int) -> dict[str, Any]:
        ui.info(f"step {number}: {commit.short} {commit.subject} (revision {index} after the good one)"
                if index else f"step {number}: the good revision {commit.short} {commit.subject} (the baseline)")
        st: dict[str, Any] = {"step": number, "index": index, **commit.to_json(),
                              "bench_id": record.step_bench_id(self.bisect_id, commit.sha)}
        t0 = time.monotonic()
        path = ws.checkout(commit.sha)
        try:
            package, build_status, st["revision"] = self._build(ws, path)
        except (BuildFailed, VerifyFailed, PackageFailed, UsageError) as e:
            if index == 0:
                raise
            return self._skip(st, self._build_failure(e, st), build_s=time.monotonic() - t0)
        st.update(build_s=round(time.monotonic() - t0, 3), build_status=build_status, compiled=self.compiled)
        if index == 0 and isinstance(self.job, PerfJob) and self.good_package is not None:
            _copy_package(package, self.good_package)
        if index == 0:
            self.good_revision = st["revision"]
        t1 = time.monotonic()
        try:
            self._deploy(package)
        except DeployFailed as e:
            if index == 0:
                raise
            return self._skip(st, f"does not deploy: {e.message}", deploy_s=time.monotonic() - t1)
        st["deploy_s"] = round(time.monotonic() - t1, 3)
        t2 = time.monotonic()
        try:
            outcome = self._measure(st)
        except (CpuFallback, RemoteFailed) as e:
            if index == 0:
                raise
            outcome = Outcome(SKIP, f"does not run: {e.message}")
        st["measure_s"] = round(time.monotonic() - t2, 3)
        st.update(outcome.to_json())
        st.update(fidelity.of(self.req.target))  # measured on the virtual NPU: the step says so
        word = outcome.verdict + (f": {outcome.reason}" if outcome.reason else "")
        ui.info(f"step {number}: {commit.short} is {word}" + (f" ({report._fig(st, report.unit_of(self.req.metric))})"
                                                             if st.get("median") is not None else ""))
        return st

    def after(self, st: dict[str, Any], *, announce: bool = False) -> None:
        """What the bad end's step settles when the threshold follows the measured ends: the
        threshold (said with its reason), or that there is no regression to find."""
        if st["index"] != self.last or self.req.threshold is not None or not isinstance(self.job, PerfJob):
            return
        if st["verdict"] == BAD:
            self.threshold, self.threshold_reason = threshold_from_ends(st, report.unit_of(self.req.metric))
            if announce:
                ui.info(f"threshold {self.threshold:.3f}x the good revision: {self.threshold_reason}")
        elif st.get("ratio") is not None:
            self.no_regression = True  # measured, and not slower beyond the noise
        elif announce:
            raise BisectUndecided(f"the bad revision {st['short']} {st['verdict']}: {st.get('reason')}; the threshold "
                                  "follows the measured ends, and this end has no figure",
                                  hint="pick a --bad revision that builds and runs, or give --threshold RATIO")

    def _skip(self, st: dict[str, Any], reason: str, **times: float) -> dict[str, Any]:
        ui.warn(f"step {st['step']}: {st['short']} skipped: {reason}")
        st.update({k: round(v, 3) for k, v in times.items()}, verdict=SKIP, reason=reason)
        return st

    def _build_failure(self, e: HexbuildError, st: dict[str, Any]) -> str:
        """The reason a revision is skipped: the first compiler error, and the build log kept
        beside the results (the worktree's copy goes with the worktree)."""
        import shutil

        message, log = e.message, e.details.get("log")
        tail = [line for line in e.details.get("log_tail") or [] if "error" in line.lower()]
        if log and Path(log).is_file():
            kept = self.out / "logs" / st["short"] / Path(log).name
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, kept)
            message = message.replace(str(log), str(kept))
            st["build_log"] = str(kept)
        return f"does not build: {message}" + (f" ({tail[0].strip()})" if tail else "")

    def _build(self, ws: Workspace, path: Path) -> tuple[Path, str, str | None]:
        """The package, the build's status and the revision it records (git describe: the label
        of this step's rows in the history)."""
        import json

        from ..build import BuildOptions, plan_build, run_build

        options = BuildOptions.from_settings(self.settings)
        options.source = path
        plan = plan_build(options)
        ws.use_build_dir(plan.build_dir)
        result = run_build(options)
        self.compiled = _compiled(Path(result.log)) if result.status == "ok" else []
        try:
            manifest = json.loads((Path(result.package) / "manifest.json").read_text("utf-8"))
            revision = (manifest.get("llama_cpp") or {}).get("revision")
        except (OSError, ValueError):
            revision = None
        return Path(result.package), result.status, revision or plan.facts.revision

    def _deploy(self, package: Path) -> None:
        """The revision to its dest; for a perf metric also the good revision to the dest beside
        it (made once: later steps find it unchanged, a resumed bisect on a wiped device remakes it)."""
        from ..deploy import DeployOptions, deploy, raise_for_failures
        from ..runner import default_dest
        from ..targets import parse_target

        s = self.settings
        opts = DeployOptions(dest=self.req.dest or None, models=[self.local_model] if self.local_model else [],
                             models_dir=self.req.models_dir or None, parallel=1, wait=s["deploy.wait"],
                             stale_lock=s["deploy.stale_lock"], bundle_runtime=s["deploy.bundle_runtime"],
                             sysroot=s["linux.sysroot"])
        target = parse_target(self.req.target, s)
        try:
            raise_for_failures(deploy(package, [target], opts))
            if isinstance(self.job, PerfJob) and self.good_package is not None and self.good_package.is_dir():
                dest = self.req.dest or default_dest(target)
                self.good_dest = f"{target.expand(dest) if hasattr(target, 'expand') else dest}{GOOD_SUFFIX}"
                good = dataclasses.replace(opts, dest=self.good_dest, models=[])
                raise_for_failures(deploy(self.good_package, [target], good))
        finally:
            target.close()

    def _measure(self, st: dict[str, Any]) -> Outcome:
        if isinstance(self.job, PerfJob):
            prior = record.prior_runs(self.db, st["bench_id"], self.job.metric)
            if prior:
                ui.info(f"{len(prior)} run(s) of {st['short']} already in the history")
            good_dest = self.good_dest if st["index"] else None
            if st["index"] and good_dest is None:
                raise UsageError(f"the good revision's package kept at {self.good_package} is gone, so the revisions "
                                 "cannot be measured beside it", hint="start the bisect again")
            prior_good = record.prior_runs(self.db, f"{st['bench_id']}-good", self.job.metric) if good_dest else []
            confirming = st["index"] == self.last and self.req.threshold is None
            return measure_perf(self.job, self.settings, bench_id=st["bench_id"], logs=self.out / "logs" / st["short"],
                                prior=prior, good_dest=good_dest, prior_good=prior_good,
                                revisions=(st.get("revision"), self.good_revision),
                                threshold=CONFIRM if confirming or self.threshold is None else self.threshold)
        return measure_gate(self.job, self.settings, out=self.out / "tests" / st["short"])


def _result(req: BisectRequest, bisect_id: str, repo: Repo, commits: list[Commit], search: Search,
            steps: list[dict[str, Any]], db: Path, out: Path, runner: _Stepper) -> dict[str, Any]:
    by_index = {s["index"]: s for s in steps}
    doc: dict[str, Any] = {
        "schema": report.SCHEMA, "bisect_id": bisect_id, "source": str(repo.top), "target": req.target,
        "model": req.model, "metric": req.metric, "threshold": runner.threshold,
        "threshold_source": None if runner.threshold is None else ("given" if req.threshold is not None else "measured"),
        "threshold_reason": runner.threshold_reason, "reps": req.reps,
        "good": commits[0].to_json(), "bad": commits[-1].to_json(), "revisions": len(commits),
        "steps_taken": len(steps), "expected_steps": expected_steps(len(commits)),
        "skipped": sum(s["verdict"] == SKIP for s in steps), "baseline": by_index.get(0, {}),
        "first_bad": None, "last_good": None, "suspects": [], "steps": steps, "db": str(db), "out": str(out)}
    first = search.first_bad()
    if first is not None:
        doc.update(status="found", first_bad={**by_index[first], "index": first},
                   last_good={**by_index[search.lo], "index": search.lo})
    elif search.verdicts.get(len(commits) - 1) == GOOD or runner.no_regression:
        doc.update(status="no-regression", bad_step=by_index[len(commits) - 1])
    else:
        doc.update(status="ambiguous", suspects=[{**commits[i].to_json(), "index": i,
                                                  "verdict": search.verdicts.get(i, "untested")}
                                                 for i in search.suspects()])
    return fidelity.mark(doc)


def _preload_chart() -> None:
    """matplotlib (seconds to import) is loaded on a thread while the first build runs, so the
    chart at the end costs only its drawing."""
    import threading

    def load() -> None:
        try:
            from ..results.chart import pyplot

            pyplot()
        except Exception:  # noqa: BLE001 — no chart extra: the report says so when it draws
            pass

    threading.Thread(target=load, name="bisect-chart-import", daemon=True).start()


def _compiled(log: Path) -> list[str]:
    """The objects a build compiled (ninja's "Building C/CXX object" lines): what a step cost."""
    import re

    try:
        text = log.read_text("utf-8", "replace")
    except OSError:
        return []
    build = text.split("+ cmake --build", 1)[-1].split("+ cmake --install", 1)[0]
    return re.findall(r"Building (?:C|CXX|ASM) object (\S+)", build)


def _copy_package(package: Path, to: Path) -> None:
    """The good revision's package, kept while later steps overwrite the worktree's."""
    import shutil

    part = to.with_name(to.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    shutil.copytree(package, part, symlinks=True)
    shutil.rmtree(to, ignore_errors=True)
    part.rename(to)


def raise_unless_found(doc: dict[str, Any]) -> None:
    if doc["status"] == "found":
        return
    if doc["status"] == "no-regression":
        raise BisectUndecided(f"the bad revision {doc['bad']['short']} {report.no_regression(doc)}: no regression to find "
                              f"(details in {doc['files']['markdown']})", details={"result": doc})
    names = ", ".join(c["short"] for c in doc["suspects"])
    raise BisectUndecided(f"skipped revisions leave {len(doc['suspects'])} candidates for the first bad commit: {names}",
                          hint=f"details in {doc['files']['markdown']}", details={"result": doc})
