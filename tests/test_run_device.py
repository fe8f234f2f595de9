"""`hexbuild run` (and bench, and the launch scripts) against real targets: a local: directory,
and virtual Android devices served by real adbd (tests/infra/devices.py). The llama.cpp tools are
stood in for by argv_echo (reports its exact argv/env/cwd) and the fake llama-bench."""

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hexbuild import runner
from hexbuild.source import read_source
from hexbuild.targets import parse_target
from tests.infra.runner_tools import decode_echo

TOOLS = ("llama-completion", "llama-cli", "llama-server", "test-backend-ops", "llama-tokenize")

PERF_LOG = """#!/bin/sh
echo "llama_perf_context_print: prompt eval time =    3843.67 ms /   197 tokens (   19.51 ms per token,    51.25 tokens per second)"
echo "llama_perf_context_print:        eval time =    1686.13 ms /    31 runs   (   54.39 ms per token,    18.39 tokens per second)"
"""


def populate(spec: str, dest: str, tools: dict[str, Path], *, manifest: dict | None = None) -> None:
    """Put a minimal install on any target through hexbuild's own Target API."""
    with parse_target(spec) as t:
        t.remove([dest], recursive=True)
        for name, src in tools.items():
            t.push(Path(src), f"{dest}/bin/{name}", mode=0o755)
        t.write_file(f"{dest}/lib/.keep", b"")
        if manifest is not None:
            t.write_file(f"{dest}/{runner.MANIFEST}", json.dumps(manifest).encode())


def echo_report(log_path: str) -> dict:
    return decode_echo(Path(log_path).read_bytes())


@pytest.fixture(scope="module")
def new_facts(tree_0_3_36):
    return read_source(tree_0_3_36).to_json()


@pytest.fixture
def local_dev(tmp_path, argv_echo):
    dest = str(tmp_path / "dev ice" / "llama.cpp")
    populate(f"local:{dest}", dest, {n: argv_echo for n in TOOLS})
    return f"local:{dest}", dest


def run_json(cli, tmp_path, *argv):
    r = cli("--json", "run", "--results-dir", str(tmp_path / "results"), *argv)
    return r, (r.json if r.out.strip() else None)


# -- local: target ------------------------------------------------------------------------------
def test_run_streams_saves_log_and_json(cli, tmp_path, local_dev):
    spec, dest = local_dev
    r = cli("run", "completion", "-t", spec, "--ndev", "2", "--model", "m.gguf", "--results-dir",
            str(tmp_path / "res"), "--", "-p", "it's $(rm -rf /)")
    assert r.rc == 0, r.err
    got = decode_echo(r.out)  # the program's stdout passed through
    assert got["argv"][-2:] == ["-p", "it's $(rm -rf /)"] and got["cwd"] == dest
    assert got["env"]["GGML_HEXAGON_NDEV"] == "2"
    logs = list((tmp_path / "res").glob("*-llama-completion-local_*.log"))
    assert len(logs) == 1 and "argv_echo: " in logs[0].read_text()  # stderr is in the log too
    doc = json.loads(logs[0].with_suffix(".json").read_text())
    assert set(doc) >= {"target", "tool", "argv", "env", "exit_code", "duration_s", "log", "results"}
    assert doc["argv"] == got["argv"] and doc["exit_code"] == 0 and doc["results"] is None
    assert not list((tmp_path / "res").glob("*.part"))


def test_exit_code_is_the_programs(cli, tmp_path, local_dev):
    spec, _ = local_dev
    r, doc = run_json(cli, tmp_path, "cli", "-t", spec, "--hex-echo-exit", "42")
    assert r.rc == 42 and doc["exit_code"] == 42
    assert decode_echo(Path(doc["log"]).read_bytes())["env"]["GGML_HEXAGON_ECHO_EXIT"] == "42"


def test_results_are_parsed_from_the_log(cli, tmp_path, local_dev):
    spec, dest = local_dev
    script = tmp_path / "perf.sh"
    script.write_text(PERF_LOG)
    with parse_target(spec) as t:
        t.push(script, f"{dest}/bin/perf-printer", mode=0o755)
    r, doc = run_json(cli, tmp_path, "tool", "-t", spec, "--", "perf-printer")
    assert r.rc == 0, r.err
    perf = doc["results"]["perf"]
    assert perf["prompt_eval"]["tokens_per_second"] == 51.25 and perf["eval"]["tokens_per_second"] == 18.39


def test_print_shows_the_command_and_runs_nothing(cli, tmp_path, local_dev):
    spec, dest = local_dev
    r = cli("run", "cli", "-t", spec, "--ndev", "2", "--print", "--results-dir", str(tmp_path / "res"),
            "--", "-p", "a b")
    assert r.rc == 0, r.err
    line = r.out.strip()
    words = shlex.split(line)
    assert words[:3] == ["cd", dest, "&&"] and words[-2:] == ["-p", "a b"]
    assert "GGML_HEXAGON_NDEV=2" in words and "HTP0,HTP1" in words
    assert not (tmp_path / "res").exists()


