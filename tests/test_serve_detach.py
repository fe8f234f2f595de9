"""`serve --detach`'s supervisor (serve/control.py, serve/daemon.py) on a local: install of the
stand-in server: a fork of the command as a user runs it (no second interpreter), a new
interpreter where forking is unsafe (another thread runs), nothing left in the state directory
but the record (and nothing of a start interrupted), and `serve stop` leaving the server's last
words in its log."""

import json
import subprocess
import sys
import threading
from pathlib import Path

from hexbuild.serve import state as state_mod
from tests.infra.devices import free_port
from tests.test_run_device import populate
from tests.test_serve import pid_alive, port_free


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def said_stopped(serve_state, port: int, url: str) -> None:
    """serve stop's SIGTERM is a stop asked for: the supervisor logs it and ends (exit 130, as a
    foreground serve does), wherever the signal finds it, without a traceback."""
    log = (serve_state / f"{port}.supervisor.log").read_text()
    assert f"stopped: {url}" in log and "Traceback" not in log, log[-3000:]


def test_the_supervisor_is_a_fork_of_the_command(serve_state, http_stand_in, tiny_gguf, tmp_path):
    """The program (not main() in a test's process) forks the supervisor before Typer parses the
    words (serve/prefork.py), and says so with -v."""
    dest = str(tmp_path / "inst" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": http_stand_in})
    port = free_port()
    argv = [sys.executable, "-m", "hexbuild", "--json", "-v", "serve", "-t", f"local:{dest}", "--model",
            str(tiny_gguf), "--models-dir", str(tmp_path / "m"), "--port", str(port), "--detach"]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    ready = json.loads(cp.stdout)
    assert cmdline(ready["supervisor_pid"]) == argv  # the command's own image: imports done once
    assert f"supervisor PID {ready['supervisor_pid']}: forked before the command line was parsed" in cp.stderr
    assert sorted(p.name for p in serve_state.iterdir()) == [f"{port}.json", f"{port}.log", f"{port}.supervisor.log"]
    stop = subprocess.run([sys.executable, "-m", "hexbuild", "-q", "serve", "stop", "--port", str(port)],
                          capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert not pid_alive(ready["pid"]) and not pid_alive(ready["supervisor_pid"]) and port_free(port)
    assert sorted(p.name for p in serve_state.iterdir()) == [f"{port}.log", f"{port}.supervisor.log"]
    said_stopped(serve_state, port, ready["url"])


def _processes_running(argv: list[str]) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if cmdline(int(d.name)) == argv and Path(f"/proc/{d.name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(d.name))
            except (OSError, IndexError):
                pass
    return found


def test_a_detach_that_is_not_one_leaves_no_supervisor(serve_state, tiny_gguf, tmp_path):
    """The pre-fork guesses from the raw words: when they do not parse (or ask for --help, or the
    port is taken), the child it forked exits with the command, and nothing is in the state
    directory."""
    import socket
    import time

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    runs = {2: ["--port", "not-a-port"], 0: ["--help"], 3: ["--port", str(port)]}  # 3: the supervisor's check, said here
    try:
        for code, words in runs.items():
            argv = [sys.executable, "-m", "hexbuild", "serve", "-t", f"local:{tmp_path}/inst", "--model",
                    str(tiny_gguf), *words, "--detach"]
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert cp.returncode == code, (words, cp.stderr)
            assert "Traceback" not in cp.stderr
            deadline = time.monotonic() + 10
            while _processes_running(argv) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _processes_running(argv) == [], words
    finally:
        taken.close()
    assert state_mod.records() == []
    assert [p.name for p in serve_state.iterdir() if not p.name.endswith(".log")] == []


def test_with_another_thread_running_a_new_interpreter_supervises(cli, serve_state, http_stand_in, tiny_gguf,
                                                                   tmp_path):
    dest = str(tmp_path / "inst" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": http_stand_in})
    port = free_port()
    running, done = threading.Event(), threading.Event()
    busy = threading.Thread(target=lambda: (running.set(), done.wait(60)), daemon=True)
    busy.start()
    running.wait()
    try:
        r = cli("--json", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--models-dir",
                str(tmp_path / "m"), "--port", str(port), "--detach")
    finally:
        done.set()
    assert r.rc == 0, r.err
    line = cmdline(r.json["supervisor_pid"])
    assert line[:2] == [sys.executable, "-c"] and "hexbuild.serve.daemon" in line[2]
    assert cli("serve", "stop", "--port", str(port)).rc == 0
    assert not pid_alive(r.json["pid"]) and state_mod.records() == []
    said_stopped(serve_state, port, r.json["url"])


def test_stop_keeps_the_servers_last_words(cli, serve_state, http_stand_in, tiny_gguf, tmp_path):
    """The log's end is read from where the watcher's stream got to when the server is stopped:
    what the server says on its way out is in the log when `serve stop` returns."""
    dest = tmp_path / "inst" / "llama.cpp"
    wrapper = tmp_path / "llama-server"
    wrapper.write_text(f"""#!/bin/sh
trap 'echo "stand-in: leaving on SIGTERM"; kill "$child"; wait "$child"; exit 0' TERM
{http_stand_in} "$@" &
child=$!
wait "$child"
""")
    wrapper.chmod(0o755)
    populate(f"local:{dest}", str(dest), {"llama-server": wrapper})
    port = free_port()
    r = cli("--json", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--models-dir", str(tmp_path / "m"),
            "--port", str(port), "--detach")
    assert r.rc == 0, r.err
    assert cli("serve", "stop", "--port", str(port)).rc == 0
    log = (serve_state / f"{port}.log").read_text()
    assert "server is listening" in log and "stand-in: leaving on SIGTERM" in log.splitlines()[-2:], \
        (serve_state / f"{port}.supervisor.log").read_text()[-3000:]
    assert log.count("server is listening") == 1  # the stream and the rest, each byte once
    assert not pid_alive(r.json["pid"]) and port_free(port)


def watch_tails(log_name: str) -> list[int]:
    """This machine's `tail -f` processes following a server log named ``log_name`` (a virtual
    phone's processes are this machine's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                line = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            except OSError:
                continue
            if line[:1] == ["tail"] and line[-2:-1] == ["-f"] and line[-1].endswith(f"/{log_name}"):
                found.append(int(proc.name))
    return found


def test_stop_over_adb_leaves_no_tail_behind(cli, serve_state, make_device, http_stand_in, tiny_gguf):
    """The stop ends the log watcher's tail on the phone itself: the session that ran it is cut
    when the supervisor exits, which would leave the tail following the log for good."""
    import time

    dev = make_device()
    spec = f"adb:{dev.serial}"
    populate(spec, "/data/local/tmp/llama.cpp", {"llama-server": http_stand_in})
    port, device_port = free_port(), free_port()
    r = cli("--json", "serve", "-t", spec, "--model", str(tiny_gguf), "--port", str(port), "--device-port",
            str(device_port), "--detach")
    assert r.rc == 0, r.err
    assert len(watch_tails(f"{device_port}.log")) == 1
    assert cli("serve", "stop", "--port", str(port)).rc == 0
    deadline = time.monotonic() + 3
    while watch_tails(f"{device_port}.log") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert watch_tails(f"{device_port}.log") == [] and not pid_alive(r.json["pid"])
    time.sleep(2.5)  # the watch loop's own end, a second or two later, finds nothing left either
    assert watch_tails(f"{device_port}.log") == []


def test_ctrl_c_during_a_detached_start_leaves_nothing_behind(serve_state, tiny_gguf, tmp_path):
    """Ctrl-C while `serve --detach` waits for a server still loading: the supervisor stops what it
    started and the command exits 130, leaving neither the supervisor's log nor the start's result
    file (the supervisor writes it as it ends: interrupted) in the state directory."""
    import signal
    import time

    dest = str(tmp_path / "inst" / "llama.cpp")
    slow = tmp_path / "llama-server"
    slow.write_text("#!/bin/sh\necho 'loading model'\nexec sleep 60\n")
    slow.chmod(0o755)
    populate(f"local:{dest}", dest, {"llama-server": slow})
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "hexbuild", "serve", "-t", f"local:{dest}", "--model",
                             str(tiny_gguf), "--models-dir", str(tmp_path / "m"), "--port", str(port), "--detach"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not state_mod.records() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        (rec,) = state_mod.records()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not pid_alive(rec["pid"]) and not pid_alive(rec["supervisor_pid"]) and port_free(port)
    assert state_mod.records() == [] and "Traceback" not in proc.stderr.read()
    # the server's own log stays, as a failed start's does
    assert [p.name for p in serve_state.iterdir() if p.name != f"{port}.log"] == []
