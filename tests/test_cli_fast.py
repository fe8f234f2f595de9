"""`serve stop`, `--version` and `serve --detach` read before Typer is imported
(hexbuild/cli/fast.py): the shapes it reads and the ones it leaves to Typer, its answers word for
word those of the Typer command (the program run both ways), with a real server started and
stopped, and no Typer imported on the way."""

import json
import subprocess
import sys

import pytest

from hexbuild.cli.fast import SERVE_DEFAULTS, serve_detach_words, serve_stop_words, version_words
from tests.infra.devices import free_port
from tests.test_run_device import populate
from tests.test_serve import pid_alive

NO_FLAGS = {"json": False, "quiet": False, "verbose": 0, "config": None}


@pytest.mark.parametrize("argv, flags, opts", [
    (["serve", "stop"], {}, {}),
    (["serve", "stop", "--port", "8080"], {}, {"port": 8080}),
    (["--json", "serve", "-v", "stop", "--port=9", "-vv"], {"json": True, "verbose": 2}, {"port": 9}),
    (["-v", "serve", "-v", "stop", "-v"], {"verbose": 1}, {}),  # one -v per command: the most of them counts
    (["serve", "stop", "-t", "qemu:/x", "--all", "-q"], {"quiet": True}, {"target": "qemu:/x", "all_": True}),
    (["serve", "stop", "--target=adb", "--config", "h.toml"], {"config": "h.toml"}, {"target": "adb"}),
])
def test_the_shapes_it_reads(argv, flags, opts):
    assert serve_stop_words(argv) == ({**NO_FLAGS, **flags}, {"target": None, "port": None, "all_": False, **opts})


@pytest.mark.parametrize("argv", [
    ["serve", "stop", "--help"], ["serve", "stop", "-h"], ["--version"], ["serve"], ["serve", "status"],
    ["serve", "stop", "--port", "x"], ["serve", "stop", "--port", "-1"], ["serve", "stop", "--port"],
    ["serve", "stop", "--port", "1", "--port", "2"], ["serve", "stop", "-tadb"], ["serve", "stop", "--target="],
    ["serve", "-t", "adb", "stop"], ["serve", "--port", "1", "stop"], ["serve", "stop", "extra"],
    ["serve", "stop", "--", "x"], ["serve", "stop", "-qv"], ["serve", "stop", "--all", "--all"],
    ["serve", "stop", "--por", "1"], ["--json=1", "serve", "stop"], ["deploy", "stop"],
])
def test_everything_else_is_left_to_typer(argv):
    assert serve_stop_words(argv) is None


@pytest.mark.parametrize("argv, flags, opts", [
    (["serve", "--detach"], {}, {}),
    (["--json", "serve", "-t", "qemu:/x", "--model", "m.gguf", "--port", "8081", "--detach", "-q"],
     {"json": True, "quiet": True}, {"target": "qemu:/x", "model": "m.gguf", "port": 8081}),
    (["serve", "--detach", "-m", "a b.gguf", "--package=p", "--device-port", "9", "--ctx", "512", "--ndev", "16",
      "--devices", "HTP0:0", "--dest", "/d", "--models-dir", "/g", "--no-bundle-runtime", "--allow-cpu-fallback",
      "--ready-timeout", "2.5", "-vv", "--config", "c.toml"], {"verbose": 2, "config": "c.toml"},
     {"model": "a b.gguf", "package": "p", "device_port": 9, "ctx_size": 512, "ndev": 16, "devices": "HTP0:0",
      "dest": "/d", "models_dir": "/g", "bundle_runtime": False, "allow_cpu_fallback": True, "ready_timeout": 2.5}),
    (["-v", "serve", "--target=adb", "--bundle-runtime", "--ready-timeout", "1", "--detach"], {"verbose": 1},
     {"target": "adb", "bundle_runtime": True, "ready_timeout": 1.0}),
])
def test_the_serve_shapes_it_reads(argv, flags, opts):
    assert serve_detach_words(argv) == ({**NO_FLAGS, **flags}, {**SERVE_DEFAULTS, "detach": True, **opts})


