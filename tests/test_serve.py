"""`hexbuild serve` / `serve status` / `serve stop` / `chat` against real targets: a local:
directory, a virtual phone (real adbd, a real `adb forward` held by the real adb server) and the
test sshd (a real SSH tunnel through hexbuild's own SSH session). The server on those is the
stand-in (tests/tools/http_stand_in.c: a phone cannot run an Android llama-server here); the
clients are the official `openai` package, curl and hexbuild chat."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hexbuild import errors
from hexbuild.serve import state as state_mod
from tests.infra.devices import free_port
from tests.test_run_device import populate


def port_free(port: int) -> bool:
    """Nothing listens there (connections still closing do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):  # gone, or reaped between the two looks
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def openai_round_trip(url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=url, api_key="none", timeout=30)
    done = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}])
    assert done.choices[0].message.content and done.usage.completion_tokens > 0 and done.usage.prompt_tokens > 0
    pieces = [c.choices[0].delta.content for c in client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "hi"}], stream=True) if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1 and "".join(pieces) == done.choices[0].message.content


def curl(url: str) -> dict:
    cp = subprocess.run(["curl", "-sf", "--max-time", "10", url], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


@pytest.fixture
def local_install(tmp_path, http_stand_in):
    dest = str(tmp_path / "inst" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": http_stand_in})
    return f"local:{dest}", dest


def serve_detach(cli, spec, model, port, *extra, env=None):
    return cli("--json", "serve", "-t", spec, "--model", str(model), "--port", str(port), "--detach", *extra, env=env)


# -- local: ---------------------------------------------------------------------------------------
def test_local_detach_openai_curl_status_stop(cli, serve_state, local_install, tiny_gguf, tmp_path):
    spec, dest = local_install
    port = free_port()
    r = serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(tmp_path / "models"))
    assert r.rc == 0, r.err
    ready = r.json
    assert ready["url"] == f"http://127.0.0.1:{port}/v1" and ready["model_name"] == "stand-in"
    assert (tmp_path / "models" / tiny_gguf.name).read_bytes() == tiny_gguf.read_bytes()  # pushed
    assert "server is listening" in r.err  # the start-up log streamed to stderr
    openai_round_trip(ready["url"])
    assert curl(f"http://127.0.0.1:{port}/health") == {"status": "ok"}
    st = cli("--json", "serve", "status")
    (row,) = st.json
    assert row["state"] == "ready" and row["target"] == spec and row["pid"] == ready["pid"]
    assert pid_alive(ready["pid"]) and pid_alive(ready["supervisor_pid"])
    stop = cli("--json", "serve", "stop")
    assert stop.rc == 0, stop.err
    assert stop.json[0]["stopped"] == "supervisor"
    assert not pid_alive(ready["pid"]) and not pid_alive(ready["supervisor_pid"]) and port_free(port)
    assert cli("--json", "serve", "status").json == []


def test_model_pushed_once_then_found_by_name(cli, serve_state, local_install, tiny_gguf, tmp_path):
    spec, _ = local_install
    models = tmp_path / "models"
    port = free_port()
    assert serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(models)).rc == 0
    first = (models / tiny_gguf.name).stat().st_mtime_ns
    assert cli("serve", "stop", "--port", str(port)).rc == 0
    assert serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(models)).rc == 0  # same bytes: not re-sent
    assert (models / tiny_gguf.name).stat().st_mtime_ns == first
    assert cli("serve", "stop", "--all").rc == 0
    r = serve_detach(cli, spec, tiny_gguf.name, port, "--models-dir", str(models))  # a name on the device
    assert r.rc == 0, r.err
    assert cli("serve", "stop", "-t", spec).rc == 0 and port_free(port)


def test_chat_one_shot_prints_ttft_and_tokens_per_second(cli, serve_state, local_install, tiny_gguf, tmp_path):
    spec, _ = local_install
    port = free_port()
    r = cli("--json", "chat", "-t", spec, "--model", str(tiny_gguf), "--port", str(port), "-p", "hello?",
            env={"HEXBUILD_DEPLOY_MODELS_DIR": str(tmp_path / "m")})
    assert r.rc == 0, r.err
    doc = r.json
    assert doc["answer"] == "hello from the stand-in server." and doc["completion_tokens"] == 7
    assert doc["ttft_s"] > 0 and doc["tokens_per_s"] > 0
    assert "time to first token" in r.err and port_free(port)  # its own server is stopped again
    assert state_mod.records() == []


