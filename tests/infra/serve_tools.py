"""``http_stand_in``: the stand-in for llama-server on virtual phones and boards
(tests/tools/http_stand_in.c, built here with the system C compiler), and ``serve_state``: a
private hexbuild state directory for the test, with every server still recorded there stopped
at the end (by its recorded PIDs, through ``hexbuild serve stop --all``)."""

import os
from pathlib import Path

import pytest

from tests.infra.runner_tools import build_c_tool


@pytest.fixture(scope="session")
def http_stand_in(tmp_path_factory) -> Path:
    return build_c_tool("http_stand_in.c", tmp_path_factory.mktemp("http-stand-in") / "llama-server", "-D_GNU_SOURCE")


@pytest.fixture
def serve_state(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    yield state / "hexbuild" / "servers"
    from hexbuild.config import load
    from hexbuild.serve import control as serve_control

    leftovers = serve_control.select(target=None, port=None, all_=True)
    pids = [r.get("pid") for r in leftovers if isinstance(r, dict)]
    if leftovers:
        try:
            serve_control.stop(leftovers, load())
        except Exception:  # a device already gone: its server is still a process of this machine
            pass
    for pid in pids:  # every virtual device runs here, so what stop could not reach is ended by PID
        _end_stand_in(pid)


def _end_stand_in(pid) -> None:
    import signal

    try:
        cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, TypeError, ValueError):
        return
    if b"llama-server" in cmdline:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
