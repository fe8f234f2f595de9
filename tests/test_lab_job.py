"""The content of a lab job without a lab: the tarball `hexbuild lab run` makes, its job script
run by this machine's /bin/sh in a directory of its own (as LAVA's test shell runs it on a
board), the output read back as the job's log, and the local command's document made from it.

The programs are stand-ins built here (argv_echo, fake_llama_bench.sh), and LAVA's
``lava-test-case`` is a script that prints LAVA's own signal line; the same jobs run on a real
LAVA server in tests/test_lab.py (by default: HEXBUILD_TEST_LAVA=0 opts out)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hexbuild import errors
from hexbuild.errors import UsageError
from hexbuild.lab import bundle, job as jobmod, joblog, outcome, plan as lab_plan, session
from hexbuild.lab.board import INSTALL, JOB_DIR
from tests.infra.runner_tools import decode_echo

WEIRD = ["plain", "two words", "it's", '"dq"', "$(touch /tmp/pwned-lab)", "`id`", "a\nb", "tab\there", "ünï", "*", "",
         "--", "-n", "$HOME", "back\\slash", "semi;colon", "#hash"]

LAVA_TEST_CASE = """#!/bin/sh
# LAVA's lava-test-case, as far as a job script uses it: the signal line, and a record
name=$1; shift
result= measurement= units=
while [ $# -gt 0 ]; do
  case $1 in --result) result=$2; shift ;; --measurement) measurement=$2; shift ;; --units) units=$2; shift ;; esac
  shift
