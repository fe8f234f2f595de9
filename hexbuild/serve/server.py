"""``hexbuild serve``: the package's llama-server on the device, reachable as an OpenAI-compatible
endpoint at http://127.0.0.1:PORT/v1 on this machine.

Order, each step undone on failure: the local port is checked free (before the device is
touched); package and model are deployed incrementally (the model is pushed once, then
recognized by its hash); the invocation is rendered like ``run server`` (sessions, library
paths, the revision's knobs and defaults) with ``--host 127.0.0.1 --port DEVICE_PORT`` added;
the server starts detached on the device (background.py) with its log streamed back; the port is
forwarded (targets/forward.py); ``/health`` is polled until it answers 200; the start-up log
gets the dispatch proof; ``/v1/models`` names the model. Then the supervisor waits: Ctrl-C or
SIGTERM stops the server by its PID and removes the forward; the server exiting, or the device
or the link going away, ends it with its own exit code.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import DeviceLost, EnvironmentMissing, HexbuildError, Interrupted, RemoteFailed, UsageError
from ..runner import background
from ..runner.install import MANIFEST, default_dest, default_models_dir, installed_tools, read_manifest
from ..runner.request import RunRequest, open_target, prepare_on
from ..ui import ui
from . import early_start, state as serve_state
from .request import DEFAULT_PORT, READY_TIMEOUT, ServeRequest  # noqa: F401 (this module's API)

# /health is asked every 10 ms for the first seconds (a small model is ready in well under one),
# then every quarter second (a large one loads for minutes: each ask crosses adb or SSH).
READY_POLL, READY_POLL_SLOW, READY_POLL_FAST_FOR = 0.01, 0.25, 3.0
SERVER = "llama-server"
BUILD_HINT = "build it: hexbuild build --build-target llama-server (then serve with --package PKG)"


@dataclass
class Server:
    """A server this process started: what to undo, and how to reach it."""

    target: Any
    pid: int
    since: str  # its start time on the device: with the PID, it names this process only
    local_port: int
    device_port: int
    device_log: str
    forward: Any
    watcher: background.Watcher
    record: dict[str, Any]
    log_file: Any = None  # the local copy of the log, open while the watcher writes it
    model_name: str | None = None
    # what to remember for an early start of the same words once ready (early_start.remember)
    relaunch: tuple[early_start.Launch, list[str]] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/v1"


def _check_extra(extra: list[str]) -> None:
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag == "--host":
            raise UsageError("hexbuild serve binds the device's loopback only; --host cannot be given",
                             hint="reach it from this machine through the forwarded port")
        if flag == "--port":
            raise UsageError("give the port as hexbuild serve --port LOCAL (and --device-port N), not after --")


def _check_model_on_device(target, model: str, models_dir: str) -> None:
    if "/" in model and not model.startswith("/") or model.startswith("~"):
        raise UsageError(f"model file not found: {model}")
    path = model if model.startswith("/") else posixpath.join(models_dir, model)
    if not target.is_file(path):
        raise UsageError(f"model not found: {model} is neither a local file nor in {posixpath.dirname(path)} on {target.spec}",
                         hint="give the local .gguf file (it is pushed once), or hexbuild deploy --model FILE")


def _deploy(target, req: ServeRequest, dest: str, models_dir: str, push_model: Path | None, settings) -> bool:
    """Package and model deployed as asked; whether anything may have changed on the target."""
    pkg = req.package
    if pkg is None and push_model is None:
        return False
    models = [push_model] if push_model else []
    if pkg is None:
        from ..deploy.models import local_model, plan_models, push_models

        plan = plan_models(target, models_dir, [local_model(push_model)])
        if plan.push:
            ui.info(f"pushing {push_model.name} to {target.spec}:{models_dir}")
        with ui.progress() as progress:
            task = progress.add_task(push_model.name, total=plan.push_bytes or None)
            push_models(target, models_dir, plan, lambda n, wire=None: progress.update(task, advance=n),
                        lambda _: None)
        return bool(plan.push)
    from ..deploy import DeployOptions, deploy, raise_for_failures  # (the whole deploy: a package's)

    opts = DeployOptions(dest=dest, models=models, models_dir=models_dir,
                         bundle_runtime=bool(_setting(settings, "deploy.bundle_runtime", False)),
                         sysroot=str(_setting(settings, "linux.sysroot", "") or ""))
    with ui.progress() as progress:
        opts.progress = progress
        results = deploy(Path(pkg), [target], opts)
    for r in results:
        ui.info(f"deploy {r.target}: {r.status}, {r.files_pushed} files pushed")
    raise_for_failures(results)
    return True


def _setting(settings, key: str, default: Any) -> Any:
    try:
        return settings[key]
    except (KeyError, TypeError):
        return default


def dispatch_proof(startup_log: str, inv, *, target: str, log: str, allow_cpu_fallback: bool) -> dict:
    """The on-device dispatch proof (hexbuild.runner.proof) applied to the server's start-up log:
    sessions asked for that did not open, or weights that stayed on the CPU, are an error
    (exit 12) unless ``allow_cpu_fallback``. Returns the verdict for the server's record."""
    from types import SimpleNamespace

    from ..runner.proof import LogWatch, check, judge

    watch = LogWatch(log, announce=False)
    watch.feed("stdout", startup_log.encode("utf-8", "replace"))
    verdict = judge(inv, watch.finish(), watch.sessions)
    check(SimpleNamespace(dispatch=verdict, exit_code=0, target=target, log=log),
          allow_cpu_fallback=allow_cpu_fallback)
    return verdict


