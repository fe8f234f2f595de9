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


def run_json(cli, tmp_path, *argv, env=None):
    r = cli("--json", "run", "--results-dir", str(tmp_path / "results"), *argv, env=env)
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


def test_a_program_killed_by_a_signal_exits_as_a_shell_says(cli, tmp_path):
    """llama-completion aborting (std::out_of_range in llama.cpp) is killed by SIGABRT: hexbuild
    exits 134 (128+6), as `sh -c` would, and the record says which signal; not 250 (-6 mod 256)."""
    dest = tmp_path / "inst"
    aborts = tmp_path / "aborts.sh"
    aborts.write_text("#!/bin/sh\necho 'terminate called after throwing an instance of std::out_of_range' >&2\n"
                      "kill -ABRT $$\n")
    populate(f"local:{dest}", str(dest), {"llama-completion": aborts})
    r, doc = run_json(cli, tmp_path, "completion", "-t", f"local:{dest}")
    assert r.rc == 134 and doc["exit_code"] == 134 and doc["signal"] == "SIGABRT", r.err
    assert "exited 134 (killed by SIGABRT)" in r.err and "std::out_of_range" in Path(doc["log"]).read_text()
    shell = __import__("subprocess").run(["sh", "-c", str(dest / "bin" / "llama-completion")], capture_output=True)
    assert shell.returncode == r.rc


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


def test_a_stderr_line_does_not_land_inside_a_stdout_line_in_the_log(cli, tmp_path, local_dev):
    """test-backend-ops prints a case's name, runs it, then prints OK; a library's stderr line in
    between (the FastRPC library's, the backend's) must not split the case from its verdict."""
    spec, dest = local_dev
    script = tmp_path / "cases.sh"
    script.write_text("#!/bin/sh\nprintf '  MUL_MAT(type_a=q4_0,m=1): '\nsleep 0.3\n"
                      "echo 'ggml-hex: a line of the library' >&2\nsleep 0.3\necho OK\n")
    with parse_target(spec) as t:
        t.push(script, f"{dest}/bin/cases", mode=0o755)
    r, doc = run_json(cli, tmp_path, "tool", "-t", spec, "--", "cases")
    assert r.rc == 0, r.err
    lines = Path(doc["log"]).read_text().splitlines()
    assert "  MUL_MAT(type_a=q4_0,m=1): OK" in lines and "ggml-hex: a line of the library" in lines, lines


def test_timeout_keeps_the_log_and_says_so(cli, tmp_path, local_dev):
    spec, dest = local_dev
    slow = tmp_path / "slow.sh"
    slow.write_text("#!/bin/sh\necho started\nexec sleep 30\n")
    with parse_target(spec) as t:
        t.push(slow, f"{dest}/bin/slow", mode=0o755)
    r, doc = run_json(cli, tmp_path, "tool", "-t", spec, "--timeout", "1", "--", "slow")
    assert r.rc == 8 and "did not finish" in doc["error"]["message"]
    (saved,) = (tmp_path / "results").glob("*.json")
    record = json.loads(saved.read_text())
    assert record["exit_code"] is None and "did not finish" in record["error"]
    assert Path(record["log"]).read_text() == "started\n"


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


def run_lib(tmp_path, **request):
    """The library path of `hexbuild run` (the CLI adds only flag parsing, tested above); the
    property tests use it because each in-process CLI call re-registers every command."""
    from hexbuild import config

    req = runner.RunRequest(results_dir=str(tmp_path / "results"), **request)
    record = runner.run(req, config.load(flags={}))
    return record, echo_report(record.log)


def test_cli_passes_arguments_after_the_separator_verbatim(cli, tmp_path, local_dev):
    spec, _ = local_dev
    extra = ["--hex-nhvx", "1", "-t", "--", "$(id)", "a\nb", "--model=x"]
    r, doc = run_json(cli, tmp_path, "tool", "-t", spec, "--model=-- x", "--", "llama-tokenize", *extra)
    assert r.rc == 0, r.err
    got = echo_report(doc["log"])
    assert got["argv"] == ["./bin/llama-tokenize", "-m", str(Path.home() / "gguf" / "-- x"), *extra]
    assert "GGML_HEXAGON_NHVX" not in got["env"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(argument, max_size=6), model=argument.filter(lambda s: s and "/" not in s))
