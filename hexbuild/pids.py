"""Processes of this machine named by PID and start time (a reused PID is not mistaken for them):
whether one runs, waiting for its end, stopping it.

The end is waited for on a pidfd, which becomes readable the moment the process ends, rather than
by looking every so often: ``serve stop`` waits for a supervisor that waits for a server, and two
polls (sh with ``sleep 0.01``, then every 20 ms) were a third of what a stop added to the
server's own exit. Where there is no pidfd (Linux before 5.3), every 5 ms.
"""

from __future__ import annotations

import os
import time

# signal and select are imported where used: process_start is read by a pre-forked supervisor
# before its imports (serve/early_start.py), where signal's enums cost 6 ms

POLL = 0.005  # seconds between looks where there is no pidfd


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks after boot, /proc/PID/stat's 22nd field):
    with the PID it names one process, even after the PID is reused. None when it is gone or a
    zombie (ended, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def running(pid: int, since: str | None) -> bool:
    """``pid`` runs and (when ``since`` is given) was started at ``since``."""
    start = process_start(pid)
    return start is not None and (not since or start == since)


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here, or the process is gone
        return None


def wait_gone(pid: int, since: str | None, timeout: float, fd: int | None = None) -> bool:
    """Wait until ``pid`` (started at ``since``) no longer runs; whether it ended within
    ``timeout`` seconds. ``fd``: its pidfd, opened before whatever makes it end."""
    deadline = time.monotonic() + timeout
    while running(pid, since):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if fd is not None:
            import select

            select.select([fd], [], [], min(left, 1.0))  # readable once it has ended
        else:
            time.sleep(min(left, POLL))
    return True


def terminate(pid: int, since: str | None, timeout: float) -> bool:
    """SIGTERM and its end waited for ``timeout`` seconds: whether it ended (or was not running:
    the PID gone, or naming another process, which is not signalled)."""
    import signal

    return _signal_and_wait(pid, since, [(signal.SIGTERM, timeout)])


def stop(pid: int, since: str | None, *, kill_after: float = 10.0, timeout: float = 30.0) -> bool:
    """SIGTERM, its end waited for, SIGKILL after ``kill_after`` seconds: whether it ended."""
    import signal

    return _signal_and_wait(pid, since, [(signal.SIGTERM, min(kill_after, timeout)),
                                         (signal.SIGKILL, max(timeout - kill_after, 1.0))])


def _signal_and_wait(pid: int, since: str | None, steps: list[tuple[int, float]]) -> bool:
    fd = open_pidfd(pid)
    try:
        if not running(pid, since):  # checked once the pidfd is open: from here it names this process
            return True
        for sig, wait in steps:
            _signal(pid, fd, sig)
            if wait_gone(pid, since, wait, fd):
                return True
        return False
    finally:
        if fd is not None:
            os.close(fd)


def _signal(pid: int, fd: int | None, sig: int) -> None:
    import signal

    try:
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):  # ended meanwhile
        pass
