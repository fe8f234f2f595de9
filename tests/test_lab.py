"""`hexbuild lab` against a real LAVA 2026.10 (server, scheduler, worker: tests/infra/lava.py) whose
boards are virtual trixie boards over SSH (their AArch64 programs under qemu), running the real open-toolchain package
(``real_linux_package``) on a tiny real model. They run by default; HEXBUILD_TEST_LAVA=0
scripts/test.sh leaves them out for a quick local run (the fixture skips, saying so).

Every job here is a real LAVA job: validated, scheduled, deployed over SSH/SFTP, its test shell
run on the board, its results and log read back over REST v0.2."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests


PROMPT = "The quick brown fox jumps over the lazy dog"
# hexbuild run's document; the open toolchain's package adds the note that it runs on the CPU only
RUN_KEYS = {"target", "tool", "argv", "env", "cwd", "exit_code", "duration_s", "log", "results", "dispatch", "roofline",
            "warnings", "notes"}


@pytest.fixture
def lab(lava_lab, monkeypatch, tmp_path):
    for k, v in lava_lab.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.chdir(tmp_path)
    return lava_lab


def api(lab, path: str) -> dict:
    r = requests.get(f"{lab.url}/api/v0.2/{path}", headers={"Authorization": f"Token {lab.token}"}, timeout=10)
    r.raise_for_status()
    return r.json()


def lab_run(cli, tmp_path, package, *words, extra_opts=(), json_out=True):
    argv = (["--json"] if json_out else []) + ["lab", "run", str(package), "--serve-artifacts", "127.0.0.1:0",
                                               "--results-dir", str(tmp_path / "res"), *extra_opts, "--", *words]
    return cli(*argv)


def perf_of(doc: dict) -> dict:
    """The run's perf section; when there is none, the failure shows what the job's log held."""
    perf = (doc.get("results") or {}).get("perf")
    if not perf:
        step = Path(doc["log"]).read_text(errors="replace") if doc.get("log") else "(no step log)"
        lava = doc.get("job", {}).get("lava_log")
        tail = "".join(Path(lava).read_text(errors="replace").splitlines(True)[-60:]) if lava else "(no LAVA log)"
        pytest.fail(f"no perf section in job {doc.get('job', {}).get('id')}'s results\n--- the step's output:\n"
                    f"{step}\n--- the end of the LAVA log:\n{tail}")
    return perf


def docs(out: str) -> list[dict]:
    dec, i, found = json.JSONDecoder(), 0, []
    while i < len(out.strip()):
        doc, i = dec.raw_decode(out, i)
        found.append(doc)
        while i < len(out) and out[i].isspace():
            i += 1
    return found


def test_a_completion_job_is_the_document_of_hexbuild_run(cli, lab, tmp_path, real_linux_package, tiny_gguf,
                                                          monkeypatch):
    r = lab_run(cli, tmp_path, real_linux_package, "completion", "-t", "2", "-n", "16", "--ignore-eos", "-p", PROMPT,
                extra_opts=["--model", str(tiny_gguf), "-v"])
    assert r.rc == 0, r.err
    doc = r.json
    job = doc["job"]
    assert job["health"] == "Complete" and job["device"] in ("board1", "board2") and doc["job_url"] == job["url"]
    assert doc["target"] == f"lava:{job['device']}" and doc["cwd"].startswith(f"/lava-{job['id']}/")
    assert set(doc) - {"job", "job_url"} == RUN_KEYS
    assert doc["exit_code"] == 0 and doc["argv"][0] == "./bin/llama-completion"
    perf = perf_of(doc)
    assert perf["eval"]["runs"] == 15 and perf["eval"]["tokens_per_second"] > 0
    assert doc["dispatch"]["cpu_only"] is True  # the open toolchain's package has no NPU libraries
    assert [n for n in doc["notes"] if "runs on the CPU only" in n] and doc["warnings"] == []  # a note: chosen
    # the lab's own record of it: one test case, the exit code its measurement
    cases = {c["name"]: c for c in api(lab, f"jobs/{job['id']}/tests/?limit=200")["results"]}
    assert cases["run"]["result"] == "pass" and float(cases["run"]["measurement"]) == 0
    # the same request on this machine (qemu:) gives the same document and the same command
    spec = f"qemu:{tmp_path}/inst"
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", "/usr/aarch64-linux-gnu")
    assert cli("deploy", str(real_linux_package), "-t", spec, "--model", str(tiny_gguf), "--models-dir",
               str(tmp_path / "models")).rc == 0
    local = cli("--json", "-q", "run", "completion", "-t", spec, "--models-dir", str(tmp_path / "models"), "--model",
                tiny_gguf.name, "--results-dir", str(tmp_path / "local"), "--", "-t", "2", "-n", "16", "--ignore-eos",
                "-p", PROMPT)
    assert local.rc == 0, local.err
    assert set(local.json) == set(doc) - {"job", "job_url"}
    assert set(local.json["results"]) == set(doc["results"]) and set(local.json["dispatch"]) == set(doc["dispatch"])
    # qemu: fits the revision's CPU mask to this machine (2 cores: no mask); a lab board keeps it
    assert model_name(without_cpu_mask(doc["argv"])) == model_name(without_cpu_mask(local.json["argv"]))
    assert set(doc["env"]) == set(local.json["env"])
    # the token reaches no output and no file hexbuild wrote, even with -v
    assert lab.token not in r.out + r.err
    for f in (tmp_path / "res").rglob("*"):
        if f.is_file():
            assert lab.token.encode() not in f.read_bytes(), f


def test_a_bench_job_adds_the_boards_rows_to_the_history(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    db = tmp_path / "bench.sqlite"
    r = lab_run(cli, tmp_path, real_linux_package, "bench", "-t", "2", "-p", "32", "-n", "8", "-r", "1",
                extra_opts=["--model", str(tiny_gguf), "--db", str(db)])
    assert r.rc == 0, r.err
    doc = r.json
    assert doc["schema"] == "hexbuild.bench/1" and doc["db_rows"] == 2 and doc["job"]["health"] == "Complete"
    assert {s["test"] for s in doc["results"]} == {"pp32", "tg8"}
    from hexbuild.bench import history

    rows = history.select(db)
    assert {r["device_serial"] for r in rows} == {doc["job"]["device"]} and rows[0]["device_soc"] == "ssh"
    assert rows[0]["revision"] and rows[0]["package_sha256"] and rows[0]["model_sha256"]
    cases = {c["name"]: c for c in api(lab, f"jobs/{doc['job']['id']}/tests/?limit=200")["results"]}
    pp = next(s for s in doc["results"] if s["test"] == "pp32")
    assert cases["bench-pp32"]["unit"] == "t/s"
    assert float(cases["bench-pp32"]["measurement"]) == pytest.approx(pp["median_ts"], rel=1e-3)
    # the same bench again, on both boards (so one of them is not the baseline's), gated against
    # it: the boards of a type are one population, and the same build is no regression
    r2 = lab_run(cli, tmp_path, real_linux_package, "bench", "-t", "2", "-p", "32", "-n", "8", "-r", "1",
                 extra_opts=["--model", str(tiny_gguf), "--db", str(db), "--baseline", doc["bench_id"],
                             "--fail-below", "0.01", "--devices", "2"])
    assert r2.rc == 0, r2.err
    assert {json.loads(line)["job"]["device"] for line in r2.out.splitlines()} == {"board1", "board2"}


def test_a_failed_test_in_a_complete_job_exits_13(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    text = tmp_path / "short.txt"
    text.write_text("hello world")  # far fewer tokens than one chunk needs: llama-perplexity fails
    r = lab_run(cli, tmp_path, real_linux_package, "test", "ppl", "--text", str(text), "--chunks", "1", "-c", "128",
                extra_opts=["--model", str(tiny_gguf)])
    assert r.rc == 13, r.err
    doc = r.json
    assert doc["job"]["health"] == "Complete" and doc["schema"] == "hexbuild.test-ppl/1" and not doc["ok"]
    assert "gave no perplexity" in doc["reason"]
    # llama-perplexity exits 0 without a perplexity: LAVA's job and even its test cases pass
    cases = {c["name"]: c for c in api(lab, f"jobs/{doc['job']['id']}/tests/?limit=200")["results"]}
    assert cases["ppl-htp"]["result"] == "pass" and float(cases["ppl-cpu"]["measurement"]) == 0
    assert r.err.count("hexbuild: error:") == 1


def test_a_refused_token_is_one_line_and_16(cli, lab, tmp_path, real_linux_package, monkeypatch):
    monkeypatch.setenv("HEXBUILD_LAB_TOKEN", "not-" + lab.token)
    r = lab_run(cli, tmp_path, real_linux_package, "completion", json_out=False)
    assert r.rc == 16
    lines = [l for l in r.err.splitlines() if l.startswith(("hexbuild: error:", "hint:"))]
    assert len(lines) == 2 and "the token was refused" in lines[0] and "Traceback" not in r.err
    assert lab.token not in r.err


@pytest.mark.parametrize("timeout", [90, 119, 300, 3600, 86400])
def test_the_lab_validates_the_job_of_every_timeout_the_cli_accepts(lab, timeout):
    """Issue 38: `--timeout 90` made a job whose connection timeout (2 minutes) LAVA refused."""
    from hexbuild.lab import definition
    from hexbuild.lab.client import LavaClient

    spec = definition.JobSpec(device_type="ssh", artifact_url=f"{lab.url}/nowhere.tar", name="timeouts",
                              timeout_s=timeout)
    assert LavaClient(lab.url, lab.token).validate(definition.dump(definition.board_job(spec))) is None


def test_a_job_at_the_shortest_timeout_runs(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    """The minimum (90 s: 30 s each for the deploy, the boot and the test) is enough for a job."""
    r = lab_run(cli, tmp_path, real_linux_package, "completion", "-n", "4",
                extra_opts=["--model", str(tiny_gguf), "--timeout", "90"])
    assert r.rc == 0, r.err
    job = api(lab, f"jobs/{r.json['job']['id']}/")
    assert job["health"] == "Complete"
    import yaml

    timeouts = yaml.safe_load(job["definition"])["timeouts"]  # the job as LAVA keeps it
    assert timeouts["job"] == {"seconds": 90} and timeouts["connection"] == {"seconds": 30}


def test_a_job_no_board_takes_hits_the_queue_timeout(cli, lab, tmp_path, real_linux_package):
    r = lab_run(cli, tmp_path, real_linux_package, "completion", "-n", "4",
                extra_opts=["--device-type", lab.queue_type, "--queue-timeout", "4"])
    assert r.rc == 16, r.err
    assert "waited 4s for a ssh-queue board and none took it" in r.err
    doc = r.json
    assert doc["job"]["device_type"] == lab.queue_type
    deadline = time.monotonic() + 30
    while api(lab, f"jobs/{doc['job']['id']}/")["health"] != "Canceled" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert api(lab, f"jobs/{doc['job']['id']}/")["health"] == "Canceled"  # not left to run some day


def test_devices_2_runs_on_two_boards_at_once(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    r = lab_run(cli, tmp_path, real_linux_package, "completion", "-t", "2", "-n", "8", "-p", PROMPT,
                extra_opts=["--model", str(tiny_gguf), "--devices", "2"])
    assert r.rc == 0, r.err
    found = [json.loads(line) for line in r.out.splitlines()]  # one document per job, one per line
    assert len(found) == 2 and {d["job"]["device"] for d in found} == {"board1", "board2"}
    assert all(d["exit_code"] == 0 for d in found)
    a, b = (sorted((d["job"]["start_time"], d["job"]["end_time"]) for d in found))
    assert b[0] < a[1]  # at once: the second started before the first ended


def test_published_tarball_and_a_model_the_board_downloads(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    www = tmp_path / "www"
    www.mkdir()
    (www / tiny_gguf.name).write_bytes(tiny_gguf.read_bytes())
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(www), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        r = cli("--json", "lab", "run", str(real_linux_package), "--publish", f"cp {{path}} {www}/{{name}}",
                "--artifact-url", base + "/{name}", "--model", f"{base}/{tiny_gguf.name}",
                "--results-dir", str(tmp_path / "res"), "--", "completion", "-t", "2", "-n", "4", "-p", PROMPT)
    finally:
        httpd.shutdown()
    assert r.rc == 0, r.err
    assert r.json["exit_code"] == 0 and f"/gguf/{tiny_gguf.name}" in " ".join(r.json["argv"])
    cases = {c["name"]: c for c in api(lab, f"jobs/{r.json['job']['id']}/tests/?limit=200")["results"]}
    assert cases["download-model"]["result"] == "pass"


def test_status_cancel_and_results_of_a_job(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    # the echoed prompt reaches the log as PyYAML escapes JSON does not know (\\_, \\L, \\a)
    prompt = "The quick\xa0brown fox\u2028jumps over the lazy\x07 dog"
    r = lab_run(cli, tmp_path, real_linux_package, "completion", "-t", "2", "-n", "4", "-p", prompt,
                extra_opts=["--model", str(tiny_gguf)])
    assert r.rc == 0, r.err
    first = r.json
    assert prompt in Path(first["log"]).read_text(), "the line with the prompt was lost"
    perf = perf_of(first)
    st = cli("--json", "lab", "status", first["job_url"])
    assert st.rc == 0 and st.json["jobs"][0]["health"] == "Complete"
    again = cli("--json", "lab", "results", str(first["job"]["id"]), "--results-dir", str(tmp_path / "again"))
    assert again.rc == 0, again.err
    assert {k: again.json[k] for k in ("argv", "env", "cwd", "exit_code")} == \
        {k: first[k] for k in ("argv", "env", "cwd", "exit_code")}
    assert perf_of(again.json) == perf
    # cancel: a job that waits for a board nobody has
    q = lab_run(cli, tmp_path, real_linux_package, "completion", extra_opts=["--device-type", lab.queue_type,
                                                                             "--queue-timeout", "1"])
    assert q.rc == 16
    c = cli("--json", "lab", "cancel", str(q.json["job"]["id"]))
    assert c.rc == 0 and c.json["jobs"][0]["cancel"] == "sent"
    nf = cli("lab", "status", "999999")
    assert nf.rc == 16 and "no /api/v0.2/jobs/999999/" in nf.err


TIMESTAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


def model_name(argv: list[str]) -> list[str]:
    return [Path(a).name if a.endswith(".gguf") else a for a in argv]


def without_cpu_mask(argv: list[str]) -> list[str]:
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in ("--cpu-mask", "-C", "--cpu-strict"):
            skip = 1
        else:
            out.append(a)
    return out


def test_ctrl_c_cancels_the_submitted_jobs(lab, tmp_path, real_linux_package, tiny_gguf):
    """SIGINT to a real hexbuild process while its job runs on a board: exit 130, and the lab
    cancels the job (it would otherwise generate for minutes)."""
    env = {**os.environ, **lab.env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    p = subprocess.Popen([sys.executable, "-m", "hexbuild", "lab", "run", str(real_linux_package), "--model",
                          str(tiny_gguf), "--serve-artifacts", "127.0.0.1:0", "--results-dir", str(tmp_path / "res"),
                          "--", "completion", "-t", "1", "-n", "100000", "--ignore-eos", "-p", PROMPT],
                         stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    job_id, seen = None, []
    deadline = time.monotonic() + 240
    try:
        for line in p.stderr:
            seen.append(line)
            text = TIMESTAMP.sub("", line)  # stderr is a pipe: every progress line has its time
            if text.startswith("submitted job "):
                job_id = int(text.split()[2].rstrip(":"))
            if job_id and ": Running" in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        time.sleep(3)  # into the generation
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, "".join(seen) + err
    assert f"cancelled job {job_id}" in err and err.strip().endswith("hexbuild: error: interrupted; the lab's jobs were cancelled")
    deadline = time.monotonic() + 90
    while api(lab, f"jobs/{job_id}/")["state"] != "Finished" and time.monotonic() < deadline:
        time.sleep(1)
    assert api(lab, f"jobs/{job_id}/")["health"] == "Canceled"


def test_lava_run_runs_the_job_content_exactly(lab, tmp_path, argv_echo_aarch64):
    """The job script under LAVA's own dispatcher without the server (lava-run): the words of
    the request reach the board's program exactly."""
    from hexbuild.lab import bundle, definition, job as jobmod, joblog, plan as lab_plan, session
    from tests.infra.runner_tools import decode_echo

    weird = ["two words", "it's", "$(id)", "`id`", "a\nb", "ünï", "*", "", "$HOME", "semi;colon"]
    pkg = tmp_path / "pkg" / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (pkg / "bin" / "llama-completion").write_bytes(argv_echo_aarch64.read_bytes())
    (pkg / "bin" / "llama-completion").chmod(0o755)
    (pkg / "manifest.json").write_text(json.dumps({"os": "linux"}))
    req = lab_plan.LabRequest(kind="completion", package=pkg, extra=weird)
    planned = lab_plan.plan(req, "lava:ssh")
    try:
        request = jobmod.request_doc("completion", planned.steps, args={})
        tarball = bundle.make(session.tarball_members(planned, jobmod.script("t", planned.steps, request), "t"),
                              where=tmp_path / "cache")
    finally:
        planned.close()
    server = bundle.ArtifactServer(tarball, "127.0.0.1", 0)
    try:
        job = definition.dump(definition.board_job(definition.JobSpec("ssh", server.url, "lava-run test")))
        device = requests.get(f"{lab.url}/api/v0.2/devices/board1/dictionary/?render=true",
                              headers={"Authorization": f"Token {lab.token}"}, timeout=10).text
        (lab.root / "tmp/job.yaml").write_text(job)
        (lab.root / "tmp/board1.yaml").write_text(device)
        from tests.infra.lava import _in

        done = _in(lab.procs["holder"].pid, lab.merged, ["lava-run", "--job-id", "90001", "--output-dir",
                   "/tmp/lava-run-out", "--device", "/tmp/board1.yaml", "/tmp/job.yaml"], capture=True, timeout=300)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-3000:]
    log = joblog.parse(done.stderr)  # lava-run logs on its stderr
    assert log.steps["run"].exit_code == 0
    assert decode_echo(log.steps["run"].output)["argv"][-len(weird):] == weird
    assert '"case": "run", "result": "pass"' in done.stderr