def test_arguments_reach_the_program_exactly_local(tmp_path, local_dev, extra, model):
    spec, _ = local_dev
    _, got = run_lib(tmp_path, kind="tool", target=spec, extra=["llama-tokenize", *extra])
    assert got["argv"] == ["./bin/llama-tokenize", *extra]
    record, got = run_lib(tmp_path, kind="cli", target=spec, model=model, extra=extra)
    assert got["argv"] == record.invocation.argv and got["argv"][len(got["argv"]) - len(extra):] == extra
    assert got["argv"][got["argv"].index("-m") + 1].endswith(f"/{model}")


# -- virtual Android devices (real adbd) ----------------------------------------------------------
@pytest.fixture(params=["android", "debian"])
def adb_dev(phones, argv_echo, request):
    """An install on an SM8650 (v75) phone (toybox/mksh or Debian userland), in a directory of
    this test's own."""
    dev = phones["SM8650"] if request.param == "android" else request.getfixturevalue("debian_phone")
    dest = f"/data/local/tmp/hb-run-{request.node.name[:40]}/llama.cpp"
    populate(f"adb:{dev.serial}", dest, {n: argv_echo for n in TOOLS})
    return f"adb:{dev.serial}", dest, dev


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(argument, max_size=6), model=argument.filter(lambda s: s and "/" not in s))
def test_arguments_reach_the_program_exactly_over_adb(tmp_path, adb_dev, extra, model):
    spec, dest, _ = adb_dev
    record, got = run_lib(tmp_path, kind="cli", target=spec, dest=dest, model=model, ndev=2, extra=extra,
                          knobs=[("opfilter", "MUL_MAT|$(x) 'y'")])
    assert record.exit_code == 0
    assert got["argv"] == record.invocation.argv and got["argv"][len(got["argv"]) - len(extra):] == extra
    assert got["argv"][got["argv"].index("-m") + 1] == f"/data/local/tmp/gguf/{model}"
    assert got["cwd"] == dest
    assert got["env"]["GGML_HEXAGON_OPFILTER"] == "MUL_MAT|$(x) 'y'"
    assert got["env"]["GGML_HEXAGON_NDEV"] == "2" and got["env"]["ADSP_LIBRARY_PATH"] == f"{dest}/lib"


def test_exit_code_and_streams_over_adb(cli, tmp_path, adb_dev):
    spec, dest, _ = adb_dev
    r, doc = run_json(cli, tmp_path, "completion", "-t", spec, "--dest", dest, "--hex-echo-exit", "3")
    assert r.rc == 3 and doc["exit_code"] == 3
    assert "argv_echo: " in Path(doc["log"]).read_text()  # the device program's stderr


def test_sessions_below_v75_are_refused_on_android(cli, tmp_path, phones, argv_echo):
    dev = phones["SM8550"]  # v73
    dest = "/data/local/tmp/hb-run-v73/llama.cpp"
    populate(f"adb:{dev.serial}", dest, {"llama-cli": argv_echo})
    r, doc = run_json(cli, tmp_path, "cli", "-t", f"adb:{dev.serial}", "--dest", dest, "--ndev", "2")
    assert r.rc == 2 and "below v75" in doc["error"]["message"] and "v73" in doc["error"]["message"]
    r, doc = run_json(cli, tmp_path, "cli", "-t", f"adb:{dev.serial}", "--dest", dest)
    assert r.rc == 0, r.err


def test_offline_device_is_environment_missing(cli, tmp_path, make_device, argv_echo):
    dev = make_device("SM8750")
    dest = "/data/local/tmp/llama.cpp"
    populate(f"adb:{dev.serial}", dest, {"llama-cli": argv_echo})
    dev.kill()
    r, doc = run_json(cli, tmp_path, "cli", "-t", f"adb:{dev.serial}")
    assert r.rc == 3, r.err
    assert not (tmp_path / "results").exists()  # nothing ran, nothing half-written


