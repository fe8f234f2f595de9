"""``hexbuild serve``'s settings, request and ready document, and the detached start, without
Typer: the Typer command (serve.py) and the command line read before Typer is imported (fast.py)
end in the same code."""

from __future__ import annotations

from typing import Any

from . import common


def prepare(*, target, model, package, port, device_port, ctx_size, ndev, devices, dest, models_dir,
            bundle_runtime, allow_cpu_fallback, ready_timeout, knobs, extra, stream_log) -> tuple[Any, Any]:
    """(settings, ServeRequest) of a serve command line's values (None: not given)."""
    s = common.settings(**{"run.target": target, "run.model": model, "deploy.dest": dest,
                           "deploy.models_dir": models_dir, "run.ndev": ndev, "deploy.bundle_runtime": bundle_runtime})
    return s, request(s, package=package, port=port, device_port=device_port, ctx_size=ctx_size, ndev=ndev,
                      devices=devices, allow_cpu_fallback=allow_cpu_fallback, ready_timeout=ready_timeout,
                      knobs=knobs, extra=extra, stream_log=stream_log)


def request(s, *, package, port, device_port, ctx_size, ndev, devices, allow_cpu_fallback, ready_timeout, knobs,
            extra, stream_log):
    from ..errors import UsageError
    from ..runner.defaults import given_threads
    from ..serve.request import DEFAULT_PORT, ServeRequest

    if not s["run.target"]:
        raise UsageError("no target: give --target T (adb, adb:SERIAL, ssh://HOST, local:DIR, …) or set run.target")
    if not s["run.model"]:
        raise UsageError("no model: give --model FILE.gguf (a local file is pushed once) or set run.model")
    return ServeRequest(
        target=s["run.target"], model=s["run.model"], package=package, port=port or DEFAULT_PORT,
        device_port=device_port, ctx=ctx_size,
        ndev=ndev if ndev is not None else (None if devices is not None else (s["run.ndev"] or None)),
        devices=devices, knobs=knobs, extra=extra, dest=s["deploy.dest"], models_dir=s["deploy.models_dir"],
        threads=given_threads(s), ubatch=s["run.ubatch"], allow_cpu_fallback=allow_cpu_fallback,
        ready_timeout=ready_timeout, stream_log=stream_log)


def detach(s, req) -> None:
    """Start the server with a supervisor, return once ready, and print its ready document."""
    from ..serve import control as serve_control
    from ..ui import ui

    rec = serve_control.detach(req, s, stream=not ui.quiet)
    ui.result(ready_json(rec), ready_text(rec))


def ready_json(rec: dict) -> dict:
    from ..fidelity import carried

    keys = ("url", "model_name", "target", "local_port", "device_port", "pid", "forward", "log", "supervisor_pid")
    return {**{k: rec.get(k) for k in keys}, **carried(rec)}


def ready_text(rec: dict) -> str:
    return f"{rec.get('url')}  model {rec.get('model_name')}"
