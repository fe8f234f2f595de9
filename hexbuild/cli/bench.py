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
    ubatch: Optional[str] = typer.Option(None, "--ubatch", help="ubatch sizes, e.g. 256,512 (default: run.ubatch)."),
    threads: Optional[str] = typer.Option(None, "--threads", help="CPU thread counts, e.g. 4,6 (default: run.threads)."),
    batch: Optional[str] = typer.Option(None, "--batch", help="Batch sizes (default: llama-bench's)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model files, e.g. a.gguf,b.gguf (default: run.model)."),
    repeat: int = typer.Option(1, "--repeat", "-r", min=1, max=100, help="Runs per configuration; results are medians."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/bench-<time>)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the targets (default: deploy.dest)."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", help="Models directory on the targets."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds allowed for one llama-bench run."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback",
                                            help="Keep runs whose HTP sessions did not open (else exit 11)."),
) -> None:
    """Benchmark llama-bench over targets, session counts, models and batch sizes.

    Every combination of the --ndev, --model, --ubatch, --threads and --batch lists on every target,
    --repeat times each; writes results.json, results.csv, results.md and results.png (median
    prompt and generation tokens/s per configuration), and appends the table to
    $GITHUB_STEP_SUMMARY when set. Arguments after -- go to llama-bench."""
    from .. import bench
    from ..ui import ui

    s = common.settings(**{"run.results_dir": None, "deploy.dest": dest, "deploy.models_dir": models_dir})
    targets = list(target or ([s["run.target"]] if s["run.target"] else []))
    req = bench.BenchRequest(
        targets=targets,
        models=bench.str_list(model) or ([s["run.model"]] if s["run.model"] else []),
        ndev=bench.int_list(ndev, "--ndev", maximum=16) or [s["run.ndev"] or 1],
        ubatch=bench.int_list(ubatch, "--ubatch") or [s["run.ubatch"]],
        threads=bench.int_list(threads, "--threads") or [s["run.threads"]],
        batch=bench.int_list(batch, "--batch"),
        repeat=repeat, knobs=ctx.meta.get("hexbuild.knobs", []), extra=ctx.meta.get("hexbuild.extra", []),
        dest=s["deploy.dest"], models_dir=s["deploy.models_dir"], out=out or "", timeout=timeout,
        allow_cpu_fallback=allow_cpu_fallback)
    result = bench.run(req, s)
    ui.info(f"results in {result['out']}")
    ui.result(result, bench.markdown(result["results"]))


def register(app: typer.Typer) -> None:
    app.command("bench", cls=PassthroughCommand, epilog=KNOB_HELP)(bench_command)
