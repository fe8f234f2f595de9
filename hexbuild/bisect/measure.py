"""One revision's figure: llama-bench repeated until the median and its spread decide against the
baseline (eval/prompt tokens/s), or `hexbuild test`'s own gate (ops, ppl).

The good revision stays installed beside the one measured (``<dest>-bisect-good``), and each run
of a revision is paired with a run of the good one, in turn: the verdict compares the two sets
measured in the same minutes, so what drifts over a bisect (a phone heating up, a throttled
clock, other load on a shared board) moves both sides alike instead of reading as a regression.

The ratio is the median of the pairs' ratios (this revision / the good one). Its noise is a
distribution-free 90 % confidence interval for that median (order statistics: with five pairs
it is their whole range, from eight on the extremes drop out, so one disturbed run cannot decide
or block a verdict). A revision is bad when the whole interval lies below the threshold, good
when it lies at or above it; otherwise one more pair, up to ``reps``, and then `skip`. The first
decision comes after ``min(5, reps)`` pairs.

The threshold follows the measured ends unless the user gives one: the bad revision is measured
right after the good one and is confirmed slower when its whole interval lies below CONFIRM
(0.9: at least 10 % slower; a smaller regression needs --threshold); the
threshold is then the geometric middle of the two ends' rates, the square root of the bad end's
ratio (an 8x slowdown, 0.125x, puts it at 0.354x: a revision at 0.97x is plainly good, one at
0.13x plainly bad, with the same room for the noise on both sides).
Every run's rows go to the bench history as they come, under the step's bench id (the good
revision's under ``<bench id>-good``), so a resumed bisect picks up the runs it already has.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import runner
from ..bench import matrix
from ..bench.history import Recorder
from ..errors import EnvironmentMissing, RemoteFailed
from ..ui import ui
from .search import BAD, GOOD, SKIP

# The bad end, when the threshold follows the ends, must be slower than this beyond the noise:
# two builds of one tree, measured pair by pair on a shared 2-core runner while other jobs
# started and stopped, came out 0.951x with the whole interval below 1. A smaller regression is
# hunted with --threshold.
CONFIRM = 0.9
MIN_REPS = 5      # pairs before the first decision: the whole range then covers the median 94 % of the time
CONFIDENCE = 0.9  # of the interval a verdict needs
BASELINE_RUNS = 3  # the good revision's own step: its figure for the record (verdicts use the pairs)
PERF_KINDS = {"eval": "eval", "prompt": "prompt"}


@dataclass
class Figures:
    values: list[float] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> float:
        med = self.median
        return (max(self.values) - min(self.values)) / 2 / med if med else 0.0

    def to_json(self) -> dict[str, Any]:
        if not self.values:
            return {"values": [], "n": 0, "median": None, "spread": None}
        return {"values": [round(v, 4) for v in self.values], "n": self.n, "median": round(self.median, 4),
                "spread": round(self.spread, 4)}


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free confidence interval for the median: the k-th smallest and k-th largest
    of n values cover it with probability 1 - 2 P(Binomial(n, 1/2) < k); k is the largest with at
    least ``confidence`` (k = 1, the whole range, below five values)."""
    v = sorted(values)
    n, k = len(v), 1
    while k + 1 <= n // 2:
        below = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n  # P(Bin < k + 1)
        if 1 - 2 * below < confidence:
            break
        k += 1
    return v[k - 1], v[n - k]


def decide(good: Figures, this: Figures, threshold: float) -> tuple[str | None, float, tuple[float, float]]:
    """(verdict or None while undecided, ratio, its interval) from paired runs: the ratio is the
    median of each pair's this/good; bad when the whole confidence interval of that median lies
    below the threshold, good when it lies at or above it."""
    pairs = [t / g for g, t in zip(good.values, this.values) if g > 0]
    if not pairs:
        return None, float("nan"), (float("nan"), float("nan"))
    ratio = statistics.median(pairs)
    lo, hi = median_interval(pairs)
    if hi < threshold:
        return BAD, ratio, (lo, hi)
    if lo >= threshold:
        return GOOD, ratio, (lo, hi)
    return None, ratio, (lo, hi)


@dataclass
class Outcome:
    verdict: str          # good | bad | skip
    reason: str | None = None
    figures: Figures = field(default_factory=Figures)
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, **self.figures.to_json(),
                "ratio": None if self.ratio is None else round(self.ratio, 4),
                "interval": None if self.interval is None else [round(x, 4) for x in self.interval], **self.detail}


