"""hexbuild test ops|ppl|kernels: is the NPU right (test-backend-ops against the CPU; perplexity gate; the
tree's kernels on an emulated DSP)."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common

test_app = typer.Typer(help="Check that the NPU computes right: op tests and a perplexity gate.",
                       no_args_is_help=True)


def _list(text: Optional[str]) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


@test_app.command("ops")
def ops(
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Target (default: run.target)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="Test sessions HTP0..HTP{N-1}."),
    devices: Optional[str] = typer.Option(None, "--devices", help="Sessions to test, e.g. HTP0:0,HTP0:1."),
    op: Optional[str] = typer.Option(None, "-o", "--ops", metavar="MUL_MAT,MUL_MAT_ID", help="Ops (default: the matmuls)."),
    types: Optional[str] = typer.Option(None, "--types", metavar="q4_0,q8_0,mxfp4",
                                        help="Weight types (default: the ones the backend repacks); 'all' for every type."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/test-ops-<time>)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds allowed per session."),
    count_known: bool = typer.Option(False, "--count-known",
                                     help="Count the cases known to fail on phones too (llama.cpp's CI leaves them out) as failures."),
) -> None:
    """Run the deployed test-backend-ops (mode test) against each HTP session; exit 13 on a failure.

    Reports per op and type: passed, failed, not supported, with the failing cases. A session on
    which nothing ran, or a package with no HTP session, is a failure (upstream says OK). A case
    known to fail on phones too is listed as known, not counted, unless --count-known."""
    from ..checks import ops as checks
    from ..errors import TestsFailed
    from ..ui import ui

    s = common.settings(**{"run.target": target, "deploy.dest": dest, "run.ndev": ndev})
    req = checks.OpsRequest(
        target=s["run.target"], ndev=ndev if ndev is not None else (None if devices else (s["run.ndev"] or None)),
        devices=devices, ops=_list(op) or list(checks.DEFAULT_OPS),
        types=[] if (types or "").strip() == "all" else (_list(types) or list(checks.DEFAULT_TYPES)),
        dest=s["deploy.dest"], models_dir=s["deploy.models_dir"], out=out or "", timeout=timeout,
        count_known=count_known)
    doc = checks.run(req, s)
    ui.result(doc, checks.markdown(doc))
    if not doc["ok"]:
        raise TestsFailed(f"test ops on {req.target}: {doc['reason']}", hint=f"details in {doc['files']['markdown']}")


@test_app.command("ppl")
def ppl(
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Target (default: run.target)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="GGUF in the models directory, or an absolute path."),
    text: str = typer.Option(..., "--text", metavar="FILE", help="Text to measure on (a local file is copied over)."),
    chunks: Optional[int] = typer.Option(None, "--chunks", min=1, help="Chunks of the text to evaluate."),
    ctx: Optional[int] = typer.Option(None, "--ctx-size", "-c", min=8, help="Context size per chunk."),
    max_diff: float = typer.Option(1.0, "--max-diff", min=0, metavar="PERCENT",
                                   help="Largest relative difference HTP vs CPU, in percent (default 1)."),
    reference_model: Optional[str] = typer.Option(None, "--reference-model", metavar="GGUF",
                                                  help="The CPU run uses this GGUF instead (an f16 baseline)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="HTP sessions HTP0..HTP{N-1}."),
    devices: Optional[str] = typer.Option(None, "--devices", help="Device list, e.g. HTP0:0,HTP0:1."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/test-ppl-<time>)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", help="Models directory on the target."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds allowed per run."),
    extra: Optional[List[str]] = typer.Argument(None, metavar="[-- ARGS]", help="More llama-perplexity arguments."),
) -> None:
    """llama-perplexity on the HTP sessions and on the CPU; exit 13 when they differ by more than --max-diff."""
    from ..checks import ppl as checks
    from ..errors import TestsFailed, UsageError
    from ..ui import ui

    s = common.settings(**{"run.target": target, "run.model": model, "deploy.dest": dest,
                           "deploy.models_dir": models_dir, "run.ndev": ndev})
    if not s["run.model"]:
        raise UsageError("no model: give --model NAME.gguf or set run.model")
    req = checks.PplRequest(
        target=s["run.target"], model=s["run.model"], text=text, reference_model=reference_model, chunks=chunks,
        ctx=ctx, max_diff=max_diff / 100.0, ndev=ndev if ndev is not None else (None if devices else (s["run.ndev"] or None)),
        devices=devices, dest=s["deploy.dest"], models_dir=s["deploy.models_dir"], out=out or "", timeout=timeout,
        extra=tuple(extra or ()))
    doc = checks.run(req, s)
    ui.result(doc, checks.markdown(doc))
    if not doc["ok"]:
        raise TestsFailed(f"test ppl on {req.target}: {doc['reason']}", hint=f"details in {doc['files']['markdown']}")


@test_app.command("kernels")
def kernels(
    source: Optional[str] = typer.Option(None, "--source", "-s", help="The llama.cpp checkout (default: current directory)."),
    htp: Optional[str] = typer.Option(None, "--htp", metavar="v73,v75",
                                      help="HTP versions to emulate (default v73; v68, v69, v73, v75)."),
    op: Optional[str] = typer.Option(None, "-o", "--ops", metavar="MUL_MAT,ADD",
                                     help="Ops (default: every op of the tree hexbuild has cases for)."),
    types: Optional[str] = typer.Option(None, "--types", metavar="q4_0,q8_0,mxfp4",
                                        help="Types (default: each op's usual ones: the repacked weights for MUL_MAT)."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default: <run.results_dir>/test-kernels-<time>)."),
    threads: int = typer.Option(4, "--threads", min=1, max=8, help="Worker jobs per op (run one after the other)."),
    compare_device: Optional[str] = typer.Option(None, "--compare-device", metavar="RESULTS",
                                                 help="A results directory of the same cases run on a phone: "
                                                      "show where the emulator and silicon differ."),
) -> None:
    """Run the tree's own HVX kernels on an emulated Hexagon DSP and check their numbers; exit 13 on a failure.

    Compiles the checkout's htp/ sources unchanged for each HTP version, runs each op through its
    entry point (DMA and VTCM included) on cases made from ggml's reference rules, and compares
    with a float64 reference (test-backend-ops' tolerances). Emulated: not compared with silicon."""
    from pathlib import Path

    from ..errors import TestsFailed
    from ..kernels import report as kreport, run as krun
    from ..ui import ui

    s = common.settings()
    req = krun.KernelRequest(source=Path(source or "."), htp=_list(htp), ops=_list(op), types=_list(types),
                             out=Path(out) if out else Path(s["run.results_dir"]) / f"test-kernels-{krun.stamp()}",
                             threads=threads, compare_device=Path(compare_device) if compare_device else None)
    doc = krun.run(req)
    ui.result(doc, kreport.table(doc))
    if not doc["ok"]:
        raise TestsFailed(f"test kernels: {doc['reason']}", hint=f"details in {doc['files']['markdown']}")


def register(app: typer.Typer) -> None:
    app.add_typer(test_app, name="test")
