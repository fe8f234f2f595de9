"""The supervisor of a ``hexbuild serve --detach`` server, started by control.supervisor_argv
(``main(REQUEST.json)`` of the hexbuild that detached it, whatever the working directory holds)
in a session of its own.

It is a foreground ``serve`` without a terminal: it starts the server, writes the outcome of
the start to the result file named in the request (the waiting command reads it), then
supervises until SIGTERM (``serve stop``) or a failure. Its own output goes to
``<state>/servers/<port>.supervisor.log``.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from ..errors import HexbuildError, Interrupted
from ..paths import atomic_write
from ..ui import ui
from .server import ServeRequest, start, supervise


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main(request_file: str) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    doc = json.loads(Path(request_file).read_text())
    raw = doc["request"]
    raw["knobs"] = [tuple(k) for k in raw.get("knobs") or []]
    req = ServeRequest(**raw)
    result = Path(doc["result"])
    ui.verbose = max(ui.verbose, 1)  # the supervisor log is for people debugging
    try:
        server = start(req, doc["settings"])
    except KeyboardInterrupt:
        atomic_write(result, json.dumps({"error": {"type": "interrupted", "message": "interrupted", "exit_code": 130}}))
        return 130
    except HexbuildError as e:
        atomic_write(result, json.dumps({"error": e.to_json()}))
        ui.error(e.message, hint=e.hint)
        return e.exit_code
    atomic_write(result, json.dumps({"ok": True, "url": server.url}))
    ui.info(f"ready at {server.url} ({server.model_name})")
    try:
        supervise(server)
    except Interrupted:  # serve stop's SIGTERM: the stop asked for
        ui.info(f"stopped: {server.url}")
        return Interrupted.exit_code
    except HexbuildError as e:
        ui.error(e.message, hint=e.hint)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