@pytest.mark.parametrize("argv", [
    ["serve"], ["serve", "-t", "adb"], ["serve", "--detach", "--help"], ["serve", "--detach", "--hex-nhvx", "4"],
    ["serve", "--detach", "--", "-c", "512"], ["serve", "--detach", "--detach"], ["serve", "stop", "--detach"],
    ["serve", "--detach", "extra"], ["--detach", "serve"], ["serve", "--port", "0", "--detach"],
    ["serve", "--port", "65536", "--detach"], ["serve", "--ndev", "17", "--detach"], ["serve", "--ctx", "0", "--detach"],
    ["serve", "--ready-timeout", "0.5", "--detach"], ["serve", "--ready-timeout", "1e3", "--detach"],
    ["serve", "--port", "+5", "--detach"], ["serve", "-m", "a", "--model", "b", "--detach"],
    ["serve", "--bundle-runtime", "--no-bundle-runtime", "--detach"], ["serve", "-mx.gguf", "--detach"],
    ["serve", "--model=", "--detach"], ["serve", "--model", "--detach"], ["serve", "--detach=1"],
    ["chat", "--detach"], ["serve", "--detach", "--prompt", "x"],
])
def test_every_other_serve_is_left_to_typer(argv):
    assert serve_detach_words(argv) is None


@pytest.mark.parametrize("argv, found", [
    (["--version"], {"json": False}), (["--json", "--version"], {"json": True}),
    (["-q", "--version", "--quiet"], {"json": False}), (["--version", "--json", "-q"], {"json": True}),
    (["--version", "--version"], None), (["-v", "--version"], None), (["--version", "serve"], None),
    (["serve", "--version"], None), (["--json", "--json", "--version"], None), (["--version=1"], None), ([], None),
])
def test_the_version_shapes_it_reads(argv, found):
    assert version_words(argv) == found


