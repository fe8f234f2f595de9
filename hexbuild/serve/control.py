"""``serve --detach``, ``serve status`` and ``serve stop``: servers that outlive the command.

``--detach`` runs the very same supervisor as a foreground ``serve`` (serve.start + supervise),
in a process of its own session (``hexbuild.serve.daemon``: a fork of this process, or the
hexbuild this process runs started anew), so a forward that lives in hexbuild (an SSH tunnel, an
adb stream) keeps living; the command streams the start-up log, returns once the server is
ready (the supervisor says so on a pipe) and leaves its record in the state directory.
``serve stop`` asks the supervisor to stop (SIGTERM: the same clean-up as Ctrl-C) and, when the
supervisor is gone (its forward died with it), stops the server on the device itself by its
PID and removes a leftover adb forward.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from .. import fidelity, pids
from ..errors import EnvironmentMissing, HexbuildError, UsageError
from ..ui import raw_to_stderr, ui
from . import prefork
from . import state as serve_state

if TYPE_CHECKING:  # imported when a start needs it: `serve stop` (cli/fast.py) does without
    from .request import ServeRequest


def _rebuild_error(doc: dict[str, Any]) -> HexbuildError:
    err = HexbuildError(str(doc.get("message") or "the server did not start"), hint=doc.get("hint"))
    err.exit_code = int(doc.get("exit_code") or 1)
    err.kind = str(doc.get("type") or "internal")
    return err


def detach(req: ServeRequest, settings, *, stream: bool = True, timeout: float | None = None) -> dict[str, Any]:
    """Start a supervisor process for ``req``; its record once the server is ready. (A port in
    use is the supervisor's first check: its error comes back here, as every start error does.)"""
    d = serve_state.servers_dir()
    d.mkdir(parents=True, exist_ok=True)
    result_file = d / f"start-{os.urandom(6).hex()}.result.json"
    values = dict(getattr(settings, "values", settings) or {})
    log_path = serve_state.supervisor_log_path(req.port)
    kept = log_path.stat().st_size if log_path.exists() else None  # an earlier server's: put back as it was
    try:
        return _start_and_wait(req, values, result_file, log_path, stream, timeout)
    except BaseException:  # nothing of a failed start stays behind: its log was said in the error
        result_file.unlink(missing_ok=True)  # a supervisor stopped by Ctrl-C or the timeout wrote it as it ended
        if kept is None:
            log_path.unlink(missing_ok=True)
        else:
            os.truncate(log_path, kept)
        raise


def _start_and_wait(req: ServeRequest, values: dict[str, Any], result_file, log_path, stream: bool,
                    timeout: float | None) -> dict[str, Any]:
    """The supervisor started (forked, else a new interpreter) and waited for: its record once the
    server is ready, else its error."""
    handed = prefork.hand({**req.to_json(), "detached": True, "stream_log": False}, values, str(result_file),
                          str(log_path), ui.verbose)
    if handed is not None:
        ui.detail(f"supervisor PID {handed[0]}: forked before the command line was parsed")
        return _wait(req, _Forked(handed[0]), handed[1], None, result_file, log_path, stream, timeout)
    import subprocess

    ready, ready_w = os.pipe()
    request_file = None
    try:
        proc = _fork(req, values, result_file, log_path, ready, ready_w)
        if proc is None:
            request_file = result_file.with_name(f"start-{os.urandom(6).hex()}.json")
            doc = {"request": {**req.to_json(), "detached": True, "stream_log": False}, "settings": values,
                   "result": str(result_file)}
            request_file.write_text(json.dumps(doc))
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(supervisor_argv(str(request_file), ready_w), stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                        close_fds=True, pass_fds=(ready_w,))
    except BaseException:
        os.close(ready)
        if request_file is not None:
            request_file.unlink(missing_ok=True)
        raise
    finally:
        os.close(ready_w)
    ui.detail(f"supervisor PID {proc.pid}: " + ("a new interpreter" if request_file else "forked"))
    return _wait(req, proc, ready, request_file, result_file, log_path, stream, timeout)


def _wait(req: ServeRequest, proc, ready: int, request_file, result_file, log_path, stream: bool,
          timeout: float | None) -> dict[str, Any]:
    """The supervisor ``proc`` waited for: its record once the server is ready, else its error."""
    import subprocess

    ui.detail(f"the supervisor's log: {log_path}")
    offset = 0
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            rec = serve_state.read(req.port)
            mine = rec is not None and rec.get("supervisor_pid") == proc.pid
            if mine and stream:
                offset = _copy_new(serve_state.log_path(req.port), offset)
            if mine and rec.get("status") == "ready":
                for text in rec.get("warnings") or []:  # said in the supervisor, whose output is its log
                    ui.warn(text)
                for text in rec.get("notes") or []:
                    ui.note(text)
                fidelity.say(str(rec.get("target")), fidelity.carried(rec))
                return rec
            if proc.poll() is not None:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise EnvironmentMissing(f"the server was not ready within {timeout:g}s")
            _wait_readable(ready, 0.1)  # the supervisor writes to it when ready, and closes it when it ends
    except BaseException:
        if proc.poll() is None:
            proc.terminate()  # the supervisor stops what it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        raise
    finally:
        os.close(ready)
        if request_file is not None:
            request_file.unlink(missing_ok=True)
    try:  # the supervisor ended before the server was ready: what it said
        result = json.loads(result_file.read_text())
    except (OSError, ValueError):
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise HexbuildError(f"the serve supervisor exited with {proc.returncode} before the server was ready",
                            hint="its log: " + " | ".join(tail)) from None
    finally:
        result_file.unlink(missing_ok=True)
    if "error" in result:
        raise _rebuild_error(result["error"])
    raise HexbuildError("the serve supervisor ended without a server")


def _wait_readable(fd: int, timeout: float) -> None:
    import select

    readable, _, _ = select.select([fd], [], [], timeout)
    if readable:
        try:
            if not os.read(fd, 64):  # its end: closed by the supervisor's exit, so look no more
                time.sleep(timeout)
        except OSError:
            time.sleep(timeout)


class _Forked:
    """The supervisor forked from this process, with the part of Popen's interface detach uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                import subprocess

                raise subprocess.TimeoutExpired("serve supervisor", timeout or 0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass


def _fork(req: ServeRequest, settings: dict[str, Any], result_file, log_path, ready: int, ready_w: int) -> _Forked | None:
    """The supervisor as a fork of this process, which has imported everything it needs (a new
    interpreter would import it all again: a quarter of a detached start). None where forking is
    not safe: another thread may hold a lock the child would inherit held."""
    import threading

    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    pid = os.fork()
    if pid:
        return _Forked(pid)
    try:  # the child: never returns into the command's code
        os.setsid()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        prefork.close_all_but(ready_w)  # nothing of the command's stays open in the supervisor
        prefork.run_supervisor(req.to_json(), settings, str(result_file), str(log_path), ui.verbose, ready_w)
    finally:
        os._exit(1)


# `python -m` would put the working directory first on sys.path: started from a directory that
# holds a hexbuild/ folder (the project's own checkout), the supervisor would import that one.
_BOOT = ("import sys; sys.path[0] = sys.argv.pop(1); from hexbuild.serve.daemon import main; "
         "raise SystemExit(main(*sys.argv[1:3]))")


def supervisor_argv(request_file: str, ready_fd: int | None = None) -> list[str]:
    """The supervisor's command line: this interpreter and the hexbuild this process runs,
    whatever the working directory holds."""
    import hexbuild

    home = os.path.dirname(os.path.dirname(os.path.abspath(hexbuild.__file__)))
    return [sys.executable, "-c", _BOOT, home, request_file, *([str(ready_fd)] if ready_fd is not None else [])]


def _copy_new(path, offset: int) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return offset
    if data:  # (not server.py's import beside a starting server: 20 ms, and Ctrl-C lands in it)
        raw_to_stderr(data)
    return offset + len(data)


def status() -> list[dict[str, Any]]:
    """Every recorded server with ``state``: ready | starting | unreachable (the supervisor runs
    but /health does not answer) | orphaned (the supervisor, and so the forward, is gone)."""
    out = []
    for rec in serve_state.records():
        row = {k: v for k, v in rec.items() if k not in ("env", "argv")}
        if not serve_state.supervisor_alive(rec):
            row["state"] = "orphaned"
        elif rec.get("status") != "ready":
            row["state"] = rec.get("status") or "starting"
        else:
            from .probe import health

            row["state"] = "ready" if health(int(rec["local_port"]), timeout=2.0) == "ready" else "unreachable"
        out.append(row)
    return out


def select(*, target: str | None, port: int | None, all_: bool) -> list[dict[str, Any]]:
    recs = serve_state.records()
    if all_:
        return recs
    if target is not None or port is not None:
        chosen = [r for r in recs if (target is None or r.get("target") == target)
                  and (port is None or r.get("local_port") == port)]
        if not chosen:
            raise UsageError("no server hexbuild started matches " + " and ".join(
                x for x in (f"--target {target}" if target else "", f"--port {port}" if port else "") if x),
                hint="hexbuild serve status lists them")
        return chosen
    if len(recs) == 1:
        return recs
    if not recs:
        return []
    raise UsageError(f"{len(recs)} servers are running; say which: --target T, --port N or --all",
                     hint="running: " + ", ".join(f"{r.get('target')} (port {r.get('local_port')})" for r in recs))


def stop(recs: list[dict[str, Any]], settings, *, grace: float = 45.0) -> list[dict[str, Any]]:
    """Stop each recorded server; one {target, local_port, pid, how} per record. ``settings``, or
    a function that reads them, is needed only where a server is stopped from here (its
    supervisor gone): a supervisor that stops its own server needs no config, so a stop neither
    reads one (up to 6 ms of a 0.055 s stop) nor fails on a broken one."""
    out = []
    for rec in recs:
        port = int(rec["local_port"])
        how = "supervisor"
        if serve_state.supervisor_alive(rec) and rec.get("supervisor_pid") != os.getpid():
            # it removes the record, then exits; its end wakes this wait at once (hexbuild/pids.py)
            pids.terminate(int(rec["supervisor_pid"]), rec.get("supervisor_start"), grace)
        if serve_state.read(port) is not None:
            how = "directly"  # the supervisor is gone (or stuck): undo its work from here
            settings = settings() if callable(settings) else settings  # once, for every orphan
            _stop_orphan(rec, settings)
            serve_state.remove(port)
        out.append({"target": rec.get("target"), "local_port": port, "pid": rec.get("pid"), "stopped": how,
                    **fidelity.carried(rec)})
    return out


def _stop_orphan(rec: dict[str, Any], settings) -> None:
    from ..runner import background
    from ..targets import parse_target

    if serve_state.supervisor_alive(rec) and rec.get("supervisor_pid") != os.getpid():
        os.kill(int(rec["supervisor_pid"]), signal.SIGKILL)
    with parse_target(str(rec["target"]), settings) as target:
        try:
            background.stop(target, int(rec["pid"]), str(rec.get("pid_start") or ""))
        except HexbuildError as e:
            raise type(e)(f"could not stop the server (PID {rec.get('pid')}) on {rec.get('target')}: {e.message}",
                          hint=e.hint) from None
        if rec.get("forward") == "adb forward" and rec.get("serial"):
            try:
                target.client.kill_forward(rec["serial"], f"tcp:{rec['local_port']}")
            except Exception:  # the adb server dropped it already
                pass


def find_running(target: str, model: str | None) -> dict[str, Any] | None:
    """A ready server on ``target`` (serving ``model`` when given) that answers /health."""
    from pathlib import PurePath

    for rec in serve_state.records():
        if rec.get("target") != target or rec.get("status") != "ready" or not serve_state.supervisor_alive(rec):
            continue
        if model and PurePath(str(rec.get("model"))).name != PurePath(model).name:
            continue
        from .probe import health

        if health(int(rec["local_port"]), timeout=2.0) == "ready":
            return rec
    return None

