"""`hexbuild test ppl`: llama-perplexity on the HTP sessions and on the CPU (the backend turned off:
GGML_HEXAGON_NDEV=0 and --device none, -ngl 0), same text, and a gate on
|ppl_htp - ppl_cpu| / ppl_cpu (default 1 %). `--reference-model` gives the CPU run another GGUF
(an f16 baseline, say) instead of the same one.

llama-perplexity (tools/perplexity/perplexity.cpp): "[%d]%.4lf," per chunk and
"Final estimate: PPL = %.4lf +/- %.5lf"."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import runner
from ..errors import HexbuildError, Interrupted, UsageError
from ..ui import ui
from .report import Case, write

SCHEMA = "hexbuild.test-ppl/1"
_FINAL = re.compile(r"Final estimate: PPL = ([\d.]+|nan|inf) \+/- ([\d.]+|nan|inf)")
_CHUNK = re.compile(r"\[(\d+)\]([\d.]+|nan|inf),")


@dataclass
class PplRequest:
    target: str
    model: str
    text: str
    reference_model: str | None = None
    chunks: int | None = None
    ctx: int | None = None
    max_diff: float = 0.01
    ndev: int | None = None
    devices: str | None = None
    dest: str = ""
    models_dir: str = ""
    out: str = ""
    timeout: float | None = None
    extra: tuple[str, ...] = ()


def read_ppl(text: str) -> tuple[float | None, float | None, int]:
    """(final PPL, its +/-, chunks) from llama-perplexity's output; the last chunk's running
    value when the final line is missing."""
    chunks = _CHUNK.findall(text)
    m = None
    for m in _FINAL.finditer(text):
        pass
    if m:
        return float(m.group(1)), float(m.group(2)), len(chunks)
    if chunks:
        return float(chunks[-1][1]), None, len(chunks)
    return None, None, 0


def invocation(target, req: PplRequest, *, cpu: bool) -> tuple[runner.Invocation, tuple[Path, str] | None]:
    """llama-perplexity on the HTP sessions (or, ``cpu``, with the backend off), rendered for what
    is installed; with the text file to copy over first (local file, path on the device), if any."""
    args = ["llama-perplexity"]
    if req.chunks:
        args += ["--chunks", str(req.chunks)]
    if req.ctx:
        args += ["-c", str(req.ctx)]
    args += ["--device", "none", "-ngl", "0"] if cpu else ["-ngl", "99"]
    args += list(req.extra)
    model = req.reference_model if cpu and req.reference_model else req.model  # -m from the models dir
    rr = runner.RunRequest(kind="tool", target=req.target, dest=req.dest, models_dir=req.models_dir,
                           ndev=req.ndev, devices=req.devices, model=model, extra=args, prompt_file=req.text)
    prepared = runner.prepare_on(target, rr)
    inv = prepared.invocation
    if inv.cpu_only and not cpu:  # runner/defaults.py: no offload without the Hexagon backend
        at = next(i for i in range(len(inv.argv) - 1) if inv.argv[i:i + 2] == ["-ngl", "99"])
        del inv.argv[at:at + 2]
    inv.argv += ["-f", prepared.prompt_upload[1] if prepared.prompt_upload else req.text]
    if cpu:  # the backend off in both vocabularies: NDEV=0 (0.3.20) and no device (every revision)
        inv.env = {k: v for k, v in inv.env.items() if k != "GGML_HEXAGON_DEVICES"}
        inv.env["GGML_HEXAGON_NDEV"] = "0"
    return inv, prepared.prompt_upload


def failed_run(label: str, reason: str) -> dict[str, Any]:
    return {"run": label, "ppl": None, "error": reason, "exit_code": None, "log": None, "dispatch": None}


def run_result(label: str, inv: runner.Invocation, record) -> dict[str, Any]:
    """One run's perplexity, from its record."""
    ppl, err, n = read_ppl(Path(record.log).read_text("utf-8", "replace"))
    return {"run": label, "ppl": ppl, "ppl_error": err, "chunks": n, "exit_code": record.exit_code,
            "log": record.log, "argv": inv.argv, "env": inv.env, "dispatch": record.dispatch,
            "duration_s": round(record.duration_s, 3), "cpu_only_package": inv.cpu_only}


