"""Stopping the daemons the fixtures started: by their own PID, never by name."""

import subprocess


def stop_process(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL when it has not exited within ``grace`` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