done
echo "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=$name RESULT=$result UNITS=$units MEASUREMENT=$measurement>"
printf '%s\\t%s\\t%s\\t%s\\n' "$name" "$result" "$measurement" "$units" >> "$LAB_CASES"
"""


@pytest.fixture
def package(tmp_path, argv_echo, fake_llama_bench) -> Path:
    """A Linux package whose programs are this machine's stand-ins (the job script is POSIX sh:
    it runs the same here as on a board)."""
    root = tmp_path / "pkg" / "llama.cpp"
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    for name in ("llama-completion", "test-backend-ops", "llama-perplexity"):
        shutil.copy(argv_echo, root / "bin" / name)
    shutil.copy(fake_llama_bench, root / "bin" / "llama-bench")
    (root / "lib" / "libggml-hexagon.so").write_bytes(b"\x7fELF stand-in")
    (root / "lib" / "libggml-htp-v73.so").write_bytes(b"\x7fELF stand-in")
    (root / "manifest.json").write_text(json.dumps({"os": "linux", "schema": 1, "htp_versions": ["v73"]}))
    return root


def run_job(tmp_path: Path, req: lab_plan.LabRequest, *, exit_code: int = 0):
    """Plan, pack, unpack in a job directory, run the script; (request, log text, test cases)."""
    planned = lab_plan.plan(req, "lava:ssh")
    try:
        opts = session.LabOptions(url="http://127.0.0.1:1", token="t", device_type="ssh")
        request = jobmod.request_doc(req.kind, planned.steps, args=session._args(req, opts, planned))
        script = jobmod.script("test", planned.steps, request, download=planned.download)
        tarball = bundle.make(session.tarball_members(planned, script, "test"), where=tmp_path / "cache")
    finally:
        planned.close()
    jobdir = tmp_path / "lava-7" / "0" / "tests" / "0_hexbuild"
    jobdir.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(jobdir, filter="tar")
    tools = tmp_path / "lava-bin"
    tools.mkdir(exist_ok=True)
    (tools / "lava-test-case").write_text(LAVA_TEST_CASE)
    (tools / "lava-test-case").chmod(0o755)
    cases = tmp_path / "cases.tsv"
    env = {"PATH": f"{tools}:/usr/bin:/bin", "LAB_CASES": str(cases), "GGML_HEXAGON_ECHO_EXIT": str(exit_code),
           "HOME": str(tmp_path)}
    cp = subprocess.run(["sh", f"./{jobmod.SCRIPT}"], cwd=jobdir, capture_output=True, env=env, timeout=120)
    assert cp.returncode == 0, cp.stderr.decode()
    t0 = datetime(2026, 11, 25, tzinfo=timezone.utc)
    log = "".join(f"- {lava_line((t0 + timedelta(milliseconds=i)).isoformat(), line)}\n"
                  for i, line in enumerate(cp.stdout.decode("utf-8", "replace").split("\n")))
    tests = [{"name": n, "result": r, "measurement": m, "unit": u, "metadata": f"definition: 0_hexbuild\ncase: {n}\n"}
             for n, r, m, u in (line.split("\t") for line in cases.read_text().splitlines())] if cases.exists() else []
    return request, log, tests, jobdir


def lava_line(dt: str, line: str) -> str:
    """One line of the board's output as LAVA logs it: the escape character removed
    (lava_dispatcher's ShellLogger), written by PyYAML as lava_common.log's ``dump`` calls it."""
    import yaml

    data = {"dt": dt, "lvl": "target", "msg": line.replace("\x1b", "")}
    return yaml.safe_dump(data, default_flow_style=True, default_style='"', width=10**5)[:-1]


def lava_timeout_problems(job: dict) -> list[str]:
    """LAVA's own rule (lava_common's check_job_timeouts): timeouts.action, timeouts.connection
    and every action's timeout at most the job's; a problem is named as LAVA names it."""
    def seconds(t: dict) -> int:
        return t.get("days", 0) * 86400 + t.get("hours", 0) * 3600 + t.get("minutes", 0) * 60 + t.get("seconds", 0)

    limit = seconds(job["timeouts"]["job"])
    problems = [f"Global timeout is larger than job timeout @ ['timeouts', '{k}']"
                for k in ("action", "connection") if k in job["timeouts"] and seconds(job["timeouts"][k]) > limit]
    for i, action in enumerate(job["actions"]):
        (kind, body), = action.items()
        if "timeout" in body and seconds(body["timeout"]) > limit:
            problems.append(f"{kind.capitalize()} timeout is larger than job timeout @ ['actions', {i}]")
    return problems


@pytest.mark.parametrize("timeout", [90, 90.5, 91, 119, 120, 179, 300, 599, 1800, 3600, 7200, 86400])
def test_every_timeout_the_cli_accepts_makes_a_job_lava_validates(timeout):
    """`lab run --timeout S`: the connection, deploy, boot and test timeouts are shared out of the
    job's (issue 38: --timeout 90 gave a connection timeout of 2 minutes, which LAVA refused)."""
    from hexbuild.lab import definition

    spec = definition.JobSpec(device_type="rb3gen2", artifact_url="http://x/t.tar.gz", name="t", timeout_s=timeout)
    job = json.loads(definition.dump(definition.board_job(spec)))
    assert lava_timeout_problems(job) == []
    stages = [a[k]["timeout"]["seconds"] for a in job["actions"] for k in a]
    assert sum(stages) == int(timeout) and min(stages) >= definition.STAGE_MIN_S
    assert job["timeouts"]["job"] == {"seconds": int(timeout)}
    if timeout >= 3600:  # a long job keeps the stages' own limits
        assert stages[:2] == [600, 300] and job["timeouts"]["connection"] == {"seconds": 120}


def test_a_timeout_too_short_to_share_is_refused_before_anything_is_sent(cli, tmp_path, package, monkeypatch):
    monkeypatch.setenv("HEXBUILD_LAB_TOKEN", "0123456789abcdef")
    r = cli("lab", "run", str(package), "--lab", "http://127.0.0.1:9", "--device-type", "rb3gen2",
            "--serve-artifacts", "127.0.0.1:0", "--timeout", "60", "--", "completion")
    assert r.rc == errors.USAGE and r.out == ""
    assert r.err.splitlines() == ["hexbuild: error: --timeout 60 is too short for a lab job: the minimum is 90 s "
                                  "(30 s each for LAVA's deploy, boot and test)"]
    assert not (tmp_path / "hexbuild-results").exists()


