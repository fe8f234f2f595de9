"""hexbuild run: one llama.cpp tool on a target, in the deployed revision's vocabulary."""

from __future__ import annotations

from typing import Any, Optional

import typer
from typer.core import TyperCommand

from . import common

KNOB_HELP = ("--hex-KNOB VALUE sets GGML_HEXAGON_KNOB for the run (--hex-nhvx 4, --hex-opfilter REGEX, "
             "--hex-hostbuf 0, …); knobs the deployed revision does not read are refused.")


class PassthroughCommand(TyperCommand):
    """A command that takes ``--hex-<knob> VALUE`` flags of any name, and everything after
    ``--`` verbatim for the device program (click alone would mix both into one list)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, split_passthrough(ctx, args))


def split_passthrough(ctx: Any, args: list[str]) -> list[str]:
    """Take ``--hex-<knob> VALUE`` flags and everything after ``--`` out of ``args`` (into
    ``ctx.meta``); the rest is for click."""
    from ..errors import UsageError

    if "--" in args:
        i = args.index("--")
        head, extra = args[:i], args[i + 1:]
    else:
        head, extra = args, []
    knobs: list[tuple[str, str]] = []
    rest: list[str] = []
    i = 0
    while i < len(head):
        arg = head[i]
        if arg.startswith("--hex-"):
            name, eq, value = arg[len("--hex-"):].partition("=")
            if not eq:
                if i + 1 >= len(head):
                    raise UsageError(f"{arg} needs a value")
                value = head[i + 1]
                i += 1
            knobs.append((name, value))
        else:
            rest.append(arg)
        i += 1
    ctx.meta["hexbuild.knobs"] = knobs
    ctx.meta["hexbuild.extra"] = extra
    return rest


def run_command(
    ctx: typer.Context,
    kind: str = typer.Argument(..., metavar="KIND", help="completion, cli, bench, server, tool or mtmd."),
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Target (default: run.target)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="HTP sessions HTP0..HTP{N-1}."),
    devices: Optional[str] = typer.Option(None, "--devices", help="Device list, e.g. HTP0:0,HTP0:1 (newer revisions)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model file in the models directory, or an absolute path."),
    prompt_file: Optional[str] = typer.Option(None, "--prompt-file", "-f", help="Prompt file (a local file is copied to the device)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target (default: deploy.dest)."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", help="Models directory on the target."),
    results_dir: Optional[str] = typer.Option(None, "--results-dir", help="Where the log and JSON result go."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds before the run is stopped."),
    print_only: bool = typer.Option(False, "--print", help="Print the command that would run on the device and exit."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback",
                                            help="A run whose HTP sessions did not open is a warning, not exit 12."),
    sysroot: Optional[str] = typer.Option(None, "--sysroot", metavar="DIR",
                                          help="AArch64 glibc runtime for a qemu: target (default: the open toolchain image's)."),
    gguf: Optional[str] = typer.Option(None, "--gguf", metavar="FILE", help="A local copy of the model, for the memory roofline (default: --model when it is a local file)."),
    soc: Optional[str] = typer.Option(None, "--soc", metavar="MODEL", help="The SoC whose DRAM bounds decode, e.g. SM8650 (default: the device's)."),
    peak_bandwidth: Optional[float] = typer.Option(None, "--peak-bandwidth", metavar="GB/S", min=0.001, help="Peak DRAM bandwidth for the roofline, instead of hexbuild's table."),
) -> None:
    """Run a llama.cpp tool on a target in the deployed revision's vocabulary.

    The session selection, GGML_HEXAGON_* knobs, tool name
    and injected defaults follow what the deployed revision understands; arguments after -- reach
    the program exactly as given and replace the defaults they name. Exits with the program's
    exit code (128+N when signal N killed it, as a shell says); a run that asked for HTP
    sessions and fell back to the CPU exits 12 (the
    dispatch proof, in the JSON result's "dispatch"). --hex-KNOB VALUE sets GGML_HEXAGON_KNOB
    (--hex-nhvx 4, --hex-hostbuf 0, ...)."""
    from .. import runner
    from ..errors import UsageError, shell_status
    from ..runner.defaults import given_threads
    from ..ui import ui

    if kind not in runner.KINDS:
        raise UsageError(f"unknown kind {kind!r}; valid: {', '.join(runner.KINDS)}")
    s = common.settings(**{"run.target": target, "run.model": model, "run.results_dir": results_dir,
                           "deploy.dest": dest, "deploy.models_dir": models_dir, "run.ndev": ndev,
                           "linux.sysroot": sysroot})
    req = runner.RunRequest(
        kind=kind, target=s["run.target"], dest=s["deploy.dest"], models_dir=s["deploy.models_dir"],
        ndev=ndev if ndev is not None else (None if devices is not None else (s["run.ndev"] or None)),
        devices=devices, model=s["run.model"] or None, prompt_file=prompt_file,
        knobs=ctx.meta.get("hexbuild.knobs", []), extra=ctx.meta.get("hexbuild.extra", []),
        threads=given_threads(s), ubatch=s["run.ubatch"], results_dir=s["run.results_dir"], timeout=timeout)
    if print_only:
        prepared = runner.prepare(req, s, offline_ok=True)
        prepared.target.close()
        if prepared.cpu_only:
            prepared.cpu_only.say()
        inv = prepared.invocation
        ui.result({"target": req.target, **inv.to_json()}, inv.command_line())
        return
    record = runner.run(req, s)
    reason = None
    if record.exit_code and runner.backend_absent(record):
        # no FastRPC on the target: the backend registered no device and llama.cpp refused
        # --device; exit 12 with the backend's reason, or (allowed) the same run on the CPU
        if not allow_cpu_fallback:
            ui.result(record.to_json())
            runner.check_dispatch(record)
        reason = record.dispatch["fallback_reason"]
        ui.warn(f"{req.target}: {reason}; --allow-cpu-fallback: running again on the CPU")
        req.cpu = True
        record = runner.run(req, s)
    doc = record.to_json()
    if req.cpu and reason and isinstance(doc.get("dispatch"), dict) and not doc["dispatch"].get("fallback_reason"):
        doc["dispatch"] = {**doc["dispatch"], "fallback_reason": reason}  # why this run is on the CPU
    roof = _roofline(record, req, s, gguf=gguf, soc=soc, peak_bandwidth=peak_bandwidth)
    if roof is not None:
        doc["roofline"] = roof
    ui.result(doc)
    if record.exit_code:
        raise typer.Exit(shell_status(record.exit_code))
    runner.check_dispatch(record, allow_cpu_fallback=allow_cpu_fallback)


def _roofline(record: Any, req: Any, s: Any, *, gguf: Optional[str], soc: Optional[str],
              peak_bandwidth: Optional[float]) -> Optional[dict]:
    """The decode figure against the device's DRAM bound, said in one line (stderr) and returned
    for the JSON record; None when the run printed no decode figure."""
    from ..bench import roofline
    from ..ui import ui

    if not ((record.results or {}).get("perf") or {}).get("eval"):
        return None
    if not soc and (gguf or roofline.local_model(req.model, None)):
        soc = roofline.device_soc(req.target, s, req.dest)
    roof = roofline.for_run(record.results, model=req.model, gguf=gguf, soc=soc, peak_gbs=peak_bandwidth)
    if roof is not None:
        tps = record.results["perf"]["eval"].get("tokens_per_second")
        ui.info(f"decode {tps} t/s: {roofline.summary_line(roof['decode'])}")
    return roof


def register(app: typer.Typer) -> None:
    app.command("run", cls=PassthroughCommand, epilog=KNOB_HELP)(run_command)

