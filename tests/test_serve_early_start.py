"""The early start (serve/early_start.py): the pre-forked supervisor launches what the same words
launched last time before they are parsed, and the start takes that process over only when it
renders the very same launch; every other way (a file changed, the port held, other settings, a
push, a failed start, a command that does not detach) leaves exactly what a start without it
leaves. On a local: install of the stand-in server, through the program as a user runs it."""

import json
import marshal
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hexbuild.serve import early_start
from hexbuild.serve import state as state_mod
from tests.infra.devices import free_port
from tests.test_run_device import populate
from tests.test_serve import pid_alive, port_free


@pytest.fixture
def install(serve_state, http_stand_in, tiny_gguf, tmp_path, monkeypatch):
    """A local: install whose llama-server notes each start in ``starts`` (one line a launch), the
    words of a detached start of it, and a cache of the test's own (the remembered launches)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dest = tmp_path / "inst" / "llama.cpp"
    starts = tmp_path / "starts"
    wrapper = tmp_path / "llama-server"
    wrapper.write_text(f"#!/bin/sh\necho \"$$\" >> {starts}\nexec {http_stand_in} \"$@\"\n")
    wrapper.chmod(0o755)
    populate(f"local:{dest}", str(dest), {"llama-server": wrapper})
    port = free_port()
    argv = [sys.executable, "-m", "hexbuild", "--json", "-v", "serve", "-t", f"local:{dest}", "--model",
            str(tiny_gguf), "--models-dir", str(tmp_path / "m"), "--port", str(port), "--detach"]
    work = tmp_path / "work"
    work.mkdir()
    inst = {"argv": argv, "port": port, "dest": dest, "starts": starts, "work": work, "state": serve_state,
            "model": tiny_gguf}
    yield inst
    for pid in launches(inst):  # a failing test may leave an early launch no record names
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def start(inst) -> subprocess.CompletedProcess:
    return subprocess.run(inst["argv"], capture_output=True, text=True, timeout=120, cwd=inst["work"])


def stop(inst) -> None:
    cp = subprocess.run([sys.executable, "-m", "hexbuild", "-q", "serve", "stop", "--port", str(inst["port"])],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr


def launches(inst) -> list[int]:
    return [int(x) for x in inst["starts"].read_text().split()] if inst["starts"].exists() else []


def supervisor_log(inst) -> str:
    return (inst["state"] / f"{inst['port']}.supervisor.log").read_text()


def started_and_stopped(inst) -> dict:
    """A first start (it leaves its launch), stopped: its ready document."""
    cp = start(inst)
    assert cp.returncode == 0, cp.stderr
    stop(inst)
    assert len(launches(inst)) == 1 and "taking over" not in supervisor_log(inst)
    return json.loads(cp.stdout)


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(pid_alive(p) for p in pids)


def test_the_same_words_again_take_over_their_early_launch(install):
    first = started_and_stopped(install)
    cp = start(install)
    assert cp.returncode == 0, cp.stderr
    ready = json.loads(cp.stdout)
    early = launches(install)[1]
    assert len(launches(install)) == 2 and ready["pid"] == early  # launched once, by the early start
    assert f"taking over PID {early}: launched before the command line was parsed" in supervisor_log(install)
    assert ready["url"] == first["url"] and state_mod.read(install["port"])["pid"] == early
    with socket.create_connection(("127.0.0.1", install["port"]), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        assert b" 200 " in s.recv(200)
    stop(install)
    assert not pid_alive(early) and port_free(install["port"]) and state_mod.records() == []


def test_a_changed_file_is_not_launched_early(install):
    """The install's manifest, the program, the model and the model it was pushed from are the
    launch's files: one changed, nothing is launched before the parse."""
    started_and_stopped(install)
    program = install["dest"] / "bin" / "llama-server"
    os.utime(program, ns=(time.time_ns(), time.time_ns()))
    cp = start(install)
    assert cp.returncode == 0, cp.stderr
    assert len(launches(install)) == 2 and json.loads(cp.stdout)["pid"] == launches(install)[1]
    assert "taking over" not in supervisor_log(install) and "launched before" not in supervisor_log(install)
    stop(install)
    cp = start(install)  # that start left its launch, with the new signature
    assert cp.returncode == 0 and "taking over" in supervisor_log(install), cp.stderr
    stop(install)