def test_run_over_ssh(cli, tmp_path, sshd_host, argv_echo):
    dest = str(tmp_path / "board" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": argv_echo})
    spec = f"ssh://root@127.0.0.1:{sshd_host.port}"
    args = ["--host", "127.0.0.1", "-p", "a 'b' \"c\" $(id) `id` ; && \n é😀"]
    r, doc = run_json(cli, tmp_path, "server", "-t", spec, "--dest", dest, "--ndev", "2", "--", *args,
                      env=sshd_host.env)
    assert r.rc == 0, r.err
    got = echo_report(doc["log"])
    assert got["argv"] == doc["argv"] and got["argv"][-len(args):] == args and got["cwd"] == dest
    assert got["env"]["GGML_HEXAGON_NDEV"] == "2"


def test_launch_scripts_run_on_the_device(phones, argv_echo, new_facts):
    dev = phones["SM8750"]  # v79: several sessions allowed
    spec, dest = f"adb:{dev.serial}", "/data/local/tmp/hb-launch/llama.cpp"
    populate(spec, dest, {n: argv_echo for n in TOOLS})
    scripts = runner.launch_scripts(facts=new_facts, dest=dest, models_dir="/data/local/tmp/gguf", ndev=4,
                                    os="android", htp_arch="v79")
    args = ["-p", "it's a \"test\" $(id) `id`; && \n é", "-t", "3", "--", ""]
    with parse_target(spec) as t:
        for name, text in scripts.items():
            t.write_file(f"{dest}/scripts/{name}", text.encode(), mode=0o755)
        # run as a phone runs them: through their #!/system/bin/sh line (mksh here)
        got = t.capture([f"{dest}/scripts/run-completion.sh", *args], env={"M": "a b.gguf"})
        tool = t.capture([f"{dest}/scripts/run-tool.sh", "test-backend-ops", "-o", "MUL_MAT"])
    assert got.rc == 0, got.err
    report = decode_echo(got.stdout)
    argv = report["argv"]
    assert argv[0] == "./bin/llama-completion" and argv[-len(args):] == args
    assert argv[argv.index("-m") + 1] == "/data/local/tmp/gguf/a b.gguf"
    assert argv.count("-t") == 1 and argv[argv.index("--device") + 1] == "HTP0,HTP1,HTP2,HTP3"
    assert report["env"]["GGML_HEXAGON_DEVICES"] == "4" and report["cwd"] == dest
    assert decode_echo(tool.stdout)["argv"] == ["./bin/test-backend-ops", "-b", "HTP0", "-o", "MUL_MAT"]


def test_bench_matrix_over_two_phones(cli, tmp_path, phones, fake_llama_bench, argv_echo):
    from tests.test_bench import expected_ts

    specs = []
    for soc in ("SM8650", "SM8750"):
        dev = phones[soc]
        dest = "/data/local/tmp/hb-bench/llama.cpp"
        populate(f"adb:{dev.serial}", dest, {"llama-bench": fake_llama_bench})
        with parse_target(f"adb:{dev.serial}") as t:
            t.write_file("/data/local/tmp/hb-bench/gguf/m q4.gguf", b"GGUF")
        specs += ["-t", f"adb:{dev.serial}"]
    out = tmp_path / "bench"
    r = cli("--json", "bench", *specs, "--dest", "/data/local/tmp/hb-bench/llama.cpp", "--models-dir",
            "/data/local/tmp/hb-bench/gguf", "--ndev", "1,2", "--ubatch", "256,512", "--threads", "4",
            "--model", "m q4.gguf", "--repeat", "3", "--out", str(out))
    assert r.rc == 0, r.err
    results = r.json["results"]
    assert len(results) == 2 * 2 * 2 * 2  # phones × ndev × ubatch × (pp, tg)
    assert {s["target"] for s in results} == {specs[1], specs[3]}
    for s in results:
        assert s["n"] == 3
        assert s["median_ts"] == pytest.approx(expected_ts(s["kind"], s["ndev"], s["n_ubatch"], s["n_threads"]))
    assert (out / "results.png").stat().st_size > 10_000
    assert (out / "results.csv").read_text().count("\n") == len(results) + 1


def test_bench_checks_every_configuration_before_running(cli, tmp_path, phones, fake_llama_bench):
    dev = phones["SM8550"]  # v73: one session only
    dest = "/data/local/tmp/hb-bench-v73/llama.cpp"
    populate(f"adb:{dev.serial}", dest, {"llama-bench": fake_llama_bench})
    out = tmp_path / "bench"
    r = cli("bench", "-t", f"adb:{dev.serial}", "--dest", dest, "--ndev", "1,2", "--model", "m.gguf",
            "--out", str(out))
    assert r.rc == 2 and "below v75" in r.err
    assert not out.exists()
    with parse_target(f"adb:{dev.serial}") as t:
        assert t.read_file(f"{dest}/.fake-bench-count") is None  # llama-bench never ran