def _one(target, req: PplRequest, *, cpu: bool, logs: Path) -> dict[str, Any]:
    label = "cpu" if cpu else "htp"
    inv, upload = invocation(target, req, cpu=cpu)
    if upload:
        target.write_file(upload[1], upload[0].read_bytes())
    try:
        record = runner.execute(target, inv, results_dir=logs, passthrough=False, timeout=req.timeout,
                                stem=f"ppl-{label}")
    except Interrupted:
        raise
    except HexbuildError as e:
        return failed_run(label, e.message)
    return run_result(label, inv, record)


def run(req: PplRequest, settings) -> dict[str, Any]:
    if req.max_diff < 0:
        raise UsageError("--max-diff must be >= 0")
    out = Path(req.out or Path(settings["run.results_dir"]) / f"test-ppl-{runner._timestamp()}")
    start = time.monotonic()
    with runner.open_target(req.target, settings) as target:
        ui.info(f"llama-perplexity on {req.target}: the HTP sessions")
        htp = _one(target, req, cpu=False, logs=out / "logs")
        ui.info(f"llama-perplexity on {req.target}: the CPU (GGML_HEXAGON_NDEV=0, --device none)")
        cpu = _one(target, req, cpu=True, logs=out / "logs")
    return report(req, htp, cpu, time.monotonic() - start, out)


def report(req: PplRequest, htp: dict[str, Any], cpu: dict[str, Any], duration_s: float, out: Path) -> dict[str, Any]:
    """The gate on the two runs, and the document (results.json, junit.xml, results.md under ``out``)."""
    reason, diff = None, None
    for r in (htp, cpu):
        if reason is None and r["ppl"] is None:
            reason = (f"the {r['run'].upper()} run gave no perplexity"
                      + (f": {r['error']}" if r.get("error") else f" (exit {r['exit_code']}; log {r['log']})"))
    if reason is None and htp.get("cpu_only_package"):
        reason = "nothing ran on the NPU: the package has no HTP session (CPU only), so both runs were CPU runs"
    if reason is None and (htp["dispatch"] or {}).get("fallback_reason"):
        reason = f"the HTP run fell back to the CPU: {htp['dispatch']['fallback_reason']}"
    if htp["ppl"] is not None and cpu["ppl"] is not None and cpu["ppl"] > 0:
        diff = abs(htp["ppl"] - cpu["ppl"]) / cpu["ppl"]
        if reason is None and not diff <= req.max_diff:
            reason = (f"perplexity on HTP {htp['ppl']:.4f} vs CPU {cpu['ppl']:.4f}: {diff:.2%} apart, "
                      f"more than {req.max_diff:.2%}")
    doc = {"schema": SCHEMA, "target": req.target, "model": req.model, "reference_model": req.reference_model or req.model,
           "text": req.text, "max_diff": req.max_diff, "relative_diff": None if diff is None else round(diff, 6),
           "ok": reason is None, "reason": reason, "htp": htp, "cpu": cpu,
           "duration_s": round(duration_s, 3)}
    case = Case(f"test ppl {req.target}", f"perplexity HTP vs CPU ({Path(req.model).name})", failure=reason,
                details=[f"HTP {htp['ppl']} ({htp.get('log')})", f"CPU {cpu['ppl']} ({cpu.get('log')})"],
                time_s=doc["duration_s"])
    doc["files"] = write(out, title="hexbuild test ppl", doc=doc, cases=[case], markdown=markdown(doc))
    return doc


def markdown(doc: dict[str, Any]) -> str:
    def cell(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)

    diff = "-" if doc["relative_diff"] is None else f"{doc['relative_diff']:.3%}"
    lines = [f"### hexbuild test ppl on {doc['target']}: {'passed' if doc['ok'] else 'FAILED'}", ""]
    if doc["reason"]:
        lines += [f"**{doc['reason']}**", ""]
    lines += ["| run | model | PPL | ± | chunks |", "|---|---|---:|---:|---:|",
              f"| HTP | {doc['model']} | {cell(doc['htp']['ppl'])} | {cell(doc['htp'].get('ppl_error'))} | "
              f"{cell(doc['htp'].get('chunks'))} |",
              f"| CPU | {doc['reference_model']} | {cell(doc['cpu']['ppl'])} | {cell(doc['cpu'].get('ppl_error'))} | "
              f"{cell(doc['cpu'].get('chunks'))} |",
              "", f"relative difference {diff} (gate: {doc['max_diff']:.2%})"]
    return "\n".join(lines) + "\n"