def test_the_lava_tests_run_unless_the_run_opts_out():
    """tests/test_lab.py runs by default, in scripts/test.sh and so in CI (issue 38: it was opt-in
    and never ran there); it skips only when opted out or where a lab cannot run."""
    from tests.infra.lava import skip_reason

    assert skip_reason({}, euid=0) is None and skip_reason({"HEXBUILD_TEST_LAVA": "1"}, euid=0) is None
    assert "opted out (HEXBUILD_TEST_LAVA=0)" in skip_reason({"HEXBUILD_TEST_LAVA": "0"}, euid=0)
    assert "needs root" in skip_reason({}, euid=1000)
    setup = (Path(__file__).resolve().parent.parent / "scripts" / "setup-test-env.sh").read_text()
    assert '"${HEXBUILD_TEST_LAVA:-1}" != 0' in setup  # the setup builds the lab's chroot unless told not to


def test_words_are_quoted_around_the_job_directory():
    for word in WEIRD + [f"{JOB_DIR}/llama.cpp/lib", f"x{JOB_DIR}y{JOB_DIR}", JOB_DIR]:
        cp = subprocess.run(["sh", "-c", f"job='/lava 7/$(x)'; printf '%s' {jobmod.sh_word(word)}"],
                            capture_output=True, timeout=10)
        assert cp.stdout.decode() == word.replace(JOB_DIR, "/lava 7/$(x)")
    assert not Path("/tmp/pwned-lab").exists()


def test_a_completion_job_runs_the_rendered_command_exactly(tmp_path, package):
    req = lab_plan.LabRequest(kind="completion", package=package, extra=WEIRD)
    request, log, tests, jobdir = run_job(tmp_path, req)
    steps = request["steps"]
    assert [s["name"] for s in steps] == ["run"] and steps[0]["cwd"] == INSTALL
    parsed = joblog.parse(log)
    assert parsed.job_dir == str(jobdir) and parsed.request == json.loads(json.dumps(request))
    echo = decode_echo(parsed.steps["run"].output)
    # the same argv `hexbuild run completion` renders, the user's words exactly at the end
    assert echo["argv"][0] == "./bin/llama-completion" and echo["argv"][-len(WEIRD):] == WEIRD
    assert echo["argv"][1:-len(WEIRD)] == steps[0]["argv"][1:-len(WEIRD)]
    assert echo["cwd"] == str(jobdir / "llama.cpp")
    assert echo["env"]["LD_LIBRARY_PATH"] == str(jobdir / "llama.cpp" / "lib")
    assert not Path("/tmp/pwned-lab").exists()
    assert tests == [{"name": "run", "result": "pass", "measurement": "0", "unit": "exit-code",
                      "metadata": "definition: 0_hexbuild\ncase: run\n"}]
    doc, error, human = outcome.map_job(request, parsed, tests, spec="lava:board1", results_dir=tmp_path / "res",
                                        stem="job7")
    assert error is None and doc["exit_code"] == 0 and doc["target"] == "lava:board1"
    assert doc["cwd"] == str(jobdir / "llama.cpp") and doc["argv"][-len(WEIRD):] == WEIRD
    assert set(doc) >= {"target", "tool", "argv", "env", "cwd", "exit_code", "duration_s", "log", "results", "dispatch"}
    assert Path(doc["log"]).read_bytes() == parsed.steps["run"].output
    assert "argv_echo" in human


