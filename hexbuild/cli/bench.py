"""hexbuild bench: llama-bench over a matrix of targets, session counts and models."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common
from .run import KNOB_HELP, PassthroughCommand


def bench_command(
    ctx: typer.Context,
    target: Optional[List[str]] = typer.Option(None, "-t", "--target", help="Target; repeat for several (default: run.target)."),
    ndev: Optional[str] = typer.Option(None, "--ndev", help="Session counts, e.g. 1,2,4."),
    devices: Optional[List[str]] = typer.Option(None, "--devices", metavar="LIST", help="A device list, e.g. HTP0,HTP1; repeat for several (each one configuration)."),
    ubatch: Optional[str] = typer.Option(None, "--ubatch", help="ubatch sizes, e.g. 256,512 (default: run.ubatch)."),
    threads: Optional[str] = typer.Option(None, "--threads", help="CPU thread counts, e.g. 4,6 (default: run.threads when set, else the target's: this machine's cores on local: and qemu:, 6 on a phone)."),
    batch: Optional[str] = typer.Option(None, "--batch", help="Batch sizes (default: llama-bench's)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model files, e.g. a.gguf,b.gguf (default: run.model)."),
    repeat: int = typer.Option(1, "--repeat", "-r", min=1, max=100, help="Runs per configuration; results are medians."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/bench-<time>)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the targets (default: deploy.dest)."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", help="Models directory on the targets."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds allowed for one llama-bench run."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback",
                                            help="Keep runs whose HTP sessions did not open (else exit 12)."),
    db: Optional[str] = typer.Option(None, "--db", metavar="FILE", help="History database the rows are appended to (default: <run.results_dir>/bench.sqlite; '' for none)."),
    gguf: Optional[List[str]] = typer.Option(None, "--gguf", metavar="FILE", help="A local copy of a model, for the memory roofline (repeatable; matched by file name; default: --model when it is a local file)."),
    soc: Optional[str] = typer.Option(None, "--soc", metavar="MODEL", help="The SoC whose DRAM bounds decode, e.g. SM8650 (default: each device's own)."),
    peak_bandwidth: Optional[float] = typer.Option(None, "--peak-bandwidth", metavar="GB/S", min=0.001, help="Peak DRAM bandwidth for the roofline, instead of hexbuild's table."),
) -> None:
    """Benchmark llama-bench over targets, session counts, models and batch sizes.

    Every combination of the --ndev, --model, --ubatch, --threads and --batch lists on every target,
    --repeat times each; writes results.json, results.csv, results.md and results.png (median
    prompt and generation tokens/s per configuration), and appends the table to
    $GITHUB_STEP_SUMMARY when set. Every result row is also appended to the history database
    (--db), for `hexbuild bench compare`. Decode figures are also given as a share of the device's
    memory roofline (peak DRAM bandwidth / bytes read per token), with the bandwidth's source.
    Arguments after -- go to llama-bench."""
    from ..bench import matrix as bench
    from ..runner.defaults import given_threads
    from ..ui import ui

    s = common.settings(**{"run.results_dir": None, "deploy.dest": dest, "deploy.models_dir": models_dir})
    targets = list(target or ([s["run.target"]] if s["run.target"] else []))
    req = bench.BenchRequest(
        targets=targets,
        models=bench.str_list(model) or ([s["run.model"]] if s["run.model"] else []),
        ndev=bench.int_list(ndev, "--ndev", maximum=16) or ([] if devices else [s["run.ndev"] or 1]),
        devices=list(dict.fromkeys(d.strip() for d in devices or [] if d.strip())),
        ubatch=bench.int_list(ubatch, "--ubatch") or [s["run.ubatch"]],
        threads=bench.int_list(threads, "--threads") or ([t] if (t := given_threads(s)) else []),
        batch=bench.int_list(batch, "--batch"),
        repeat=repeat, knobs=ctx.meta.get("hexbuild.knobs", []), extra=ctx.meta.get("hexbuild.extra", []),
        dest=s["deploy.dest"], models_dir=s["deploy.models_dir"], out=out or "", timeout=timeout, db=db,
        allow_cpu_fallback=allow_cpu_fallback, sessions_given=bool(ndev or devices or s["run.ndev"]),
        gguf=list(gguf or []), soc=soc, peak_gbs=peak_bandwidth)
    from ..deploy.models import check_local
    from ..plan.gguf_layout import require_model_file

    check_local(req.models)  # local models and --gguf copies are GGUF files before any target is opened
    for g in req.gguf:
        require_model_file(g)
    result = bench.run(req, s)
    ui.info(f"results in {result['out']}")
    ui.result(result, bench.markdown(result["results"]))


def compare_command(
    baseline: str = typer.Option(..., "--baseline", metavar="REV|FILE", help="A revision, package sha256 or bench id in --db (or a unique prefix), or a results.json, bench directory or database."),
    candidate: str = typer.Option(..., "--candidate", metavar="REV|FILE", help="The same, for the build being judged."),
    db: Optional[str] = typer.Option(None, "--db", metavar="FILE", help="History database (default: <run.results_dir>/bench.sqlite)."),
    by: Optional[str] = typer.Option(None, "--by", metavar="KEYS", help="Group by these keys, e.g. device,model,test (default: every configuration key)."),
    fail_below: Optional[float] = typer.Option(None, "--fail-below", metavar="RATIO", help="Exit 11 when a group is slower than RATIO (e.g. 0.95) beyond the noise of its repeats."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/compare-<time>)."),
) -> None:
    """Compare two builds' benchmark results: speedup per device, model and test.

    Prints the table (t/s of baseline and candidate, their ratio and the noise of the repeats),
    writes compare.json, compare.md and compare.png, and appends the table to
    $GITHUB_STEP_SUMMARY when set."""
    from pathlib import Path

    from .. import runner
    from ..bench import compare as bench_compare, history as bench_history
    from ..errors import RegressionFound
    from ..ui import ui

    s = common.settings(**{"run.results_dir": None})
    path = Path(db).expanduser() if db else bench_history.default_path(s["run.results_dir"])
    where = Path(out) if out else Path(s["run.results_dir"]) / f"compare-{runner._timestamp()}"
    try:
        result = bench_compare.run_compare(db=path, baseline=baseline, candidate=candidate, by=by,
                                           fail_below=fail_below, out=where)
    except RegressionFound as e:
        if not ui.json:
            ui.result(e.details["result"], bench_compare.markdown(e.details["result"]))
        raise
    md = result.pop("markdown")
    ui.info(f"comparison in {where}")
    ui.result(result, md)


class BenchCommand(PassthroughCommand):
    """`hexbuild bench ...` runs a benchmark; `hexbuild bench compare ...` hands over to the
    compare command (a click group could not also take llama-bench's arguments after --)."""

    delegates = {"compare": "bench-compare"}

    def make_context(self, info_name, args, parent=None, **extra):
        if args and args[0] in self.delegates and parent is not None:
            cmd = parent.command.get_command(parent, self.delegates[args[0]])
            return cmd.make_context("bench compare", list(args[1:]), parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


def register(app: typer.Typer) -> None:
    app.command("bench", cls=BenchCommand, epilog=KNOB_HELP)(bench_command)
    app.command("bench-compare", hidden=True)(compare_command)