@dataclass
class PerfJob:
    """The llama-bench configuration every step measures."""

    target: str
    model: str
    metric: str
    reps: int
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
    db: str | None = None

    def bench_request(self, threads: int | None) -> matrix.BenchRequest:
        extra = list(self.extra)
        given = set(extra)
        # only the test the metric reads: llama-bench's default runs both pp512 and tg128
        if self.metric == "eval" and not given & {"-p", "--n-prompt"}:
            extra = ["-p", "0", *extra]
        if self.metric == "prompt" and not given & {"-n", "--n-gen"}:
            extra = ["-n", "0", *extra]
        if not given & {"-r", "--repetitions"}:  # the pairs are the repetitions
            extra = ["-r", "1", *extra]
        return matrix.BenchRequest(
            targets=[self.target], models=[self.model], ndev=[self.ndev] if self.ndev else ([] if self.devices else [1]),
            devices=[self.devices] if self.devices else [], ubatch=[self.ubatch], threads=[threads] if threads else [], repeat=1,
            knobs=list(self.knobs), extra=extra, dest=self.dest, models_dir=self.models_dir, timeout=self.timeout,
            db=self.db, allow_cpu_fallback=self.allow_cpu_fallback, sessions_given=bool(self.ndev or self.devices))


def measure_perf(job: PerfJob, settings: Any, *, bench_id: str, logs: Path, prior: list[float],
                 good_dest: str | None = None, prior_good: list[float] | None = None,
                 revisions: tuple[str | None, str | None] = (None, None), threshold: float = CONFIRM) -> Outcome:
    """Run llama-bench at the deployed revision until the figures decide. ``good_dest``: where
    the good revision is installed beside it; each of this revision's runs is then paired with a
    run of the good one, in turn, and the verdict compares the two sets: what drifts over a
    bisect (a phone heating up, other load on a board) moves both alike. Without it this is the
    baseline step: ``min(3, reps)`` runs of the good revision, for the record. ``prior``/``prior_good``: runs the
    history already has for this step (a bisect cut short). ``revisions``: the labels of this
    revision's rows and of the good one's (what deploy recorded may be an earlier revision with
    the same files: an unchanged install is not rewritten). ``threshold``: the ratio the
    verdict is taken against."""
    figures, good = Figures(list(prior)), Figures(list(prior_good or []))
    kind = PERF_KINDS[job.metric]
    first_decision = min(MIN_REPS, job.reps)
    with runner.open_target(job.target, settings) as target:
        from ..runner.defaults import given_threads

        req = job.bench_request(job.threads or given_threads(settings))
        planned = matrix.plan(req, settings)[0]
        sides = [(planned, req, figures, bench_id)]
        labels = {bench_id: revisions[0]}
        if good_dest is not None:
            good_req = dataclasses.replace(req, dest=good_dest)
            sides.insert(0, (matrix.plan(good_req, settings)[0], good_req, good, f"{bench_id}-good"))
            labels[f"{bench_id}-good"] = revisions[1]
        recorders = {}
        for p, r, _, bid in sides:
            rec = Recorder(job.db, settings["run.results_dir"])
            rec.bench_id = bid
            rec.open_target(target, r.dest)
            recorders[bid] = rec
        failed: list[str] = []
        while figures.n < job.reps:
            if good_dest is None and figures.n >= min(BASELINE_RUNS, job.reps):
                break
            if figures.n >= first_decision:
                verdict, ratio, interval = decide(good, figures, threshold)
                if verdict:
                    return Outcome(verdict, None, figures, ratio, interval, {"good": good.to_json()})
            for p, r, figs, bid in sides:
                if figs is good and good.n > figures.n:
                    continue  # pairs: one good run per run of this revision
                rep = figs.n + len(failed) + 1
                info, got = matrix.run_once(target, p, rep, r, logs / ("good" if figs is good else "this"))
                rows = recorders[bid].label(target, p.invocation, got)
                if labels.get(bid):
                    rows = [{**row, "revision": labels[bid]} for row in rows]
                recorders[bid].save(rows)
                values = [row["avg_ts"] for row in rows if row["kind"] == kind]
                if not values:
                    why = info.get("error") or (f"llama-bench exited {info.get('exit_code')}" if info.get("exit_code")
                                                else f"llama-bench printed no {job.metric} record")
                    failed.append(f"{why} (log {info.get('log')})")
                    if figs is good:
                        raise RemoteFailed(f"the good revision's install at {good_dest} does not run any more: "
                                           f"{failed[-1]}")
                    if len(failed) >= 2 or info.get("cpu_fallback"):
                        return Outcome(SKIP, f"does not run: {failed[-1]}", figures)
                    break
                figs.values.append(values[0])
    if good_dest is None:
        return Outcome(GOOD, None, figures) if figures.values else Outcome(SKIP, "no figure", figures)
    verdict, ratio, interval = decide(good, figures, threshold)
    if verdict is None:
        return Outcome(SKIP, f"undecided after {figures.n} pairs of runs: {ratio:.3f}x, its {CONFIDENCE:.0%} interval "
                             f"{interval[0]:.3f}..{interval[1]:.3f} holds the threshold {threshold:.3g}", figures, ratio,
                       interval, {"good": good.to_json()})
    return Outcome(verdict, None, figures, ratio, interval, {"good": good.to_json()})