def test_manifest_decides_the_vocabulary(cli, tmp_path, argv_echo, new_facts):
    dest = str(tmp_path / "llama.cpp")
    manifest = {"schema": 1, "llama_cpp": new_facts,
                "files": [{"path": f"bin/{n}"} for n in ("llama-cli", "llama-bench")]}
    populate(f"local:{dest}", dest, {"llama-cli": argv_echo}, manifest=manifest)
    r, doc = run_json(cli, tmp_path, "completion", "-t", f"local:{dest}", "--devices", "HTP0:0,HTP0:1",
                      "--hex-nhvx", "2")
    assert r.rc == 0, r.err
    # no llama-completion deployed: completion runs llama-cli -no-cnv, sessions as DEVICES
    assert doc["argv"][0] == "./bin/llama-cli" and "-no-cnv" in doc["argv"]
    assert doc["env"]["GGML_HEXAGON_DEVICES"] == "HTP0:0,HTP0:1"
    assert doc["env"]["GGML_HEXAGON_OPPOLL"] == "1"  # run.py's default for revisions that read it
    got = echo_report(doc["log"])
    assert got["argv"] == doc["argv"] and got["env"]["GGML_HEXAGON_NHVX"] == "2"
    r, _ = run_json(cli, tmp_path, "completion", "-t", f"local:{dest}", "--hex-opmask", "3")
    assert r.rc == 2 and "GGML_HEXAGON_OPMASK" in r.json["error"]["message"]
    assert "--hex-nhvx" in r.json["error"]["message"]


def test_prompt_file_is_copied_to_the_device(cli, tmp_path, local_dev):
    spec, dest = local_dev
    prompt = tmp_path / "my prompt's.txt"
    prompt.write_text("surf's up\n")
    r, doc = run_json(cli, tmp_path, "completion", "-t", spec, "--prompt-file", str(prompt))
    assert r.rc == 0, r.err
    remote = doc["argv"][doc["argv"].index("-f") + 1]
    assert remote.startswith(f"{dest}/.hexbuild/prompts/") and Path(remote).read_text() == "surf's up\n"
    r, _ = run_json(cli, tmp_path, "completion", "-t", spec, "--prompt-file", "nope.txt")
    assert r.rc == 2 and "prompt file not found" in r.json["error"]["message"]


def test_missing_install_or_tool_is_environment_missing(cli, tmp_path, local_dev):
    r, doc = run_json(cli, tmp_path, "cli", "-t", f"local:{tmp_path / 'empty'}")
    assert r.rc == 3 and "nothing is installed" in doc["error"]["message"]
    spec, _ = local_dev
    r, doc = run_json(cli, tmp_path, "bench", "-t", spec)
    assert r.rc == 3 and "llama-bench is not installed" in doc["error"]["message"]


def test_unreachable_target_is_environment_missing(cli, tmp_path):
    r, doc = run_json(cli, tmp_path, "cli", "-t", "adb://127.0.0.1:9/NOPE")
    assert r.rc == 3, r.err
    assert "\n" not in doc["error"]["message"]


def test_bad_input_is_one_line_exit_2(cli, tmp_path, local_dev):
    spec, _ = local_dev
    for argv in (["nonsense", "-t", spec], ["cli", "-t", spec, "--hex-nhvx"], ["tool", "-t", spec],
                 ["cli", "-t", spec, "--ndev", "2", "--devices", "HTP0"], ["cli", "-t", spec, "--devices", "CPU"]):
        r = cli("run", *argv)
        assert r.rc == 2, (argv, r.err)
        assert "Traceback" not in r.err and len(r.err.strip().splitlines()) <= 2


nasty = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
specials = st.sampled_from(["a b", "'", '"', "$(id)", "`id`", ";", "&&", "\n", "é€😀", "\\", "*", "~", "-t", "--"])
argument = st.one_of(nasty, specials)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(argument, max_size=6), model=argument.filter(lambda s: s and "/" not in s))
def test_arguments_reach_the_program_exactly_local(cli, tmp_path, local_dev, extra, model):
    spec, _ = local_dev
    r, doc = run_json(cli, tmp_path, "tool", "-t", spec, f"--model={model}", "--", "llama-tokenize", *extra)
    assert r.rc == 0, r.err
    assert echo_report(doc["log"])["argv"] == ["./bin/llama-tokenize", *extra]
    r, doc = run_json(cli, tmp_path, "cli", "-t", spec, f"--model={model}", "--", *extra)
    got = echo_report(doc["log"])["argv"]
    assert got == doc["argv"] and got[len(got) - len(extra):] == extra
    assert f"/{model}" in got[got.index("-m") + 1]