def test_a_held_port_is_not_launched_early(install):
    """The port is checked before the launch: the start says the port is in use (exit 3), not
    that a server it launched exited."""
    started_and_stopped(install)
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the stopped server's connections close
        held.bind(("127.0.0.1", install["port"]))
        held.listen()
        cp = start(install)
    assert cp.returncode == 3 and f"local port {install['port']} is in use" in cp.stderr, cp.stderr
    assert len(launches(install)) == 1 and state_mod.records() == []


def test_an_early_launch_the_start_does_not_render_is_stopped_first(install):
    """Other settings (a hexbuild.toml in the directory) render another command line: the early
    launch is stopped, and the start launches what it renders."""
    started_and_stopped(install)
    (install["work"] / "hexbuild.toml").write_text("[run]\nthreads = 3\n")
    cp = start(install)
    assert cp.returncode == 0, cp.stderr
    early, own = launches(install)[1:]
    ready = json.loads(cp.stdout)
    assert ready["pid"] == own and not pid_alive(early)
    assert (f"stopping PID {early}, launched before the command line was parsed: this start renders another "
            "launch") in supervisor_log(install)
    (rec,) = state_mod.records()
    assert rec["argv"][rec["argv"].index("-t") + 1] == "3"
    stop(install)


def test_take_stops_a_launch_after_a_push_or_its_end(tmp_path):
    """The rendering alone does not decide: a push since the launch (the server must read the
    pushed file), or a launch that ended, is not taken over; the start launches anew."""
    launch = early_start.Launch(["/bin/sleep", "60"], {}, str(tmp_path), str(tmp_path / "log"), 1)
    for case in ("pushed", "ended", "taken"):
        pid = early_start._spawn(launch)
        if case == "ended":
            os.kill(pid, 9)
            assert gone([pid])
        since = _start_time(pid) or ""
        early_start._launched = early_start.Launched(launch, pid, since)
        try:
            took = early_start.take(early_start.Launch(**launch.to_doc()), pushed=case == "pushed")
            assert took == ((pid, since) if case == "taken" else None)
            assert early_start._launched is None and pid_alive(pid) == (case == "taken")
        finally:
            os.kill(pid, 9) if pid_alive(pid) else None
            early_start._launched = None


def _start_time(pid: int):
    from hexbuild.pids import process_start

    return process_start(pid)


def test_an_early_launch_of_a_start_that_fails_is_stopped(install, tmp_path):
    """The supervisor's start fails after the launch (nothing installed where the settings now
    point): the launch is stopped before the command says why."""
    started_and_stopped(install)
    (install["work"] / "hexbuild.toml").write_text(f"[deploy]\ndest = \"{tmp_path / 'empty'}\"\n")
    cp = start(install)
    assert cp.returncode == 3 and "nothing is installed" in cp.stderr, cp.stderr
    early = launches(install)[1]
    assert not pid_alive(early) and state_mod.records() == []


def test_an_early_launch_of_a_command_that_does_not_detach_is_stopped(install):
    """The command fails before it hands the request over (its settings file does not parse): the
    child that launched early stops the launch and exits."""
    started_and_stopped(install)
    (install["work"] / "hexbuild.toml").write_text("[run\n")
    cp = start(install)
    assert cp.returncode == 2 and "not valid TOML" in cp.stderr, cp.stderr
    assert len(launches(install)) == 2 and gone(launches(install)) and port_free(install["port"])
    assert state_mod.records() == []


# the remembered launches themselves