def threshold_from_ends(bad: dict[str, Any], unit: str = "t/s") -> tuple[float, str]:
    """The threshold that follows the measured ends, and why: the geometric middle of the good
    and the bad revision's rates, from the bad end's step (its median pair ratio, and the
    medians of its runs and of the good runs beside them)."""
    ratio = bad["ratio"]
    threshold = math.sqrt(ratio)
    good_median = (bad.get("good") or {}).get("median")
    rates = f" ({bad['median']:.4g} against {good_median:.4g} {unit})" if good_median and bad.get("median") else ""
    return threshold, (f"the geometric middle of the measured ends: the bad revision {bad['short']} ran at "
                       f"{ratio:.3f}x the good one{rates}; --threshold RATIO sets a fixed one")


@dataclass
class GateJob:
    """`hexbuild test ops` or `test ppl` as the step's verdict."""

    metric: str                       # ops | ppl
    target: str
    model: str | None = None
    text: str | None = None
    max_diff: float = 0.01
    ndev: int | None = None
    devices: str | None = None
    ops: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    chunks: int | None = None
    ctx: int | None = None
    dest: str = ""
    models_dir: str = ""
    timeout: float | None = None


def measure_gate(job: GateJob, settings: Any, *, out: Path) -> Outcome:
    from ..checks import ops, ppl

    if job.metric == "ops":
        req = ops.OpsRequest(target=job.target, ndev=job.ndev, devices=job.devices,
                             ops=job.ops or list(ops.DEFAULT_OPS), types=job.types or list(ops.DEFAULT_TYPES),
                             dest=job.dest, models_dir=job.models_dir, out=str(out), timeout=job.timeout)
        doc = ops.run(req, settings)
        detail = {"passed": sum(d["passed"] for d in doc["devices"]), "failed": sum(d["failed"] for d in doc["devices"]),
                  "results": doc["files"]["json"]}
        if not doc["devices"]:  # a CPU-only package: nothing to compare, at any revision
            raise EnvironmentMissing(f"--metric ops: {doc['reason']}",
                                     hint="ops compares HTP sessions with the CPU: bisect a vendor build on a device")
    else:
        req = ppl.PplRequest(target=job.target, model=job.model or "", text=job.text or "", chunks=job.chunks,
                             ctx=job.ctx, max_diff=job.max_diff, ndev=job.ndev, devices=job.devices, dest=job.dest,
                             models_dir=job.models_dir, out=str(out), timeout=job.timeout)
        doc = ppl.run(req, settings)
        detail = {"relative_diff": doc["relative_diff"], "ppl_htp": doc["htp"]["ppl"], "ppl_cpu": doc["cpu"]["ppl"],
                  "results": doc["files"]["json"]}
        if doc["htp"]["ppl"] is None or doc["cpu"]["ppl"] is None:
            return Outcome(SKIP, f"does not run: {doc['reason']}", detail=detail)
    ui.info(f"{job.metric}: {'passed' if doc['ok'] else 'FAILED'}" + (f" ({doc['reason']})" if doc["reason"] else ""))
    return Outcome(GOOD if doc["ok"] else BAD, doc["reason"], detail=detail)
