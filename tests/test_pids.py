"""hexbuild/pids.py on real processes of this machine: a stop waits for the end itself (a pidfd)
rather than polling, SIGKILL follows a SIGTERM that is ignored, and a PID whose start time is
not the recorded one is never signalled."""

import os
import signal
import subprocess
import sys
import threading
import time

from hexbuild import pids

IGNORES_TERM = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
SLEEPS = "import sys, time; print('up', flush=True); time.sleep(60)"


def start(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"  # its handlers are set
    threading.Thread(target=p.wait, daemon=True).start()  # reaped as it ends, as the supervisor's are
    return p


def test_stop_returns_as_soon_as_the_process_has_ended():
    p = start(SLEEPS)
    since = pids.process_start(p.pid)
    assert since and pids.running(p.pid, since)
    t0 = time.monotonic()
    assert pids.stop(p.pid, since)
    took = time.monotonic() - t0
    assert not pids.running(p.pid, since) and p.wait(5) == -signal.SIGTERM
    assert took < 1.0, took


def test_stop_kills_what_ignores_sigterm_after_kill_after():
    p = start(IGNORES_TERM)
    since = pids.process_start(p.pid)
    t0 = time.monotonic()
    assert pids.stop(p.pid, since, kill_after=0.5, timeout=5)
    assert 0.5 <= time.monotonic() - t0 < 3
    assert p.wait(5) == -signal.SIGKILL


def test_terminate_gives_up_after_its_timeout_and_says_so():
    p = start(IGNORES_TERM)
    since = pids.process_start(p.pid)
    try:
        assert not pids.terminate(p.pid, since, 0.3)
        assert pids.running(p.pid, since)
    finally:
        p.kill()
        p.wait(5)


def test_another_start_time_is_another_process_and_is_left_alone():
    p = start(SLEEPS)
    try:
        since = pids.process_start(p.pid)
        other = str(int(since) + 1)
        assert not pids.running(p.pid, other)
        assert pids.stop(p.pid, other)  # nothing of that start time runs: nothing to do
        time.sleep(0.2)
        assert p.poll() is None and pids.running(p.pid, since)
    finally:
        p.kill()
        p.wait(5)


def test_a_zombie_does_not_run():
    p = subprocess.Popen([sys.executable, "-c", "pass"])  # not reaped until wait(): a zombie meanwhile
    deadline = time.monotonic() + 10
    while pids.process_start(p.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pids.process_start(p.pid) is None and not pids.running(p.pid, None)
    assert os.path.exists(f"/proc/{p.pid}")  # still there, as a zombie
    p.wait()


def test_without_a_pidfd_the_wait_looks_every_few_ms(monkeypatch):
    monkeypatch.setattr(pids, "open_pidfd", lambda pid: None)  # Linux before 5.3
    p = start(SLEEPS)
    since = pids.process_start(p.pid)
    t0 = time.monotonic()
    assert pids.stop(p.pid, since)
    assert time.monotonic() - t0 < 1.0 and p.wait(5) == -signal.SIGTERM