def test_chat_uses_a_running_server(cli, serve_state, local_install, tiny_gguf, tmp_path):
    spec, _ = local_install
    port = free_port()
    assert serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(tmp_path / "m")).rc == 0
    r = cli("chat", "-t", spec, "--model", tiny_gguf.name, "-p", "again")
    assert r.rc == 0, r.err
    assert "hello from the stand-in server." in r.out and f"127.0.0.1:{port}" in r.err
    assert not port_free(port)  # still serving


def test_chat_interactive_reads_questions_from_stdin(serve_state, local_install, tiny_gguf, tmp_path):
    spec, _ = local_install
    port = free_port()
    cp = subprocess.run([sys.executable, "-m", "hexbuild.cli.main", "--json", "chat", "-t", spec, "--model", str(tiny_gguf),
                         "--port", str(port), "--system", "be brief"],
                        input="first question\n\nsecond one\n/exit\nnever asked\n", capture_output=True, text=True,
                        timeout=120, env={**os.environ, "HEXBUILD_DEPLOY_MODELS_DIR": str(tmp_path / "m")})
    assert cp.returncode == 0, cp.stderr
    answers = json.loads(cp.stdout)
    assert [a["answer"] for a in answers] == ["hello from the stand-in server."] * 2
    assert cp.stderr.count("time to first token") == 2 and port_free(port)


# -- faults ------------------------------------------------------------------------------------------
def test_port_in_use_is_named(cli, serve_state, local_install, tiny_gguf):
    spec, _ = local_install
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("--json", "serve", "-t", spec, "--model", str(tiny_gguf), "--port", str(port), "--detach")
    assert r.rc == 3
    msg = r.json["error"]["message"]
    assert f"local port {port} is in use" in msg and f"PID {os.getpid()}" in msg


def test_no_llama_server_says_how_to_build_it(cli, serve_state, tmp_path, tiny_gguf, http_stand_in):
    dest = str(tmp_path / "inst")
    populate(f"local:{dest}", dest, {"llama-cli": http_stand_in})
    r = cli("--json", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--port", str(free_port()))
    assert r.rc == 3 and "has no llama-server" in r.json["error"]["message"]
    assert "hexbuild build --build-target llama-server" in r.json["error"]["hint"]


def test_missing_model(cli, serve_state, local_install, tmp_path):
    spec, _ = local_install
    r = cli("--json", "serve", "-t", spec, "--model", "nope.gguf", "--port", str(free_port()),
            "--models-dir", str(tmp_path / "m"))
    assert r.rc == 2 and "model not found: nope.gguf" in r.json["error"]["message"]


def test_server_exiting_during_startup_shows_its_last_lines(cli, serve_state, tmp_path, tiny_gguf):
    bad = tmp_path / "bad-server.sh"
    bad.write_text("#!/bin/sh\necho 'loading model'\necho 'error: unknown model architecture: zzz' >&2\nexit 1\n")
    dest = str(tmp_path / "inst")
    populate(f"local:{dest}", dest, {"llama-server": bad})
    port = free_port()
    r = cli("--json", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--port", str(port),
            "--models-dir", str(tmp_path / "m"), "--detach")
    assert r.rc == 8, r.err
    err = r.json["error"]
    assert "exited during start-up" in err["message"] and "unknown model architecture" in err["message"]
    assert "loading model" in err["hint"]
    assert port_free(port) and state_mod.records() == []
    assert not list(serve_state.glob("*.supervisor.log"))  # a failed start leaves no supervisor log


def test_failed_detached_starts_leave_no_supervisor_log(cli, serve_state, local_install, tmp_path, tiny_gguf):
    """Each failed `serve --detach` left a PORT.supervisor.log behind; a served port's keeps
    what its own server wrote."""
    spec, _ = local_install
    port = free_port()
    for _ in range(2):
        r = cli("--json", "serve", "-t", spec, "--model", "nope.gguf", "--port", str(port),
                "--models-dir", str(tmp_path / "m"), "--detach")
        assert r.rc == 2 and "model not found" in r.json["error"]["message"], r.err
    assert not list(serve_state.glob("*.supervisor.log")) and not list(serve_state.glob("start-*"))
    assert serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(tmp_path / "m")).rc == 0
    assert cli("serve", "stop", "--port", str(port)).rc == 0
    kept = (serve_state / f"{port}.supervisor.log").read_bytes()
    r = cli("--json", "serve", "-t", spec, "--model", "nope.gguf", "--port", str(port), "--detach")
    assert r.rc == 2 and (serve_state / f"{port}.supervisor.log").read_bytes() == kept


