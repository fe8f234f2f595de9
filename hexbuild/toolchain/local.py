"""The local engine: the same build commands, run here through a shell (for CI jobs that already
run inside the toolchain image, or a machine with the NDK and Hexagon SDK installed).

The command runs in its own process group so that Ctrl-C/SIGTERM stop the whole build (cmake,
ninja, the compilers), not just the shell.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Mapping

from ..errors import EnvironmentMissing
from ..ui import ui
from .buildlog import BuildLog


class LocalEngine:
    kind = "local"

    def run(self, command: list[str], *, cwd: Path, env: Mapping[str, str], log: BuildLog) -> int:
        ui.command(command)
        try:
            proc = subprocess.Popen(command, cwd=str(cwd), env=dict(env), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        except FileNotFoundError:
            raise EnvironmentMissing(f"{command[0]} not found") from None
        reader = threading.Thread(target=_pump, args=(proc, log), daemon=True, name="hexbuild-local-log")
        reader.start()
        try:
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            raise
        reader.join(timeout=10)
        return rc


def _pump(proc: subprocess.Popen, log: BuildLog) -> None:
    assert proc.stdout is not None
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(4096)
        if not chunk:
            break
        log.feed(chunk)


def _stop(proc: subprocess.Popen) -> None:
    """Stop the build's whole process group: TERM, then KILL if it does not go within 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