def test_any_character_the_program_prints_is_read_back_from_the_log(tmp_path, package):
    # PyYAML writes these as escapes JSON does not know (\\_ \\a \\L \\N \\x01 \\0 \\v \\U0001F600…):
    # a line read as JSON alone was dropped, and with it a step marker or a perf line
    odd = ["nb\xa0sp bell\x07 ls\u2028 nel\x85 ps\u2029", "ctl\x01\x02\x7f vt\x0b ff\x0c",
           "esc\x1b[0m gone", "emoji \U0001F600 \\e \\_ not escapes", 'q"uote\\ \ufffd']
    program = package / "bin" / "llama-completion"
    program.write_bytes(b"#!/bin/sh\nprintf '%s\\n' " + b" ".join(
        b"'" + line.encode() + b"'" for line in odd) + b" \\\n  'llama_perf_context_print:        eval time ="
        b"     257.56 ms /     3 runs   (   85.85 ms per token,    11.65 tokens per second)'\n")
    request, log, tests, _ = run_job(tmp_path, lab_plan.LabRequest(kind="completion", package=package))
    assert "\\_" in log and "\\L" in log and "\\x01" in log  # the escapes are there to read
    parsed = joblog.parse(log)
    assert parsed.steps["run"].lines[:-1] == [line.replace("\x1b", "") for line in odd]
    assert parsed.steps["run"].exit_code == 0
    doc, error, _ = outcome.map_job(request, parsed, tests, spec="lava:b", results_dir=tmp_path, stem="j")
    assert doc["results"]["perf"]["eval"]["tokens_per_second"] == 11.65
    # a NUL cannot be a shell word; and a line that is no YAML LAVA writes is left out, not misread
    assert [e["msg"] for e in joblog.entries("- " + lava_line("t", "a\x00b") + '\n- {"msg": "\\q"}\n')] == ["a\x00b"]


def test_the_program_exit_code_is_the_test_case_measurement(tmp_path, package):
    req = lab_plan.LabRequest(kind="completion", package=package, extra=["-n", "4"])
    request, log, tests, _ = run_job(tmp_path, req, exit_code=3)
    assert tests[0]["result"] == "fail" and tests[0]["measurement"] == "3"
    doc, error, _ = outcome.map_job(request, joblog.parse(log), tests, spec="lava:b", results_dir=tmp_path, stem="j")
    assert doc["exit_code"] == 3 and error.exit_code == 3
    # the test case is what the lab recorded: it wins over the log's own marker
    tests[0]["measurement"] = "5.0000000000"
    doc, error, _ = outcome.map_job(request, joblog.parse(log), tests, spec="lava:b", results_dir=tmp_path, stem="k")
    assert doc["exit_code"] == 5


def test_a_step_the_job_never_reached_is_no_result(tmp_path, package):
    req = lab_plan.LabRequest(kind="completion", package=package)
    request, log, tests, _ = run_job(tmp_path, req)
    cut = "".join(line + "\n" for line in log.splitlines() if "hexbuild-step" not in line and "argv" not in line)
    doc, error, _ = outcome.map_job(request, joblog.parse(cut), [], spec="lava:b", results_dir=tmp_path, stem="j")
    assert doc["exit_code"] is None and "never ran run" in doc["error"] and error.exit_code == 8


def test_a_bench_job_gives_the_bench_document_and_history_rows(tmp_path, package, tiny_gguf):
    db = tmp_path / "bench.sqlite"
    req = lab_plan.LabRequest(kind="bench", package=package, model=str(tiny_gguf), ndev=2, extra=["-p", "64", "-n", "16"])
    planned = lab_plan.plan(req, "lava:ssh")
    planned.close()
    assert (f"gguf/{tiny_gguf.name}") in planned.files
    request, log, tests, jobdir = run_job(tmp_path, req)
    request["args"]["db"] = str(db)
    names = {t["name"]: t for t in tests}
    assert names["bench"]["result"] == "pass"
    assert names["bench-pp64"]["unit"] == "t/s" and float(names["bench-pp64"]["measurement"]) > 0
    assert "bench-tg16" in names
    doc, error, human = outcome.map_job(request, joblog.parse(log), tests, spec="lava:board2",
                                        results_dir=tmp_path / "res", stem="job7")
    assert error is None, error
    assert doc["schema"] == "hexbuild.bench/1" and doc["db_rows"] == 2
    assert {r["test"] for r in doc["results"]} == {"pp64", "tg16"} and doc["results"][0]["target"] == "lava:board2"
    from hexbuild.bench import history

    rows = history.select(db)
    assert {r["device_serial"] for r in rows} == {"board2"} and {r["device_soc"] for r in rows} == {"ssh"}
    assert rows[0]["model_sha256"] and rows[0]["sessions"] == 2
    assert float(names["bench-pp64"]["measurement"]) == pytest.approx(
        next(r["median_ts"] for r in doc["results"] if r["test"] == "pp64"), rel=1e-3)
    assert "pp64" in human


