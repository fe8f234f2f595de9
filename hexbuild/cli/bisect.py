"""hexbuild bisect: the first commit that made a figure slower, or a result wrong."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common
from .run import KNOB_HELP, PassthroughCommand


def bisect_command(
    ctx: typer.Context,
    source: Optional[str] = typer.Option(None, "--source", "-s", help="The llama.cpp git checkout (default: current directory); never changed."),
    good: Optional[str] = typer.Option(None, "--good", metavar="REV", help="A revision that is good: the baseline."),
    bad: Optional[str] = typer.Option(None, "--bad", metavar="REV", help="A later revision that is bad."),
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Target to deploy to and measure on (default: run.target)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="A GGUF here (deployed with the first step) or a name in the models directory."),
    metric: str = typer.Option("eval", "--metric", metavar="eval|prompt|ppl|ops", help="eval or prompt tokens/s (llama-bench), or the ppl / ops gate of hexbuild test."),
    threshold: Optional[float] = typer.Option(None, "--threshold", metavar="RATIO", help="eval/prompt: a revision is bad below RATIO x the good revision's figure, beyond the noise (default: the geometric middle of the measured good and bad ends)."),
    reps: int = typer.Option(10, "--reps", min=1, max=50, help="eval/prompt: the most runs per revision, each paired with a run of the good one (the first decision after 5)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="HTP sessions HTP0..HTP{N-1}."),
    devices: Optional[str] = typer.Option(None, "--devices", metavar="LIST", help="Device list, e.g. HTP0:0,HTP0:1."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="CPU threads (default: the target's, else run.threads)."),
    text: Optional[str] = typer.Option(None, "--text", metavar="FILE", help="ppl: the text llama-perplexity measures."),
    max_diff: float = typer.Option(1.0, "--max-diff", min=0, metavar="PERCENT", help="ppl: largest HTP vs CPU difference, in percent."),
    ops: Optional[str] = typer.Option(None, "--ops", metavar="MUL_MAT,...", help="ops: the ops to test (default: the matmuls)."),
    types: Optional[str] = typer.Option(None, "--types", metavar="q4_0,...", help="ops: weight types (default: the repacked ones)."),
    os_name: Optional[str] = typer.Option(None, "--os", help="Build: android or linux."),
    toolchain: Optional[str] = typer.Option(None, "--toolchain", metavar="vendor|open", help="Build: vendor (the image the revision pins) or open."),
    htp: Optional[List[str]] = typer.Option(None, "--htp", help="Build: NPU library versions, e.g. v75."),
    build_target: Optional[List[str]] = typer.Option(None, "--build-target", metavar="NAME", help="Build: only these CMake targets (e.g. llama-bench)."),
    build_type: Optional[str] = typer.Option(None, "--build-type", help="Build: release, debug or relwithdebinfo."),
    cache_volume: Optional[str] = typer.Option(None, "--cache-volume", metavar="NAME|DIR", help="Build: the compiler cache every step shares."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Build: parallel compile jobs."),
    cmake_arg: Optional[List[str]] = typer.Option(None, "--cmake-arg", help="Build: an extra cmake configure argument (repeatable)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", help="Models directory on the target."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds allowed for one run on the device."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback", help="Count runs whose HTP sessions did not open (else such a revision is skipped)."),
    db: Optional[str] = typer.Option(None, "--db", metavar="FILE", help="Bench history the steps go to (default: <run.results_dir>/bench.sqlite)."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/<bisect id>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the last unfinished bisect of --source from the history, with its own options."),
) -> None:
    """Find the first commit between --good and --bad that made a figure slower, or a result wrong.

    Works in a git worktree of the checkout (left as it was, Ctrl-C included): each step builds
    the revision (only what changed is rebuilt), deploys it (only changed files travel) and
    measures it, llama-bench repeated until the median and its spread decide against the
    threshold (the geometric middle of the measured ends, or --threshold) x the good
    revision's figure, or skips it. Every step goes into the bench
    history; the result names the first bad commit, its subject, the figures on both sides and
    the steps taken, with bisect.json, bisect.md and a chart. --hex-KNOB VALUE and arguments
    after -- go to llama-bench."""
    from .. import bisect
    from ..errors import UsageError
    from ..ui import ui

    build = {k: v for k, v in {
        "build.os": os_name, "build.toolchain": toolchain, "build.htp": htp or None,
        "build.build_targets": build_target or None, "build.build_type": build_type,
        "build.cache_volume": cache_volume, "build.jobs": jobs, "build.cmake_args": cmake_arg or None}.items()
        if v is not None}
    if resume and (good or bad or build):
        raise UsageError("--resume continues with the interrupted bisect's own options; drop --good, --bad and "
                         "the build options")
    s = common.settings(**{"source": source, "run.target": target, "run.model": model, "deploy.dest": dest,
                           "deploy.models_dir": models_dir, "run.results_dir": None})
    req = bisect.BisectRequest(
        source=str(common.source_dir(s)), good=good, bad=bad, target=s["run.target"], model=s["run.model"],
        metric=metric, threshold=threshold, reps=reps, ndev=ndev, devices=devices, threads=threads,
        ubatch=s["run.ubatch"], knobs=ctx.meta.get("hexbuild.knobs", []), extra=ctx.meta.get("hexbuild.extra", []),
        dest=s["deploy.dest"], models_dir=s["deploy.models_dir"], timeout=timeout,
        allow_cpu_fallback=allow_cpu_fallback, text=text, max_diff=max_diff / 100.0,
        ops=[o for o in (ops or "").split(",") if o], types=[t for t in (types or "").split(",") if t],
        build=build, db=db, out=out or "")

    def settings_for(r: "bisect.BisectRequest"):
        return common.settings(**{"source": r.source, **r.build})

    doc = bisect.run_bisect(req, settings_for, resume=resume)
    from ..bisect import report

    ui.result(doc, report.headline(doc) + f"\nresults in {doc['out']}")
    bisect.raise_unless_found(doc)


def register(app: typer.Typer) -> None:
    app.command("bisect", cls=PassthroughCommand, epilog=KNOB_HELP)(bisect_command)
