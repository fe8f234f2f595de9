"""hexbuild on a terminal (hexbuild/ui.py): a real pseudo-terminal around a real deploy to a
virtual phone. The progress bar is rich's, drawn from the first task on, and rich is imported in
a thread of its own while the devices answer; a deploy that fails on a terminal still answers
in one line."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import threading
import time

from hexbuild import errors
from tests import elf_factory as ef


def on_terminal(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Run ``argv`` with its stdin, stdout and stderr on one pseudo-terminal; (rc, all it wrote)."""
    main, sub = pty.openpty()
    proc = subprocess.Popen(argv, stdin=sub, stdout=sub, stderr=sub, env=env, close_fds=True)
    os.close(sub)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the last writer closed its end
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    return rc, out.decode("utf-8", "replace")


def terminal_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "GITLAB_CI")}
    return {**env, "TERM": "xterm-256color", "COLUMNS": "120", "XDG_CACHE_HOME": str(tmp_path / "xdg")}


def test_a_deploy_on_a_terminal_draws_rich_bar_and_table(make_device, tmp_path):
    dev = make_device("SM8650", link_mbit=160)  # a USB-2-like link: the bar has time to draw
    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(6_000_000))
    rc, out = on_terminal([sys.executable, "-m", "hexbuild", "deploy", str(pkg), "--target", f"adb:{dev.serial}"],
                          terminal_env(tmp_path))
    assert rc == 0, out[-2000:]
    assert re.search(r"6\.0/6\.0 MB", out), out[-2000:]  # rich's bar, to the last byte (its DownloadColumn)
    assert "┏" in out and "┃" in out  # and its result table
    assert "ok" in out and dev.serial in out and "Traceback" not in out
    assert (dev.tmp / "llama.cpp").is_symlink()


def test_a_failed_deploy_on_a_terminal_answers_in_one_line(tmp_path, adb_server):
    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    rc, out = on_terminal([sys.executable, "-m", "hexbuild", "deploy", str(pkg), "--target", "adb:R5CT0000NOPE"],
                          terminal_env(tmp_path))
    assert rc == errors.DEPLOY_FAILED, out[-2000:]
    assert out.count("hexbuild: error:") == 1 and "R5CT0000NOPE" in out
    for noise in ("Traceback", "Exception ignored", "Fatal Python error"):
        assert noise not in out, out[-2000:]


def test_the_live_bar_is_made_once_at_its_first_task(monkeypatch):
    """Until a task is added nothing is drawn (and rich's import runs beside the command);
    targets that add their tasks from threads of their own share one bar."""
    import io

    from hexbuild import ui as ui_mod

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(ui_mod.ui, "ci", None)
    progress = ui_mod.ui.progress()
    assert isinstance(progress, ui_mod.LiveProgress) and progress.live is None
    made = []
    real = ui_mod.LiveProgress._bar

    def counted(self):
        bar = real(self)
        made.append(id(bar))
        return bar

    monkeypatch.setattr(ui_mod.LiveProgress, "_bar", counted)
    with progress:
        tasks = []
        threads = [threading.Thread(target=lambda i=i: tasks.append(progress.add_task(f"t{i}", total=10)))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for task in tasks:
            progress.update(task, advance=10)
    assert len(set(made)) == 1 and len(progress.live.tasks) == 4
    assert "rich.progress" in sys.modules