def test_a_ppl_job_with_a_failed_run_is_a_failed_test(tmp_path, package, tiny_gguf):
    """test-ppl's runs exit 0 but print no perplexity: the test fails (13), as locally."""
    from hexbuild.checks.ppl import PplRequest

    text = tmp_path / "wiki.txt"
    text.write_text("hello world " * 50)
    req = lab_plan.LabRequest(kind="ppl", package=package, model=str(tiny_gguf),
                              ppl=PplRequest(target="lab", model="", text=str(text), chunks=2))
    request, log, tests, jobdir = run_job(tmp_path, req)
    assert [t["name"] for t in tests] == ["ppl-htp", "ppl-cpu"]
    echo = decode_echo(joblog.parse(log).steps["ppl-cpu"].output)
    assert echo["env"]["GGML_HEXAGON_NDEV"] == "0" and "--device" in echo["argv"]
    shipped = Path(echo["argv"][echo["argv"].index("-f") + 1])
    assert shipped.read_text() == text.read_text() and str(shipped).startswith(str(jobdir))
    doc, error, _ = outcome.map_job(request, joblog.parse(log), tests, spec="lava:b", results_dir=tmp_path / "r",
                                    stem="j")
    assert doc["schema"] == "hexbuild.test-ppl/1" and not doc["ok"] and "gave no perplexity" in doc["reason"]
    assert isinstance(error, errors.TestsFailed) and error.exit_code == 13


def test_an_ops_job_runs_each_session(tmp_path, package):
    from hexbuild.checks.ops import OpsRequest

    req = lab_plan.LabRequest(kind="ops", package=package, ops=OpsRequest(target="lab", ndev=2, ops=["MUL_MAT"]))
    request, log, tests, _ = run_job(tmp_path, req)
    assert [s["session"] for s in request["steps"]] == ["HTP0", "HTP1"]
    echo = decode_echo(joblog.parse(log).steps["ops-HTP1"].output)
    assert echo["argv"][echo["argv"].index("-b") + 1] == "HTP1"
    doc, error, _ = outcome.map_job(request, joblog.parse(log), tests, spec="lava:b", results_dir=tmp_path / "r",
                                    stem="j")
    assert doc["schema"] == "hexbuild.test-ops/1" and [d["device"] for d in doc["devices"]] == ["HTP0", "HTP1"]
    assert not doc["ok"] and isinstance(error, errors.TestsFailed)  # argv_echo tests nothing


def test_the_tarball_is_reproducible_and_holds_the_install(tmp_path, package):
    req = lab_plan.LabRequest(kind="completion", package=package)

    def make(where):
        planned = lab_plan.plan(req, "lava:ssh")
        try:
            request = jobmod.request_doc("completion", planned.steps, args={})
            return bundle.make(session.tarball_members(planned, jobmod.script("t", planned.steps, request), "t"), where=where)
        finally:
            planned.close()

    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    assert a.name == b.name and a.read_bytes() == b.read_bytes()
    with tarfile.open(a) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("llama.cpp/.hexbuild/manifest.json").read())
        assert tar.getmember("llama.cpp/bin/llama-completion").mode == 0o755
        assert tar.getmember(jobmod.SCRIPT).mode == 0o755
    assert {jobmod.TESTDEF, jobmod.SCRIPT, "llama.cpp/bin/llama-completion"} <= set(names)
    assert {f["path"] for f in manifest["files"]} >= {"bin/llama-completion", "lib/libggml-hexagon.so"}