def _both(argv: list[str], cwd, env=None) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    fast = subprocess.run([sys.executable, "-m", "hexbuild", *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)
    typer_only = subprocess.run([sys.executable, "-c", "from hexbuild.cli.main import run; run()", *argv],
                                capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    return fast, typer_only


@pytest.mark.parametrize("argv", [
    ["serve", "stop"], ["--json", "serve", "stop"], ["serve", "stop", "--port", "1"],
    ["serve", "stop", "--port=1", "--json"], ["-q", "serve", "stop", "-t", "qemu:/nowhere"],
    ["serve", "--json", "stop", "--target=local:/x", "--all"], ["serve", "stop", "--config", "missing.toml"],
    ["serve", "stop", "--port", "x"],  # Typer's on both ways
    ["--version"], ["--json", "--version"], ["--version", "-q", "--json"], ["-v", "--version"],
    ["serve", "--detach"], ["--json", "serve", "--detach", "--model", "m.gguf"],  # no target: one line, exit 2
    ["serve", "-t", "nosuch:x", "--model", "m.gguf", "--detach", "--json"],
    ["serve", "-t", "local:/nowhere/at/all", "--model", "/no/m.gguf", "--port", "1", "--detach"],
    ["serve", "--detach", "--config", "missing.toml", "-t", "local:/x", "-m", "m.gguf"],
    ["serve", "--detach", "--port", "0"],  # Typer's on both ways
])
def test_its_answers_are_typers(argv, serve_state, tmp_path):
    fast, typer_only = _both(argv, tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer_only.returncode, typer_only.stdout, typer_only.stderr)
    assert "Traceback" not in fast.stderr


def test_with_v_it_says_so_and_ends_as_typers(serve_state, tmp_path):
    fast, typer_only = _both(["-v", "serve", "stop", "--port", "1"], tmp_path)
    assert "read before Typer was imported" in fast.stderr and "read before" not in typer_only.stderr
    assert fast.returncode == typer_only.returncode == 2
    assert fast.stderr.splitlines()[-2:] == typer_only.stderr.splitlines()[-2:]  # the error and its hint, after the traceback


def test_a_real_server_stopped_both_ways(serve_state, http_stand_in, tiny_gguf, tmp_path):
    dest = str(tmp_path / "inst" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": http_stand_in})
    for program in (["-m", "hexbuild"], ["-c", "from hexbuild.cli.main import run; run()"]):  # fast.py, Typer
        port = free_port()
        start = subprocess.run([sys.executable, "-m", "hexbuild", "--json", "-q", "serve", "-t", f"local:{dest}",
                                "--model", str(tiny_gguf), "--models-dir", str(tmp_path / "m"), "--port", str(port),
                                "--detach"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert start.returncode == 0, start.stderr
        ready = json.loads(start.stdout)
        stop = subprocess.run([sys.executable, *program, "--json", "serve", "stop", "--port", str(port)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert stop.returncode == 0, stop.stderr
        assert json.loads(stop.stdout) == [{"target": f"local:{dest}", "local_port": port, "pid": ready["pid"],
                                            "stopped": "supervisor"}]
        assert not pid_alive(ready["pid"]) and not pid_alive(ready["supervisor_pid"])
    assert list(serve_state.glob("*.json")) == []


def test_a_real_server_started_both_ways(serve_state, http_stand_in, tiny_gguf, tmp_path):
    """The same ready document and record, whichever reads the words; -v says which did."""
    dest = str(tmp_path / "inst" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": http_stand_in})
    port = free_port()
    words = ["--json", "-v", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--models-dir",
             str(tmp_path / "m"), "--port", str(port), "--ctx", "256", "--ready-timeout", "60", "--detach"]
    seen = []
    for program in (["-m", "hexbuild"], ["-c", "from hexbuild.cli.main import run; run()"]):  # fast.py, Typer
        start = subprocess.run([sys.executable, *program, *words], capture_output=True, text=True, timeout=120,
                               cwd=tmp_path)
        assert start.returncode == 0, start.stderr
        ready = json.loads(start.stdout)
        (rec,) = [json.loads(p.read_text()) for p in serve_state.glob("*.json")]
        seen.append((start.stderr, {k: v for k, v in ready.items() if k not in ("pid", "supervisor_pid")},
                     {k: v for k, v in rec.items() if k not in ("pid", "pid_start", "supervisor_pid", "supervisor_start",
                                                                  "started_at", "ready_at")}))
        stop = subprocess.run([sys.executable, "-m", "hexbuild", "serve", "stop", "--port", str(port)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert stop.returncode == 0, stop.stderr
    (fast_err, fast_ready, fast_rec), (typer_err, typer_ready, typer_rec) = seen
    assert fast_ready == typer_ready and fast_rec == typer_rec
    assert "serve: the command line was read before Typer was imported" in fast_err and "read before" not in typer_err


@pytest.mark.parametrize("argv, out, module", [
    (["serve", "stop"], "nothing to stop\n", "hexbuild.cli.serve_stop"),
    (["--version"], None, "hexbuild.cli.fast"),
])
def test_no_typer_is_imported(serve_state, tmp_path, argv, out, module):
    from hexbuild import __version__

    cp = subprocess.run([sys.executable, "-X", "importtime", "-m", "hexbuild", *argv], capture_output=True,
                        text=True, cwd=tmp_path, timeout=60)
    assert cp.returncode == 0 and cp.stdout == (out or f"hexbuild {__version__}\n"), cp.stderr[-2000:]
    imported = _no_typer(cp.stderr, module)
    assert "dataclasses" not in imported  # and inspect, ast, dis with it: 7 ms of a stop
    assert "hexbuild.config" not in imported  # a stop by the supervisor reads no settings (control.stop)


def test_no_typer_is_imported_for_a_detached_serve(serve_state, tmp_path):
    cp = subprocess.run([sys.executable, "-X", "importtime", "-m", "hexbuild", "serve", "-t", f"local:{tmp_path}/x",
                         "--model", "m.gguf", "--port", str(free_port()), "--detach"], capture_output=True, text=True,
                        cwd=tmp_path, timeout=60)
    assert cp.returncode == 2 and "model not found: m.gguf" in cp.stderr, cp.stderr[-2000:]
    _no_typer(cp.stderr, "hexbuild.cli.serve_start")


def _no_typer(importtime: str, module: str) -> list[str]:
    imported = [line.rsplit("|", 1)[-1].strip() for line in importtime.splitlines() if line.startswith("import time:")]
    assert module in imported
    assert not [m for m in imported if m == "typer" or m.startswith(("typer.", "click"))]
    return imported
