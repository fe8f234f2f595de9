"""What ``hexbuild serve`` has running, recorded in hexbuild's state directory so that
``serve status``, ``serve stop`` and ``chat`` (from other processes) find it.

One JSON record per local port: ``<state>/servers/<port>.json`` (written atomically), beside
``<port>.log`` (the server's log as streamed from the device) and, for ``--detach``,
``<port>.supervisor.log``. The state directory is ``$XDG_STATE_HOME/hexbuild``, else
``~/.local/state/hexbuild``.

A record names the process on this machine that supervises the server (its PID and start
time, so a reused PID is not mistaken for it), the target, the server's PID on the device, and
the ports. A record whose supervisor is gone describes a server whose forward died with it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..paths import atomic_write, state_root
from ..pids import process_start


def state_dir() -> Path:
    return state_root()


def servers_dir() -> Path:
    return state_dir() / "servers"


def record_path(port: int) -> Path:
    return servers_dir() / f"{port}.json"


def log_path(port: int) -> Path:
    return servers_dir() / f"{port}.log"


def supervisor_log_path(port: int) -> Path:
    return servers_dir() / f"{port}.supervisor.log"


def supervisor_alive(rec: dict[str, Any]) -> bool:
    """The recorded supervisor still runs (a zombie, exited but not yet reaped, does not)."""
    pid, start = rec.get("supervisor_pid"), rec.get("supervisor_start")
    return isinstance(pid, int) and isinstance(start, str) and process_start(pid) == start


def write(rec: dict[str, Any]) -> Path:
    path = record_path(int(rec["local_port"]))
    atomic_write(path, json.dumps(rec, indent=1) + "\n")
    return path


def read(port: int) -> dict[str, Any] | None:
    try:
        data = json.loads(record_path(port).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remove(port: int) -> None:
    record_path(port).unlink(missing_ok=True)


def records() -> list[dict[str, Any]]:
    out = []
    d = servers_dir()
    if not d.is_dir():
        return out
    for p in sorted(d.glob("*.json")):
        if p.stem.isdigit():
            rec = read(int(p.stem))
            if rec is not None:
                out.append(rec)
    return out


def new_record(**fields: Any) -> dict[str, Any]:
    pid = os.getpid()
    return {"status": "starting", "supervisor_pid": pid, "supervisor_start": process_start(pid),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **fields}