def test_the_digest_is_of_words_directory_and_environment():
    env = {"PATH": "/usr/bin", "TOKEN": "s3cret"}
    base = early_start.digest(["serve", "--detach"], "/w", env)
    assert base == early_start.digest(["serve", "--detach"], "/w", dict(reversed(list(env.items()))))
    assert base != early_start.digest(["serve", "--detach", "-v"], "/w", env)
    assert base != early_start.digest(["serve", "--detach"], "/x", env)
    assert base != early_start.digest(["serve", "--detach"], "/w", {**env, "TOKEN": "other"})


def test_remembered_launches_keep_no_environment_and_refuse_a_file_others_can_write(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SOME_SECRET", "hunter2-value")
    monkeypatch.setattr(early_start, "_key", early_start.digest(["x"], str(tmp_path), os.environ))
    prog = tmp_path / "prog"
    prog.write_text("#!/bin/sh\n")
    done = early_start.Launch([str(prog), "--port", "5"], {"LD_LIBRARY_PATH": "/lib"}, str(tmp_path), "/l", 5)
    early_start.remember(done, [""])
    path = Path(early_start._plans_path())
    assert path.stat().st_mode & 0o777 == 0o600 and b"hunter2-value" not in path.read_bytes()
    (entry,) = early_start._plans().values()
    assert entry["launch"] == done.to_doc() and [p for p, _ in entry["files"]] == [str(prog)]
    path.chmod(0o622)
    assert early_start._plans() == {}
    path.chmod(0o600)
    path.write_bytes(b"not marshal")
    assert early_start._plans() == {}


def test_remembered_launches_keep_the_most_recent(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for i in range(early_start.KEEP + 3):
        monkeypatch.setattr(early_start, "_key", f"k{i}")
        early_start.remember(early_start.Launch(["/bin/true"], {}, "/", "/l", i + 1), [])
    plans = marshal.loads(Path(early_start._plans_path()).read_bytes())
    assert list(plans) == [f"k{i}" for i in range(3, early_start.KEEP + 3)]
    monkeypatch.setattr(early_start, "_key", "k5")  # used again: the most recent
    early_start.remember(early_start.Launch(["/bin/true"], {}, "/", "/l", 6), [])
    assert list(marshal.loads(Path(early_start._plans_path()).read_bytes()))[-1] == "k5"


SHOW = """#!/bin/sh
echo "cwd=$(pwd) x=$EARLY_X stdin=$(readlink /proc/$$/fd/0) fds=$(ls /proc/$$/fd | tr '\\n' ' ')"
grep -E '^(SigIgn|SigBlk)' /proc/$$/status
awk '{print "own session: " ($6 == $1)}' /proc/$$/stat
echo to-stderr >&2
"""


def test_the_early_launch_makes_the_process_a_start_makes(tmp_path):
    """Session, directory, environment, stdin, open descriptors, ignored and blocked signals, and
    both output streams in the log: the same as targets/local.py's start_detached."""
    show = tmp_path / "show"
    show.write_text(SHOW)
    show.chmod(0o755)
    (tmp_path / "here").mkdir()
    logs = {}
    for way, code in {
        "early": "from hexbuild.serve.early_start import Launch, _spawn\n"
                 "print(_spawn(Launch([A[0]], {'EARLY_X': '1'}, A[1], A[2], 1)))",
        "start": "from hexbuild.targets.local import LocalTarget\n"
                 "print(LocalTarget('local:/', '/').start_detached([A[0]], env={'EARLY_X': '1'}, cwd=A[1], log=A[2])[0])",
    }.items():
        log = tmp_path / f"{way}.log"
        cp = subprocess.run([sys.executable, "-c", "import sys; A = sys.argv[1:]\n" + code, "./show",
                             str(tmp_path), str(log)], capture_output=True, text=True, timeout=30, cwd=tmp_path / "here")
        assert cp.returncode == 0, cp.stderr
        assert gone([int(cp.stdout.split()[-1])])
        logs[way] = log.read_text()
    assert "own session: 1" in logs["early"] and "x=1" in logs["early"] and "to-stderr" in logs["early"]
    assert logs["early"] == logs["start"], logs