def test_release_runs_its_test_gates_on_lab_boards(cli, lab, tmp_path, real_linux_package, tiny_gguf):
    """`release --lab`: the packaged tarball goes to a lab job for `--test ppl`; the open-toolchain
    package has no NPU, so the gate fails (13) with the job's document in the report."""
    text = tmp_path / "text.txt"
    text.write_text(" ".join(["the quick brown fox jumps over the lazy dog"] * 60))
    dist = tmp_path / "dist"
    r = cli("--json", "release", "--prebuilt", f"linux={real_linux_package}", "--os", "linux", "--dist", str(dist),
            "--lab", lab.url, "--lab-device-type", lab.device_type, "--lab-serve-artifacts", "127.0.0.1:0",
            "--test", "ppl", "--test-model", str(tiny_gguf), "--test-text", str(text), "--no-strict")
    assert r.rc == 13, r.err
    report = json.loads((dist / "release-report.json").read_text())
    test = next(s for s in report["stages"] if s["name"] == "test")
    assert test["status"] == "failed" and report["failed_stage"] == "test"
    (where, result), = test["tests"].items()
    assert where.startswith("ppl lava:board") and result["job_url"].startswith(lab.url)
    assert "nothing ran on the NPU" in result["reason"]
    assert (dist / "tests" / "ppl-lab").is_dir()


def test_a_lab_that_restarts_while_a_job_runs_is_waited_for(lab, tmp_path, real_linux_package, tiny_gguf):
    """LAVA's web API goes away for a few seconds while the job runs (a restart): hexbuild keeps
    looking, says so in a line, and reports the job when the API is back."""
    from tests.infra.lava import restart_api

    env = {**os.environ, **lab.env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    p = subprocess.Popen([sys.executable, "-m", "hexbuild", "--json", "lab", "run", str(real_linux_package), "--model",
                          str(tiny_gguf), "--serve-artifacts", "127.0.0.1:0", "--results-dir", str(tmp_path / "res"),
                          "--", "completion", "-t", "2", "-n", "8", "-p", PROMPT],
                         stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    seen = []
    try:
        for line in p.stderr:
            seen.append(line)
            if ": Running" in line:
                break
        restart_api(lab, down_s=4)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    err = "".join(seen) + err
    assert p.returncode == 0, err
    assert "cannot reach the lab" in err and "trying again" in err
    assert json.loads(out)["job"]["health"] == "Complete"