def test_host_and_port_after_dashdash_are_refused(cli, serve_state, local_install, tiny_gguf):
    spec, _ = local_install
    r = cli("serve", "-t", spec, "--model", str(tiny_gguf), "--", "--host", "0.0.0.0")
    assert r.rc == 2 and "loopback only" in r.err


def test_server_killed_mid_request(cli, serve_state, local_install, tiny_gguf, tmp_path, monkeypatch):
    spec, _ = local_install
    monkeypatch.setenv("STAND_IN_DELAY_MS", "400")
    port = free_port()
    r = serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(tmp_path / "m"))
    assert r.rc == 0, r.err
    pid = r.json["pid"]
    from hexbuild.errors import RemoteFailed
    from hexbuild.serve.openai_http import chat

    got = []

    def on_text(t):
        got.append(t)
        if len(got) == 2:
            os.kill(pid, signal.SIGKILL)

    with pytest.raises(RemoteFailed, match="did the server stop|connection to the server broke"):
        chat(port, [{"role": "user", "content": "hi"}], on_text=on_text)
    deadline = time.monotonic() + 20
    # the supervisor notices and cleans up, then says why in its log as it ends
    while (state_mod.records() or pid_alive(r.json["supervisor_pid"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert state_mod.records() == [] and port_free(port)
    sup_log = (serve_state / f"{port}.supervisor.log").read_text()
    assert "exited while serving" in sup_log


def test_foreground_serve_stops_on_sigterm(serve_state, local_install, tiny_gguf, tmp_path):
    """SIGTERM stops the server and removes the forward, and the command exits 130 as the
    exit-code table says for an interrupt (it exited 0)."""
    spec, _ = local_install
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "hexbuild.cli.main", "serve", "-t", spec, "--model", str(tiny_gguf),
                             "--port", str(port), "--models-dir", str(tmp_path / "m")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"http://127.0.0.1:{port}/v1"), proc.stderr.read() if proc.poll() is not None else line
        (rec,) = state_mod.records()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == errors.INTERRUPTED
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not pid_alive(rec["pid"]) and port_free(port) and state_mod.records() == []
    err = proc.stderr.read()
    assert "hexbuild: error: interrupted: llama-server on" in err and "the forward is removed" in err
    assert "Traceback" not in err


def test_stop_cleans_up_after_a_dead_supervisor(cli, serve_state, local_install, tiny_gguf, tmp_path):
    spec, _ = local_install
    port = free_port()
    r = serve_detach(cli, spec, tiny_gguf, port, "--models-dir", str(tmp_path / "m"))
    assert r.rc == 0, r.err
    os.kill(r.json["supervisor_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(r.json["supervisor_pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cli("--json", "serve", "status").json[0]["state"] == "orphaned"
    stop = cli("--json", "serve", "stop", "-t", spec)
    assert stop.rc == 0 and stop.json[0]["stopped"] == "directly"
    assert not pid_alive(r.json["pid"]) and port_free(port)


def test_a_broken_config_keeps_no_server_from_stopping(cli, serve_state, local_install, tiny_gguf, tmp_path):
    """A supervisor stops its own server: `serve stop` reads no settings for that, so a broken
    config file neither fails nor slows it. Stopping an orphan from here needs them: that stop
    says what is wrong with the file."""
    spec, _ = local_install
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\n")
    ports = free_port(), free_port()
    started = [serve_detach(cli, spec, tiny_gguf, p, "--models-dir", str(tmp_path / "m")) for p in ports]
    assert all(r.rc == 0 for r in started), [r.err for r in started]
    stop = cli("--json", "serve", "stop", "--port", str(ports[0]), "--config", str(bad))
    assert stop.rc == 0 and stop.json[0]["stopped"] == "supervisor", stop.err
    assert not pid_alive(started[0].json["pid"])
    os.kill(started[1].json["supervisor_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(started[1].json["supervisor_pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    refused = cli("--json", "serve", "stop", "--port", str(ports[1]), "--config", str(bad))
    assert refused.rc == 2 and refused.json["error"]["type"] == "config" and "bad.toml" in refused.json["error"]["message"]
    assert pid_alive(started[1].json["pid"])  # nothing was stopped on a guess
    stop = cli("--json", "serve", "stop", "--port", str(ports[1]))
    assert stop.rc == 0 and stop.json[0]["stopped"] == "directly", stop.err
    assert not pid_alive(started[1].json["pid"]) and port_free(ports[1])


def serve_until_lost(args: list[str], port: int, fault) -> tuple[int, str]:
    """A foreground `hexbuild serve ARGS` (its own process); ``fault()`` once it is ready; its
    exit code and stderr once it ends."""
    proc = subprocess.Popen([sys.executable, "-m", "hexbuild.cli.main", "serve", *args, "--device-port",
                             str(free_port()), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith(f"http://127.0.0.1:{port}/v1"), proc.stderr.read()
        fault()
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return rc, proc.stderr.read()


# -- adb: a real adb forward on a virtual phone ------------------------------------------------------
def test_adb_forward_on_a_virtual_phone(cli, serve_state, make_device, adb_server, http_stand_in, tiny_gguf):
    dev = make_device()
    spec = f"adb:{dev.serial}"
    populate(spec, "/data/local/tmp/llama.cpp", {"llama-server": http_stand_in})
    port, device_port = free_port(), free_port()  # the virtual phone shares this machine's network
    r = serve_detach(cli, spec, tiny_gguf, port, "--device-port", str(device_port))
    assert r.rc == 0, r.err
    ready = r.json
    assert ready["forward"] == "adb forward"
    assert f"{dev.serial} tcp:{port} tcp:{device_port}" in adb_server("forward", "--list").stdout  # the adb server holds it
    assert (dev.tmp / "gguf" / tiny_gguf.name).read_bytes() == tiny_gguf.read_bytes()
    openai_round_trip(ready["url"])
    assert curl(f"http://127.0.0.1:{port}/v1/models")["data"][0]["id"] == "stand-in"
    assert cli("serve", "stop", "-t", spec).rc == 0
    assert f"tcp:{port}" not in adb_server("forward", "--list").stdout and port_free(port)
    assert not pid_alive(ready["pid"])  # gone on the phone (whose processes are this machine's)


def test_phone_disappearing_while_serving(serve_state, make_device, adb_server, http_stand_in, tiny_gguf):
    """The phone's stand-in runs on this machine, so after the plug is pulled it is still there."""
    dev = make_device()
    spec = f"adb:{dev.serial}"
    populate(spec, "/data/local/tmp/llama.cpp", {"llama-server": http_stand_in})
    port = free_port()
    rc, err = serve_until_lost(["-t", spec, "--model", str(tiny_gguf), "--port", str(port)], port,
                               dev.kill)  # pull the plug
    assert rc == 14, err
    assert "forward is removed" in err and f"tcp:{port}" not in adb_server("forward", "--list").stdout
    assert port_free(port)
    (rec,) = state_mod.records()  # kept: the server could not be stopped with the phone gone
    assert rec["status"] == "lost" and pid_alive(rec["pid"])
    dev.start()  # the phone is back: serve stop finishes the job
    r = subprocess.run([sys.executable, "-m", "hexbuild.cli.main", "serve", "stop", "-t", spec],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not pid_alive(rec["pid"]) and state_mod.records() == []


# -- ssh://: a real SSH tunnel ------------------------------------------------------------------------
@pytest.fixture
def ssh_install(sshd_host, tmp_path, http_stand_in, monkeypatch):
    for k, v in sshd_host.env.items():
        monkeypatch.setenv(k, v)
    spec = f"ssh://root@127.0.0.1:{sshd_host.port}"
    dest = str(tmp_path / "board" / "llama.cpp")
    from hexbuild.targets import parse_target

    with parse_target(spec, sshd_host.settings) as t:
        t.remove([dest], recursive=True)
        t.push(http_stand_in, f"{dest}/bin/llama-server", mode=0o755)
    return spec, dest


def test_ssh_tunnel_detach_openai_stop(cli, serve_state, ssh_install, tiny_gguf, tmp_path):
    spec, dest = ssh_install
    port, device_port = free_port(), free_port()
    r = serve_detach(cli, spec, tiny_gguf, port, "--dest", dest, "--models-dir", str(tmp_path / "board-models"),
                     "--device-port", str(device_port))
    assert r.rc == 0, r.err
    ready = r.json
    assert ready["forward"].startswith("SSH tunnel") and ready["device_port"] == device_port
    openai_round_trip(ready["url"])
    assert curl(f"http://127.0.0.1:{port}/health") == {"status": "ok"}
    assert cli("serve", "stop", "--all").rc == 0
    assert port_free(port) and port_free(device_port) and not pid_alive(ready["pid"])


def sshd_children(sshd_pid: int) -> set[int]:
    out = set()
    for task in Path(f"/proc/{sshd_pid}/task").iterdir():
        out.update(int(p) for p in (task / "children").read_text().split())
    return out


def test_ssh_connection_cut_while_serving(serve_state, sshd_host, ssh_install, tiny_gguf, tmp_path):
    spec, dest = ssh_install
    port = free_port()
    before = sshd_children(sshd_host.proc.pid)
    recs = []

    def cut() -> None:
        recs.extend(state_mod.records())
        for pid in sshd_children(sshd_host.proc.pid) - before:  # hexbuild's SSH connection
            os.kill(pid, signal.SIGKILL)

    rc, err = serve_until_lost(["-t", spec, "--model", str(tiny_gguf), "--port", str(port), "--dest", dest,
                                "--models-dir", str(tmp_path / "bm")], port, cut)
    (rec,) = recs
    assert rc == 14, err
    assert "lost the connection" in err and "was stopped" in err  # reconnected once to stop it
    assert port_free(port) and not pid_alive(rec["pid"]) and state_mod.records() == []


@pytest.mark.parametrize("form", ["adb://", "adb+ssh://"])
def test_forward_through_the_adb_servers_tcp_service(form, cli, serve_state, make_device, adb_server, sshd_host,
                                                      http_stand_in, tiny_gguf, monkeypatch):
    """A remote adb server (adb://) or a phone on an SSH host (adb+ssh://): `adb forward` would
    listen on that other host, so hexbuild listens here and carries each connection through the
    adb server's own tcp:PORT service; the adb server's forward list stays empty."""
    dev = make_device()
    if form == "adb://":
        spec = f"adb://127.0.0.1:{adb_server.port}/{dev.serial}"
    else:
        for k, v in sshd_host.env.items():
            monkeypatch.setenv(k, v)
        spec = f"adb+ssh://root@127.0.0.1:{sshd_host.port}/{dev.serial}"
    populate(f"adb:{dev.serial}", "/data/local/tmp/llama.cpp", {"llama-server": http_stand_in})
    port = free_port()
    r = serve_detach(cli, spec, tiny_gguf, port, "--device-port", str(free_port()))
    assert r.rc == 0, r.err
    assert r.json["forward"].startswith("adb tcp:")
    assert adb_server("forward", "--list").stdout.strip() == ""
    openai_round_trip(r.json["url"])
    assert cli("serve", "stop", "--all").rc == 0
    assert port_free(port) and not pid_alive(r.json["pid"])


def test_a_server_whose_htp_session_did_not_open_is_refused(cli, serve_state, tmp_path, tiny_gguf, http_stand_in):
    """The backend's own failure line (as llama.cpp prints it when the skel is not found) before
    a server that then answers: the start-up log proves a CPU fallback, so serve stops it (exit 12),
    unless --allow-cpu-fallback."""
    wrapper = tmp_path / "llama-server"
    wrapper.write_text("#!/bin/sh\necho 'ggml-hex: HTP0 failed to open session : error 0x80000406' >&2\n"
                       f'exec {http_stand_in} "$@"\n')
    wrapper.chmod(0o755)
    dest = str(tmp_path / "inst")
    populate(f"local:{dest}", dest, {"llama-server": wrapper})
    port = free_port()
    r = cli("--json", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--port", str(port),
            "--models-dir", str(tmp_path / "m"), "--detach")
    assert r.rc == 12, r.err
    assert "fell back to the CPU" in r.json["error"]["message"] and "0x80000406" in r.json["error"]["message"]
    assert port_free(port) and state_mod.records() == []
    r = cli("--json", "serve", "-t", f"local:{dest}", "--model", str(tiny_gguf), "--port", str(port),
            "--models-dir", str(tmp_path / "m"), "--detach", "--allow-cpu-fallback")
    assert r.rc == 0, r.err
    (record,) = state_mod.records()  # the supervisor warned; the record keeps the verdict
    assert "0x80000406" in record["dispatch"]["fallback_reason"]
    r = cli("serve", "stop", "--port", str(port))
    assert r.rc == 0, r.err
    assert port_free(port) and state_mod.records() == []  # the server it kept is stopped too