def _startup_log(target, device_log: str, watcher) -> str:
    """What the server printed up to now, read from the device log itself in one call (the
    watcher's stream may lag behind what /health saw: it used to be given 0.3 s to settle, the
    most of a detached start over adb); the stream's text when the device cannot be asked."""
    try:
        return background.log_rest(target, device_log, 0, limit=background.TEXT_LIMIT).decode("utf-8", "replace")
    except HexbuildError:
        return watcher.startup_text()


def start(req: ServeRequest, settings, *, sink: Callable[[bytes], None] | None = None) -> Server:
    """Deploy, start, forward and wait until ready; everything is undone when a step fails."""
    from ..targets.forward import check_port_free

    _check_extra(req.extra)
    if not 1 <= req.port <= 65535:
        raise UsageError(f"--port must be 1..65535, got {req.port}")
    if not early_start.pending(req.port):  # else its launch checked the port, and may listen there now
        check_port_free(req.port)
    existing = serve_state.read(req.port)
    if existing is not None and serve_state.supervisor_alive(existing):
        raise EnvironmentMissing(f"local port {req.port} is taken by a server hexbuild started on {existing.get('target')}",
                                 hint="hexbuild serve status; hexbuild serve stop --port %d" % req.port)
    target = open_target(req.target, settings)
    try:
        target.require("forward", "serve (it cannot forward a port)")
        return _start(target, req, settings, sink)
    except BaseException:
        target.close()
        raise


