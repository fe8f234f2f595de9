"""`hexbuild serve` with the real llama-server (the 0.3.28 tree built for AArch64 Linux: the
``real_linux_package`` fixture) and the tiny real GGUF: on the qemu: target, and over ssh:// on
the virtual bullseye board through a real SSH tunnel. Clients: the official `openai` package
(a completion with usage counts and a streamed one), curl and hexbuild chat."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hexbuild.serve import state as state_mod
from tests.infra.devices import free_port
from tests.test_serve import pid_alive, port_free

SYSROOT = "/usr/aarch64-linux-gnu"
SEED = 7


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)


def check_real_answers(url: str, model_path_end: str) -> None:
    import openai

    client = openai.OpenAI(base_url=url, api_key="none", timeout=120)
    # the tiny model samples its end-of-generation token now and then (3 tokens in one CI run):
    # llama-server's ignore_eos keeps it generating, so the count is the model's 8 real tokens
    done = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello world"}],
                                          max_tokens=8, seed=SEED, extra_body={"ignore_eos": True})
    assert done.usage.completion_tokens == 8 and done.usage.prompt_tokens > 1  # real tokens from the model
    assert done.model.endswith(model_path_end)
    # a fixed seed: the tiny model's vocabulary is mostly byte and padding tokens, which decode to
    # no text, so an unseeded sample can stream a single piece of text now and then
    chunks = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello"}],
                                                 max_tokens=8, stream=True, seed=SEED))
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1


def test_real_server_on_qemu(cli, serve_state, tmp_path, real_linux_package, tiny_gguf_ascii, monkeypatch):
    """The CPU-only open build follows the one rule (hexbuild/artifacts/npu.py): it serves with a
    note (its build chose the CPU), and NPU sessions asked of it are exit 12 before anything starts. The detached
    supervisor runs the hexbuild that was started, from a directory holding another hexbuild/."""
    spec = f"qemu:{tmp_path}/inst"
    port = free_port()
    elsewhere = tmp_path / "a-checkout"
    (elsewhere / "hexbuild").mkdir(parents=True)
    (elsewhere / "hexbuild" / "__init__.py").write_text("raise ImportError('not the hexbuild that was started')\n")
    monkeypatch.chdir(elsewhere)
    r = cli("--json", "serve", "-t", spec, "--package", str(real_linux_package), "--model", str(tiny_gguf_ascii),
            "--models-dir", str(tmp_path / "models"), "--port", str(port), "--ctx", "512", "--detach", "--ndev", "2")
    assert r.rc == 12 and "has no NPU libraries" in r.json["error"]["message"]
    assert port_free(port) and state_mod.records() == []
    r = cli("--json", "serve", "-t", spec, "--model", tiny_gguf_ascii.name, "--models-dir", str(tmp_path / "models"),
            "--port", str(port), "--ctx", "512", "--detach")
    assert r.rc == 0, r.err
    assert sum("runs on the CPU only" in line for line in r.err.splitlines()) == 1
    ready = r.json
    assert ready["model_name"].endswith(tiny_gguf_ascii.name) and "listening on" in r.err
    (rec,) = state_mod.records()
    assert rec["argv"][rec["argv"].index("--ctx-size") + 1] == "512" and "--device" not in rec["argv"]
    # the open build chose the CPU: a note (in the record and the command's document), not a warning
    cpu_only = [n for n in rec["notes"] if "runs on the CPU only" in n]
    assert len(cpu_only) == 1 and cpu_only[0] in ready["notes"] and rec["warnings"] == [], rec
    assert not any("CPU only" in w for w in ready["warnings"]), ready["warnings"]
    check_real_answers(ready["url"], tiny_gguf_ascii.name)
    cp = subprocess.run(["curl", "-sf", "--max-time", "60", f"http://127.0.0.1:{port}/v1/completions",
                         "-d", json.dumps({"prompt": "the NPU", "max_tokens": 4})], capture_output=True, text=True)
    assert cp.returncode == 0
    done = json.loads(cp.stdout)  # an unseeded sample may draw the end-of-text token early
    assert done["usage"]["completion_tokens"] == 4 or done["choices"][0]["finish_reason"] == "stop"
    chat = cli("--json", "chat", "-t", spec, "--model", tiny_gguf_ascii.name, "-p", "hello", "-n", "6")
    assert chat.rc == 0, chat.err
    n = chat.json["completion_tokens"]
    assert n == 6 or (0 < n < 6 and chat.json["finish_reason"] == "stop"), chat.json
    # the tiny model's vocabulary is mostly byte and padding tokens: an answer can have no text,
    # and then no first token to time
    assert chat.json["tokens_per_s"] > 0 if n > 1 else chat.json["tokens_per_s"] is None
    assert chat.json["ttft_s"] > 0 if chat.json["answer"] else chat.json["ttft_s"] is None
    # one token: llama-server's own rate for it is a million tokens/s; no rate is given
    one = cli("--json", "chat", "-t", spec, "--model", tiny_gguf_ascii.name, "-p", "hello", "-n", "1")
    assert one.rc == 0 and one.json["completion_tokens"] == 1, one.err
    assert one.json["tokens_per_s"] is None and "tokens/s" not in one.err, one.err
    # the program, as a user stops it: its command line read before Typer (cli/fast.py), the real
    # server's end waited for on a pidfd (hexbuild/pids.py)
    stop = subprocess.run([sys.executable, "-m", "hexbuild", "serve", "stop", "-t", spec], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert stop.returncode == 0 and stop.stdout == f"stopped {spec} (port {port}, PID {ready['pid']})\n", stop.stderr
    assert port_free(port) and not pid_alive(ready["pid"]) and state_mod.records() == []
    # the same words twice, as a user starts it again: the second start's real server was launched
    # before its words were parsed (serve/early_start.py), and it answers as the first did
    words = [sys.executable, "-m", "hexbuild", "--json", "-v", "serve", "-t", spec, "--model", tiny_gguf_ascii.name,
             "--models-dir", str(tmp_path / "models"), "--port", str(port), "--ctx", "512", "--detach"]
    pids = []
    for _ in range(2):
        cp = subprocess.run(words, capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert cp.returncode == 0, cp.stderr
        pids.append(json.loads(cp.stdout)["pid"])
        check_real_answers(json.loads(cp.stdout)["url"], tiny_gguf_ascii.name)
        log = (serve_state / f"{port}.supervisor.log").read_text()
        stop = subprocess.run([sys.executable, "-m", "hexbuild", "-q", "serve", "stop", "--port", str(port)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert stop.returncode == 0, stop.stderr
    assert f"taking over PID {pids[1]}: launched before the command line was parsed" in log, log[-3000:]
    assert port_free(port) and not any(pid_alive(p) for p in pids) and state_mod.records() == []


def test_real_server_on_the_board_through_an_ssh_tunnel(cli, serve_state, tmp_path, real_linux_package, tiny_gguf_ascii,
                                                         virtual_board, monkeypatch):
    for k, v in virtual_board.env.items():
        monkeypatch.setenv(k, v)
    dest, models = "/opt/serve/llama.cpp", "/opt/serve/gguf"
    port, device_port = free_port(), free_port()
    r = cli("--json", "serve", "-t", virtual_board.spec, "--package", str(real_linux_package), "--bundle-runtime",
            "--dest", dest, "--models-dir", models, "--model", str(tiny_gguf_ascii),
            "--port", str(port), "--device-port", str(device_port), "--ctx", "512",
            "--allow-cpu-fallback", "--ready-timeout", "180", "--detach", "--", "-t", "2")
    assert r.rc == 0, r.err
    ready = r.json
    assert ready["forward"].startswith("SSH tunnel")
    check_real_answers(ready["url"], tiny_gguf_ascii.name)
    assert cli("serve", "stop", "--all").rc == 0
    assert port_free(port) and state_mod.records() == []
    assert not pid_alive(ready["pid"])  # the board's processes are this machine's (a chroot)
