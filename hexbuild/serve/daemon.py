"""The supervisor of a ``hexbuild serve --detach`` server: a process in a session of its own,
forked from the command that detached it (control.detach: it has imported all it needs), or
started by control.supervisor_argv where forking is not safe (``main(REQUEST.json, READY_FD)``
of the hexbuild that detached it, whatever the working directory holds).

It is a foreground ``serve`` without a terminal: it starts the server (a failure goes to the
result file the waiting command reads; success is the record's status), says so on the ready
pipe, then
supervises until SIGTERM (``serve stop``: it exits 130, as a foreground serve does) or a failure. Its own output goes to
``<state>/servers/<port>.supervisor.log``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ..errors import HexbuildError, Interrupted
from ..paths import atomic_write
from ..ui import ui
from . import early_start
from .server import SERVER, ServeRequest, start, stop, supervise


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main(request_file: str, ready_fd: str | None = None) -> int:
    doc = json.loads(Path(request_file).read_text())
    return serve(ServeRequest.from_json(doc["request"]), doc["settings"], Path(doc["result"]),
                 int(ready_fd) if ready_fd is not None else None)


def serve(req: ServeRequest, settings: Any, result: Path, ready_fd: int | None = None) -> int:
    """Start, report, supervise: the supervisor's whole life; its exit code."""
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    ui.verbose = max(ui.verbose, 1)  # the supervisor log is for people debugging
    server = None
    try:
        server = start(req, settings)
        if ready_fd is not None:  # the waiting command wakes at once rather than at its next look
            try:
                os.write(ready_fd, b"ready")
                os.close(ready_fd)
            except OSError:  # it gave up waiting
                pass
        ui.info(f"ready at {server.url} ({server.model_name})")
        if server.relaunch is not None:
            early_start.remember(*server.relaunch)
        supervise(server)
    except KeyboardInterrupt:
        if server is None:
            atomic_write(result, json.dumps({"error": {"type": "interrupted", "message": "interrupted",
                                                       "exit_code": Interrupted.exit_code}}))
            return Interrupted.exit_code
        # `serve stop` right after the record said ready, before supervise() took over
        ui.info(f"stopping {SERVER} on {server.target.spec}")
        stop(server)
        ui.info(f"stopped: {server.url}")
        return Interrupted.exit_code
    except Interrupted as e:  # serve stop's SIGTERM in supervise(): the stop asked for
        if server is None:
            atomic_write(result, json.dumps({"error": e.to_json()}))
            return e.exit_code
        ui.info(f"stopped: {server.url}")
        return Interrupted.exit_code
    except HexbuildError as e:
        if server is None:  # the start failed: the waiting command says why
            atomic_write(result, json.dumps({"error": e.to_json()}))
        ui.error(e.message, hint=e.hint)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