def test_the_artifact_server_serves_one_secret_path(tmp_path):
    import urllib.error
    import urllib.request

    f = tmp_path / "hexbuild-job-x.tar"
    f.write_bytes(b"tarball")
    server = bundle.ArtifactServer(f, "127.0.0.1", 0)
    try:
        assert urllib.request.urlopen(server.url, timeout=5).read() == b"tarball"
        for wrong in (f"http://127.0.0.1:{server.port}/{f.name}", f"http://127.0.0.1:{server.port}/"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(wrong, timeout=5)
            assert e.value.code == 404
    finally:
        server.close()


def test_publish_runs_the_command_without_a_shell(tmp_path):
    f = tmp_path / "hexbuild-job-abc.tar"
    f.write_bytes(b"x")
    dest = tmp_path / "published dir"
    dest.mkdir()
    url = bundle.publish(f, f"cp {{path}} '{dest}/{{name}}'", "https://example.invalid/{name}")
    assert url == "https://example.invalid/hexbuild-job-abc.tar" and (dest / f.name).read_bytes() == b"x"
    with pytest.raises(Exception) as e:
        bundle.publish(f, "false", "https://x/{name}")
    assert "exited 1" in str(e.value)
    with pytest.raises(UsageError, match="unknown field"):
        bundle.publish(f, "true", "https://x/{bucket}")


def test_an_android_package_is_not_a_board_job(tmp_path, package, cli):
    """Refused from its manifest before the lab is contacted, with a hint naming only what exists
    (it named --docker-image, which lab run does not have: 'No such option')."""
    import tarfile

    (package / "manifest.json").write_text(json.dumps({"os": "android"}))
    with pytest.raises(UsageError, match="Android package") as e:
        lab_plan.plan(lab_plan.LabRequest(kind="completion", package=package), "lava:ssh")
    tarball = tmp_path / "android.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(package, arcname="llama.cpp")
    for where in (package, tarball):
        with pytest.raises(UsageError, match="Android package") as early:
            lab_plan.check_package(where)
        assert early.value.hint == e.value.hint
    import re

    from hexbuild.cli.main import build_cli
    from tests import doccheck

    named = re.findall(r"hexbuild ([^()]+)", e.value.hint)
    assert len(named) == 2 and all(doccheck.check_argv(build_cli(), c.split()) == [] for c in named), named


def test_a_model_that_is_nowhere_is_refused(tmp_path, package):
    with pytest.raises(UsageError, match="model not found"):
        lab_plan.plan(lab_plan.LabRequest(kind="completion", package=package, model="nope.gguf"), "lava:ssh")
    planned = lab_plan.plan(lab_plan.LabRequest(kind="completion", package=package,
                                                model="http://127.0.0.1:9/m/tiny.gguf"), "lava:ssh")
    planned.close()
    assert planned.download["file"].endswith("/gguf/tiny.gguf") and "-m" in planned.steps[0].invocation.argv


def test_environment_names_stay_shell_names(tmp_path, package):
    assert os.path.exists(package)
    req = lab_plan.LabRequest(kind="completion", package=package, knobs=[("nhvx", "4; rm -rf /")])
    request, log, tests, _ = run_job(tmp_path, req)
    echo = decode_echo(joblog.parse(log).steps["run"].output)
    assert echo["env"]["GGML_HEXAGON_NHVX"] == "4; rm -rf /"


def test_a_local_prompt_file_travels_with_the_job(tmp_path, package):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Once upon a time, ünï\n")
    req = lab_plan.LabRequest(kind="completion", package=package, prompt_file=str(prompt))
    request, log, tests, jobdir = run_job(tmp_path, req)
    argv = decode_echo(joblog.parse(log).steps["run"].output)["argv"]
    shipped = Path(argv[argv.index("-f") + 1])
    assert str(shipped).startswith(str(jobdir / "llama.cpp" / ".hexbuild" / "prompts"))
    assert shipped.read_text() == prompt.read_text()
