"""hexbuild serve (status, stop) and hexbuild chat: llama-server on the device as an
OpenAI-compatible endpoint on this machine."""

from __future__ import annotations

from typing import Any, Optional

import typer
from typer.core import TyperGroup

from . import common
from .run import PassthroughCommand, split_passthrough

SERVE_EPILOG = ("Arguments after -- go to llama-server and replace the defaults they name (-c 4096, "
                "--alias NAME, ...); --hex-KNOB VALUE sets GGML_HEXAGON_KNOB.")


class ServeGroup(TyperGroup):
    """`serve` runs a server itself and has subcommands (status, stop): its knobs and the
    arguments after -- are taken out before click looks for a subcommand name."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            return super().parse_args(ctx, args)
        return super().parse_args(ctx, split_passthrough(ctx, args))


serve_app = typer.Typer(cls=ServeGroup, invoke_without_command=True, no_args_is_help=False,
                        help="The model on the device's NPU as an OpenAI-compatible endpoint on this machine.",
                        epilog=SERVE_EPILOG)


@serve_app.callback()
def serve_command(
    ctx: typer.Context,
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Target (default: run.target)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="A local .gguf (pushed once), or a model on the device."),
    package: Optional[str] = typer.Option(None, "--package", metavar="PKG", help="Deploy this package first (incremental)."),
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535, help="Local port (default 8080)."),
    device_port: Optional[int] = typer.Option(None, "--device-port", min=1, max=65535, help="Port on the device (default: --port)."),
    ctx_size: Optional[int] = typer.Option(None, "--ctx", min=1, help="Context size (--ctx-size)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="HTP sessions HTP0..HTP{N-1}."),
    devices: Optional[str] = typer.Option(None, "--devices", help="Device list, e.g. HTP0:0,HTP0:1 (newer revisions)."),
    dest: Optional[str] = typer.Option(None, "--dest", help="Install directory on the target."),
    models_dir: Optional[str] = typer.Option(None, "--models-dir", help="Models directory on the target."),
    bundle_runtime: Optional[bool] = typer.Option(None, "--bundle-runtime/--no-bundle-runtime",
                                                  help="With --package: ship the glibc runtime (as deploy does)."),
    detach: bool = typer.Option(False, "--detach", help="Return once ready; stop later with hexbuild serve stop."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback", help="Serve even when the model runs on the CPU."),
    ready_timeout: float = typer.Option(600.0, "--ready-timeout", min=1, help="Seconds to wait for /health."),
) -> None:
    """Serve a model from the device: deploy, start llama-server, forward its port, wait for
    /health, print the base URL. Ctrl-C or SIGTERM stops the server and removes the forward.
    Subcommands: status, stop."""
    if ctx.invoked_subcommand is not None:
        return
    from ..ui import raw_to_stderr, ui
    from .serve_start import detach as start_detached, prepare, ready_json, ready_text

    s, req = prepare(target=target, model=model, package=package, port=port, device_port=device_port,
                     ctx_size=ctx_size, ndev=ndev, devices=devices, dest=dest, models_dir=models_dir,
                     bundle_runtime=bundle_runtime, allow_cpu_fallback=allow_cpu_fallback,
                     ready_timeout=ready_timeout, knobs=ctx.meta.get("hexbuild.knobs", []),
                     extra=ctx.meta.get("hexbuild.extra", []), stream_log=not ui.quiet)
    if detach:
        start_detached(s, req)  # (also reached before Typer starts: fast.py)
        return
    from ..serve import server as serve  # (not before a detach: its supervisor imports it)

    server = serve.start(req, s, sink=raw_to_stderr if not ui.quiet else None)
    serve.supervise(server, announce=lambda: ui.result(ready_json(server.record), ready_text(server.record)))


@serve_app.command("status")
def status_command() -> None:
    """What hexbuild serve has running: target, ports, device PID, state."""
    from ..serve import control as serve_control
    from ..ui import ui

    rows = serve_control.status()
    ui.result(rows, _status_table(rows))


def _status_table(rows: list[dict]):
    from rich.table import Table
    from rich.text import Text

    if not rows:
        return Text("no servers")
    table = Table()
    for col in ("target", "url", "model", "device pid", "forward", "state"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(str(r.get("target")), str(r.get("url")), str(r.get("model_name") or r.get("model")),
                      str(r.get("pid")), str(r.get("forward") or "-"), str(r.get("state")))
    return table


@serve_app.command("stop")
def stop_command(
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Stop the servers on this target."),
    port: Optional[int] = typer.Option(None, "--port", help="Stop the server on this local port."),
    all_: bool = typer.Option(False, "--all", help="Stop every server hexbuild started."),
) -> None:
    """Stop servers (also those whose supervisor or forward died): the device process by its
    PID, the forward, the record."""
    from .serve_stop import stop  # (also reached before Typer starts: fast.py)

    stop(target, port, all_)


def chat_command(
    ctx: typer.Context,
    target: Optional[str] = typer.Option(None, "-t", "--target", help="Target (default: run.target)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="A local .gguf (pushed once), or a model on the device."),
    prompt: Optional[str] = typer.Option(None, "-p", "--prompt", help="One question, then exit (default: interactive)."),
    system: Optional[str] = typer.Option(None, "--system", help="A system message."),
    max_tokens: Optional[int] = typer.Option(None, "-n", "--max-tokens", min=1, help="Tokens per answer at most."),
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535, help="Local port for a server started for the chat."),
    package: Optional[str] = typer.Option(None, "--package", metavar="PKG", help="Deploy this package first."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="HTP sessions HTP0..HTP{N-1}."),
    ctx_size: Optional[int] = typer.Option(None, "--ctx", min=1, help="Context size (--ctx-size)."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback", help="Serve even when the model runs on the CPU."),
) -> None:
    """Chat with the model through a running hexbuild server on the target, or one started for
    the chat (stopped afterwards). Prints time to first token and tokens/s after each answer."""
    from ..serve.chat import ChatOptions, run_chat

    s = common.settings(**{"run.target": target, "run.model": model})
    from pathlib import Path

    from ..artifacts import require_llama_package
    from ..deploy.models import check_local

    check_local([s["run.model"]])  # a local model and the package checked before a server is looked for
    if package:
        require_llama_package(Path(package))
    from .serve_start import request

    req = request(s, package=package, port=port, device_port=None, ctx_size=ctx_size, ndev=ndev, devices=None,
                  allow_cpu_fallback=allow_cpu_fallback, ready_timeout=600.0,
                  knobs=ctx.meta.get("hexbuild.knobs", []), extra=ctx.meta.get("hexbuild.extra", []),
                  stream_log=False)
    run_chat(req, s, ChatOptions(prompt=prompt, system=system, max_tokens=max_tokens))


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
    app.command("chat", cls=PassthroughCommand, epilog=SERVE_EPILOG)(chat_command)