def _start(target, req: ServeRequest, settings, sink) -> Server:
    dest = target.expand(req.dest or default_dest(target))
    models_dir = target.expand(req.models_dir or default_models_dir(target))  # where run looks too
    device_port = req.device_port or req.port
    if target.caps.this_machine and device_port != req.port:
        raise UsageError(f"{target.spec} runs the server on this machine: --device-port must equal --port")
    local = Path(req.model).expanduser()
    push = local if local.is_file() else None
    if push is not None and not push.name.endswith(".gguf"):
        raise UsageError(f"not a .gguf model file: {push}")
    model = push.name if push is not None else req.model
    if req.package is not None and not Path(req.package).expanduser().exists():
        raise UsageError(f"package not found: {req.package}")
    pushed = _deploy(target, req, dest, models_dir, push, settings)
    if push is None:
        _check_model_on_device(target, model, models_dir)

    manifest = read_manifest(target, dest)
    tools = installed_tools(manifest)
    if tools is None:
        tools = set(target.list_files(f"{dest}/bin", hashes=False))
    read = (dest, manifest, tools)  # what prepare_on would read again
    if not tools:
        raise EnvironmentMissing(f"nothing is installed at {target.spec}:{dest}",
                                 hint="serve --package PKG deploys it, or run hexbuild deploy first")
    if SERVER not in tools:
        raise EnvironmentMissing(f"the package on {target.spec}:{dest} has no {SERVER}", hint=BUILD_HINT)
    extra = list(req.extra)
    if req.ctx is not None:
        extra += ["--ctx-size", str(req.ctx)]
    extra += ["--host", "127.0.0.1", "--port", str(device_port)]
    run_req = RunRequest(kind="server", target=req.target, dest=dest, models_dir=models_dir, ndev=req.ndev,
                         devices=req.devices, model=model, knobs=req.knobs, extra=extra, threads=req.threads,
                         ubatch=req.ubatch)
    prepared = prepare_on(target, run_req, read=read)  # a CPU-only package: the one rule (artifacts/npu.py)
    said = prepared.cpu_only
    warnings = [said.text] if said and not said.chosen else []
    notes = [said.text] if said and said.chosen else []
    if said and not req.detached:  # a detached start's command says it (control.detach)
        said.say()
    inv = prepared.invocation

    device_log = posixpath.join(posixpath.dirname(dest.rstrip("/")) or "/", ".hexbuild-serve", f"{device_port}.log")
    local_log = serve_state.log_path(req.port)
    local_log.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(local_log, "wb")

    def to_log(data: bytes) -> None:
        if not log_file.closed:  # the watcher may outlive a stop by a moment
            log_file.write(data)
            log_file.flush()
        if sink:
            sink(data)

    ui.info(f"starting {SERVER} on {req.target} (port {device_port})")
    ui.command(inv.command_line())
    launch = early_start.Launch(target.program_argv(inv.argv, inv.cwd), inv.env, inv.cwd, device_log, req.port)
    pid, since = early_start.take(launch, pushed=pushed) or background.start(target, launch.argv, env=inv.env,
                                                                              cwd=inv.cwd, log=device_log)
    forward = None
    try:
        watcher = background.Watcher(target, pid, since, device_log, to_log)
    except BaseException:
        _undo(target, pid, since, forward, req.port)
        log_file.close()
        raise
    record = serve_state.new_record(
        target=req.target, kind=target.kind, local_port=req.port, device_port=device_port, pid=pid,
        pid_start=since, model=req.model, url=f"http://127.0.0.1:{req.port}/v1", log=str(local_log),
        device_log=device_log, dest=dest, detached=req.detached, argv=inv.argv, env=inv.env, warnings=warnings,
        notes=notes, **target.fidelity())
    try:
        serve_state.write(record)
        forward = target.forward(req.port, device_port)
        record.update(forward=forward.how, serial=getattr(target, "serial", None))
        serve_state.write(record)
        server = Server(target, pid, since, req.port, device_port, device_log, forward, watcher, record, log_file)
        if target.caps.early_start and req.package is None:
            server.relaunch = (launch, [f"{dest.rstrip('/')}/{MANIFEST}", str(push.resolve()) if push else ""])
        _wait_ready(server, req)
        watcher.catch_up()  # the log up to ready is in the local copy before the record says ready
        named = _model_name_asked(req.port)  # the server answers while the log is judged here
        record.update(dispatch=dispatch_proof(_startup_log(target, device_log, watcher), inv, target=req.target, log=str(device_log),
                                              allow_cpu_fallback=req.allow_cpu_fallback))
        server.model_name = named() or posixpath.basename(model)
        record.update(status="ready", model_name=server.model_name, ready_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        serve_state.write(record)
        return server
    except BaseException:
        _undo(target, pid, since, forward, req.port)
        log_file.close()
        raise


def _model_name_asked(port: int) -> Callable[[], str | None]:
    """``/v1/models`` asked from a thread: a function that waits for its answer."""
    import threading

    from .probe import model_name

    answer: list[str | None] = [None]
    asking = threading.Thread(target=lambda: answer.__setitem__(0, model_name(port)), daemon=True)
    asking.start()

    def wait() -> str | None:
        asking.join()
        return answer[0]
    return wait


def _wait_ready(server: Server, req: ServeRequest) -> None:
    # imported while the server starts, not before it: what ready needs next (the dispatch
    # proof's parsers) is there when the server is
    from ..runner import proof  # noqa: F401
    from .probe import health

    begun = time.monotonic()
    deadline = begun + req.ready_timeout
    while True:
        if server.watcher.done.is_set():
            if server.watcher.exited:
                lines = server.watcher.last_lines()
                raise RemoteFailed(f"{SERVER} exited during start-up on {req.target}"
                                   + (": " + lines[-1] if lines else ""),
                                   hint="its last log lines:\n  " + "\n  ".join(lines) if lines else None)
            raise DeviceLost(f"lost {req.target} while {SERVER} was starting: "
                             f"{server.watcher.error.message if server.watcher.error else 'the log stream ended'}")
        state = health(server.local_port, timeout=2.0)
        if state == "ready":
            return
        if time.monotonic() > deadline:
            errors = getattr(server.forward, "errors", None)
            raise RemoteFailed(f"{SERVER} on {req.target} was not ready within {req.ready_timeout:g}s "
                               f"(/health: {state}" + (f"; the forward: {errors[-1]}" if errors else "") + ")",
                               hint="a large model takes long to load: raise --ready-timeout")
        server.watcher.done.wait(READY_POLL if time.monotonic() - begun < READY_POLL_FAST_FOR else READY_POLL_SLOW)


def _undo(target, pid: int, since: str, forward, port: int) -> None:
    if forward is not None:
        forward.close()
    try:
        background.stop(target, pid, since)
    except HexbuildError as e:
        ui.warn(f"could not stop {SERVER} (PID {pid}) on {target.spec}: {e.message}")
    serve_state.remove(port)


def stop(server: Server) -> None:
    """Stop the server by its PID, remove the forward and the record. The log's last lines are
    read from where the watcher's stream got to, and the stream's tail ended (background.cut_stream),
    rather than waited for: the stream notices the program's end only at its next check, a second
    later."""
    server.forward.close()
    try:
        background.stop(server.target, server.pid, server.since)
    finally:
        try:
            if not server.watcher.done.is_set():
                rest = background.cut_stream(server.target, server.watcher, server.device_log)
                if rest and server.log_file is not None:
                    server.log_file.write(rest)
        except HexbuildError:  # the device went away: the log ends where the stream did
            pass
        _close_log(server)
        serve_state.remove(server.local_port)
        server.target.close()


def supervise(server: Server, *, poll: float = 1.0, announce: Callable[[], None] | None = None) -> None:
    """Until Ctrl-C/SIGTERM (a clean stop, then Interrupted: exit 130, as the exit-code table
    has it for every command) or a failure (raised after cleaning up); ``announce`` (printing
    the URL) runs inside, so a signal right after it still cleans up."""
    try:
        if announce is not None:
            announce()
        while True:
            if server.watcher.done.wait(poll):
                break
            if not server.forward.alive():
                break
    except KeyboardInterrupt:
        spec = server.target.spec
        ui.info(f"stopping {SERVER} on {spec}")
        stop(server)
        raise Interrupted(f"interrupted: {SERVER} on {spec} is stopped and the forward is removed") from None
    _ended(server)


def _ended(server: Server) -> None:
    spec = server.target.spec
    if server.watcher.done.is_set() and server.watcher.exited:
        lines = server.watcher.last_lines()
        server.forward.close()
        _close_log(server)
        serve_state.remove(server.local_port)
        server.target.close()
        raise RemoteFailed(f"{SERVER} exited while serving on {spec}" + (": " + lines[-1] if lines else ""),
                           hint="its last log lines:\n  " + "\n  ".join(lines) if lines else None)
    # The link broke (the adb device vanished, the SSH connection was cut): remove the forward,
    # then try once, over a fresh connection, to stop the server so nothing is left running.
    why = server.watcher.error.message if server.watcher.error else "the forward is gone"
    server.forward.close()
    _close_log(server)
    stopped = False
    try:
        server.target.close()
        background.stop(server.target, server.pid, server.since, timeout=15.0)
        stopped = True
    except HexbuildError:
        pass
    finally:
        server.target.close()
    if stopped:
        serve_state.remove(server.local_port)
        raise DeviceLost(f"lost the connection to {spec} while serving ({why}); the forward is removed "
                         f"and {SERVER} was stopped")
    rec = dict(server.record, status="lost")
    serve_state.write(rec)
    raise DeviceLost(f"{spec} went away while serving ({why}); the forward is removed",
                     hint=f"{SERVER} may still run there as PID {server.pid}: hexbuild serve stop --target {spec}")


def _close_log(server: Server) -> None:
    if server.log_file is not None:
        server.log_file.close()
        server.log_file = None
