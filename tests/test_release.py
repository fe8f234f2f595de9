"""hexbuild release: the stage machinery, dist/ and the report, exit codes per stage, --strict,
and (with the Docker engine fixture) the whole build → release on the fixture project.

Releases run as subprocesses (`python -m hexbuild release ...`): ui reads the CI environment at
import, and each run must see its own. Packages are genuine ELF files from tests/elf_factory.py;
verify and package are the real ones.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hexbuild import errors
from tests import elf_factory as ef

REPO = Path(__file__).resolve().parent.parent
CI_VARS = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "SOURCE_DATE_EPOCH")


def release(*args, env=None, cwd=None, timeout=600):
    """Run `python -m hexbuild release ARGS` with only the CI variables given in ``env``."""
    e = {k: v for k, v in os.environ.items() if k not in CI_VARS and not k.startswith("HEXBUILD_")}
    if os.environ.get("HEXBUILD_TEST_CACHE"):
        e["HEXBUILD_TEST_CACHE"] = os.environ["HEXBUILD_TEST_CACHE"]
    e.update(env or {})
    e["PYTHONPATH"] = str(REPO)
    cp = subprocess.run([sys.executable, "-m", "hexbuild", "release", *map(str, args)], cwd=cwd, env=e,
                        capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout)
    return subprocess.CompletedProcess(cp.args, cp.returncode, cp.stdout.decode(), cp.stderr.decode())


def github(tmp_path, **more):
    env = {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")}
    env.update(more)
    return env


def report_of(dist: Path) -> dict:
    return json.loads((dist / "release-report.json").read_text())


def stage_status(report: dict) -> list[tuple[str, str | None, str]]:
    return [(s["name"], s["os"], s["status"]) for s in report["stages"]]


def no_partial_files(dist: Path) -> None:
    leftovers = [p.name for p in dist.iterdir() if p.name.startswith(".") or p.name.endswith(".part")]
    assert leftovers == [], leftovers


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("packages")
    good_android = ef.make_package(root / "android", os="android", htp=["v68", "v73"])
    good_linux = ef.make_package(root / "linux", os="linux", htp=["v73"])
    bad = ef.make_package(root / "bad", os="android", htp=["v69", "v73"])
    ef.hexagon_so(bad / "lib" / "libggml-htp-v73.so", "v73", exports=("op_matmul",),
                  hidden=("htp_iface_skel_handle_invoke",))
    ef.x86_64_so(bad / "lib" / "libggml-cpu.so")
    warn = ef.make_package(root / "warn", os="android", htp=["v73"])
    ef.hexagon_so(warn / "lib" / "libggml-htp-v73.so", "v73", exports=("htp_iface_skel_handle_invoke",),
                  hidden=("op_matmul",))
    return {"android": good_android, "linux": good_linux, "bad": bad, "warn": warn}


# -- success ------------------------------------------------------------------------------------
def test_release_two_oses_on_github(packages, tmp_path):
    dist = tmp_path / "dist"
    cp = release("--prebuilt", f"android={packages['android']}", "--prebuilt", f"linux={packages['linux']}",
                 "--dist", dist, "--json", env=github(tmp_path), cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    out = json.loads(cp.stdout)  # --json: the report is the one document on stdout
    report = report_of(dist)
    assert out["stages"] == report["stages"] and out["artifacts"] == report["artifacts"]
    assert report["status"] == "ok" and report["exit_code"] == 0 and report["failed_stage"] is None
    assert report["os"] == ["android", "linux"] and report["ci"] == "github" and report["strict"] is True
    assert stage_status(report) == [
        ("build", "android", "ok"), ("verify", "android", "ok"), ("package", "android", "ok"),
        ("build", "linux", "ok"), ("verify", "linux", "ok"), ("package", "linux", "ok"),
        ("checksums", None, "ok"), ("deploy", None, "skipped"), ("smoke", None, "skipped"),
        ("test", None, "skipped")]
    assert all(isinstance(s["duration_s"], float) for s in report["stages"] if s["status"] == "ok")

    names = sorted(a["name"] for a in report["artifacts"])
    assert names == ["llama.cpp-android-unknown-hexagon.tar.gz", "llama.cpp-linux-unknown-hexagon.tar.gz"]
    assert sorted(p.name for p in dist.iterdir()) == sorted(names + ["SHA256SUMS", "manifest.json",
                                                                     "release-report.json"])
    for a in report["artifacts"]:
        data = (dist / a["name"]).read_bytes()
        assert a["size"] == len(data) and a["sha256"] == hashlib.sha256(data).hexdigest()
        with tarfile.open(dist / a["name"]) as tar:
            members = tar.getnames()
        assert "llama.cpp/lib/libggml-htp-v73.so" in members and "llama.cpp/manifest.json" in members

    # SHA256SUMS covers every asset and the manifest; the real sha256sum agrees
    sums = (dist / "SHA256SUMS").read_text().splitlines()
    assert sorted(line.split("  ")[1] for line in sums) == sorted(names + ["manifest.json"])
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    manifest = json.loads((dist / "manifest.json").read_text())
    assert [(a["name"], a["os"]) for a in manifest["assets"]] == [
        ("llama.cpp-android-unknown-hexagon.tar.gz", "android"), ("llama.cpp-linux-unknown-hexagon.tar.gz", "linux")]
    assert manifest["assets"][0]["htp_versions"] == ["v68", "v73"]

    verify = next(s for s in report["stages"] if s["name"] == "verify" and s["os"] == "linux")["verify"]
    assert verify["ok"] and verify["failures"] == 0 and verify["htp_versions"] == ["v73"]

    # CI-native: a fold group per stage, and the job summary
    assert cp.stderr.count("::group::") == 7 and "::error" not in cp.stderr
    summary = (tmp_path / "step-summary.md").read_text()
    assert summary.startswith("## hexbuild release: succeeded")
    for a in report["artifacts"]:
        assert f"| `{a['name']}` |" in summary and f"`{a['sha256']}`" in summary
    assert "| linux | ✅ ok |" in summary


def test_release_human_output_and_default_dist(packages, tmp_path):
    (tmp_path / "hexbuild.toml").write_text('[release]\ndist_dir = "out/assets"\n')
    cp = release("--prebuilt", packages["android"], "--os", "android", cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    dist = tmp_path / "out" / "assets"
    assert (dist / "SHA256SUMS").is_file() and (dist / "release-report.json").is_file()
    assert "llama.cpp-android-unknown-hexagon.tar.gz" in cp.stdout and "sha256 " in cp.stdout
    assert "report: " in cp.stdout
    assert "::group::" not in cp.stderr  # not in CI: plain "== stage" lines
    assert "== verify (android)" in cp.stderr


def test_release_replaces_the_previous_release(packages, tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "notes.txt").write_text("mine")
    cp = release("--prebuilt", f"linux={packages['linux']}", "--dist", dist, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert (dist / "llama.cpp-linux-unknown-hexagon.tar.gz").exists()
    cp = release("--prebuilt", f"android={packages['android']}", "--dist", dist, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    # the earlier release's assets are gone (they were in its manifest); other files stay
    assert sorted(p.name for p in dist.iterdir()) == [
        "SHA256SUMS", "llama.cpp-android-unknown-hexagon.tar.gz", "manifest.json", "notes.txt",
        "release-report.json"]
    # a release that stopped before its checksums listed its tarballs in the report only
    cp = release("--prebuilt", f"android={packages['android']}", "--prebuilt", f"linux={packages['bad']}",
                 "--os", "android,linux", "--dist", dist, cwd=tmp_path)
    assert cp.returncode == errors.VERIFY_FAILED, cp.stderr
    assert "llama.cpp-android-unknown-hexagon.tar.gz" in {a["name"] for a in report_of(dist)["artifacts"]}
    cp = release("--prebuilt", f"linux={packages['linux']}", "--dist", dist, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert sorted(p.name for p in dist.iterdir()) == [
        "SHA256SUMS", "llama.cpp-linux-unknown-hexagon.tar.gz", "manifest.json", "notes.txt",
        "release-report.json"]


# -- failures: each stage its own exit code, later stages skipped, the report still written ----------
def test_verify_failure_stops_the_release(packages, tmp_path):
    dist = tmp_path / "dist"
    cp = release("--prebuilt", f"android={packages['android']}", "--prebuilt", f"linux={packages['linux']}",
                 "--prebuilt", f"android={packages['bad']}", "--dist", dist, env=github(tmp_path), cwd=tmp_path)
    assert cp.returncode == errors.USAGE and "both for android" in cp.stderr  # pre-flight: nothing ran
    assert not (dist / "release-report.json").exists()

    cp = release("--prebuilt", f"android={packages['bad']}", "--prebuilt", f"linux={packages['linux']}",
                 "--os", "android,linux", "--dist", dist, env=github(tmp_path), cwd=tmp_path)
    assert cp.returncode == errors.VERIFY_FAILED, cp.stderr
    report = report_of(dist)
    assert report["status"] == "failed" and report["exit_code"] == 5 and report["failed_stage"] == "verify (android)"
    assert report["error"]["type"] == "verify"
    assert stage_status(report) == [
        ("build", "android", "ok"), ("verify", "android", "failed"), ("package", "android", "skipped"),
        ("build", "linux", "skipped"), ("verify", "linux", "skipped"), ("package", "linux", "skipped"),
        ("checksums", None, "skipped"), ("deploy", None, "skipped"), ("smoke", None, "skipped"),
        ("test", None, "skipped")]
    verify = report["stages"][1]["verify"]
    assert verify["failures"] == 2
    assert {(p["file"], p["check"]) for p in verify["problems"] if p["status"] == "fail"} == {
        ("lib/libggml-htp-v73.so", "skel symbol"), ("lib/libggml-cpu.so", "format")}
    # no assets, nothing half-written
    assert sorted(p.name for p in dist.iterdir()) == ["release-report.json"]
    no_partial_files(dist)
    # an annotation per failed check, then the stage's error
    errs = [line for line in cp.stderr.splitlines() if line.startswith("::error")]
    assert len(errs) == 3 and any("skel symbol" in e for e in errs) and any("libggml-cpu.so" in e for e in errs)
    summary = (tmp_path / "step-summary.md").read_text()
    assert "failed at verify (android)" in summary and "| android | ❌ failed |" in summary


def test_package_failure_exit_code(packages, tmp_path):
    pkg = tmp_path / "fifo-pkg"
    subprocess.run(["cp", "-a", str(packages["android"]), str(pkg)], check=True)
    os.mkfifo(pkg / "include" / "pipe")  # verify ignores include/; no tarball can hold a FIFO
    dist = tmp_path / "dist"
    cp = release("--prebuilt", pkg, "--dist", dist, env={"CI": "true"}, cwd=tmp_path)
    assert cp.returncode == errors.PACKAGE_FAILED, cp.stderr
    report = report_of(dist)
    assert report["failed_stage"] == "package (android)" and "pipe" in report["error"]["message"]
    assert [s["status"] for s in report["stages"]][:4] == ["ok", "ok", "failed", "skipped"]
    assert sorted(p.name for p in dist.iterdir()) == ["release-report.json"]


# -- warnings and --strict ------------------------------------------------------------------------
@pytest.mark.parametrize("env,flags,rc", [
    ({"CI": "true"}, [], errors.WARNINGS_FATAL),       # strict by default in CI
    ({"CI": "true"}, ["--no-strict"], errors.OK),
    ({}, [], errors.OK),                               # not strict outside CI
    ({}, ["--strict"], errors.WARNINGS_FATAL),
    ({"CI": "true", "HEXBUILD_CI_STRICT": "0"}, [], errors.OK),
])
def test_strict_makes_warnings_fatal(packages, tmp_path, env, flags, rc):
    dist = tmp_path / "dist"
    cp = release("--prebuilt", packages["warn"], "--dist", dist, *flags, env=env, cwd=tmp_path)
    assert cp.returncode == rc, cp.stderr
    report = report_of(dist)
    assert report["exit_code"] == rc and len(report["warnings"]) == 1 and "op_matmul" in report["warnings"][0]
    assert (dist / "SHA256SUMS").is_file()  # the assets are complete either way
    if rc:
        assert report["error"]["type"] == "strict" and report["failed_stage"] is None
        assert "--strict makes them fatal" in cp.stderr


def test_strict_warning_is_an_annotation_on_github(packages, tmp_path):
    cp = release("--prebuilt", packages["warn"], "--dist", tmp_path / "dist", env=github(tmp_path), cwd=tmp_path)
    assert cp.returncode == errors.WARNINGS_FATAL
    assert any(line.startswith("::warning::verify (android): lib/libggml-htp-v73.so: matmul symbol")
               for line in cp.stderr.splitlines())
    assert "### Warnings (1) — fatal (--strict)" in (tmp_path / "step-summary.md").read_text()


# -- bad input: one line, exit 2, before any stage runs ----------------------------------------------
@pytest.mark.parametrize("args,words", [
    (["--os", "ios"], "--os must be one of android, linux"),
    (["--smoke", "llama-cli --version"], "--smoke runs on the deploy targets"),
    (["--target", "adb:"], "malformed target"),
    (["--target", "bogus://x"], "unknown target"),
    (["--smoke", "  ", "--target", "local:/tmp/x"], "--smoke needs a command"),
    (["-t", "local:/tmp/x", "-t", "local:/tmp/x"], "the same target is given twice"),
])
def test_bad_input(packages, tmp_path, args, words):
    cp = release("--prebuilt", packages["android"], "--dist", tmp_path / "dist", *args, cwd=tmp_path)
    assert cp.returncode == errors.USAGE, cp.stderr
    assert words in cp.stderr and "Traceback" not in cp.stderr
    assert len([line for line in cp.stderr.splitlines() if line.startswith("hexbuild: error:")]) == 1
    assert not (tmp_path / "dist" / "release-report.json").exists()


def test_dist_that_is_a_file(packages, tmp_path):
    (tmp_path / "dist").write_text("x")
    cp = release("--prebuilt", packages["android"], "--dist", tmp_path / "dist", cwd=tmp_path)
    assert cp.returncode == errors.USAGE and "cannot create the dist directory" in cp.stderr


def test_missing_prebuilt(tmp_path):
    cp = release("--prebuilt", tmp_path / "nope", "--dist", tmp_path / "dist", cwd=tmp_path)
    assert cp.returncode == errors.USAGE and "package directory not found" in cp.stderr


# -- build failures are annotated with file and line ----------------------------------------------
def test_build_failure_annotations_from_the_log(tmp_path, monkeypatch, capsys):
    """The annotation path on its own, with BuildFailed's details as hexbuild.build makes them
    (the Docker end-to-end test below covers the real build)."""
    from hexbuild.config import load
    from hexbuild.release import Release, ReleaseOptions
    from hexbuild.ui import ui

    src = tmp_path / "repo" / "llama.cpp"
    src.mkdir(parents=True)
    log = tmp_path / "hexbuild-build.log"
    log.write_text(f"[1/9] x\n/workspace/ggml/src/ggml.c:7:3: error: expected ';' after expression\n"
                   f"{src}/common/arg.cpp:12:1: error: local engine paths are the checkout's\n")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path / "repo"))
    saved = ui.ci
    ui.ci = "github"
    try:
        s = load(flags={"source": str(src)}, env={}, cwd=tmp_path)
        r = Release(s, ReleaseOptions(oses=["android"], dist=tmp_path / "dist"))
        err = errors.BuildFailed("cmake --build failed (exit 1)", details={
            "exit_code": 1, "log": str(log), "log_tail": ["src/a.c:1: error: only in the tail"]})
        r._annotate_build_failure(err)
        # the log file is gone: the tail in the error is what is left
        gone = errors.BuildFailed("x", details={"log": str(tmp_path / "nope.log"),
                                                "log_tail": ["src/a.c:1: error: only in the tail"]})
        r._annotate_build_failure(gone)
    finally:
        ui.ci = saved
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["::error file=llama.cpp/ggml/src/ggml.c,line=7,col=3::expected ';' after expression",
                     "::error file=llama.cpp/common/arg.cpp,line=12,col=1::local engine paths are the checkout's",
                     "::error file=llama.cpp/src/a.c,line=1::only in the tail"]
    assert [d["file"] for d in err.details["diagnostics"]] == ["llama.cpp/ggml/src/ggml.c", "llama.cpp/common/arg.cpp"]


# -- deploy and smoke, on local: targets (a directory on this machine, the same deploy and run
#    code paths as a board over SSH) -------------------------------------------------------------
@pytest.fixture(scope="module")
def linux_pkg(packages, tmp_path_factory):
    """The Linux package plus bin/check.sh, a program this machine can run: it prints its
    arguments and exits with the first one."""
    pkg = tmp_path_factory.mktemp("linux-smoke") / "llama.cpp"
    subprocess.run(["cp", "-a", str(packages["linux"]), str(pkg)], check=True)
    script = pkg / "bin" / "check.sh"
    script.write_text('#!/bin/sh\necho "smoke says $*"\nexit "${1:-0}"\n')
    script.chmod(0o755)
    return pkg


def test_deploy_and_smoke_on_two_targets(linux_pkg, tmp_path):
    dist, dev1, dev2 = tmp_path / "dist", tmp_path / "dev1", tmp_path / "dev2"
    # local: stands in for a board here: its AArch64 programs cannot run on this machine, which
    # deploy says once per target (a warning; --no-strict, or CI's strict default makes it exit 10)
    cp = release("--prebuilt", f"linux={linux_pkg}", "--dist", dist, "--target", f"local:{dev1}",
                 "-t", f"local:{dev2}", "--smoke", "check.sh 0 ok", "--json", "--no-strict", env=github(tmp_path),
                 cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert sum("::warning::" in ln and "programs are AArch64" in ln for ln in cp.stderr.splitlines()) == 2
    report = json.loads(cp.stdout)  # the program's own output went to stderr, not into the JSON
    assert "  | smoke says 0 ok" in cp.stderr
    assert [s["status"] for s in report["stages"]][-3:] == ["ok", "ok", "skipped"]
    devices = {d["target"]: d for d in report["devices"]}
    for dev in (dev1, dev2):
        d = devices[f"local:{dev}"]
        assert d["deploy"] == "ok" and d["smoke"]["status"] == "ok" and d["smoke"]["exit_code"] == 0
        assert d["smoke"]["argv"] == ["./bin/check.sh", "0", "ok"]
        assert "smoke says 0 ok" in (tmp_path / d["smoke"]["log"]).read_text()
        # what was deployed is the released tarball's content
        assert (dev / "bin" / "check.sh").read_bytes() == (linux_pkg / "bin" / "check.sh").read_bytes()
        assert (dev / "lib" / "libggml-htp-v73.so").is_file()
    summary = (tmp_path / "step-summary.md").read_text()
    assert f"| `local:{dev1}` | - | ✅ ok | ✅ ok (exit 0) | - |" in summary

    # again: nothing changed on the targets, and that is a success
    cp = release("--prebuilt", f"linux={linux_pkg}", "--dist", dist, "-t", f"local:{dev1}", cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert report_of(dist)["stages"][-3]["deploy"][0]["status"] == "unchanged"


def test_smoke_failure_exit_code(linux_pkg, tmp_path):
    dist = tmp_path / "dist"
    cp = release("--prebuilt", f"linux={linux_pkg}", "--dist", dist, "-t", f"local:{tmp_path / 'dev'}",
                 "--smoke", "check.sh 3", env=github(tmp_path), cwd=tmp_path)
    assert cp.returncode == errors.REMOTE_FAILED, cp.stderr
    report = report_of(dist)
    assert report["failed_stage"] == "smoke" and report["exit_code"] == 8
    dev = report["devices"][0]
    assert dev["deploy"] == "ok" and dev["smoke"]["status"] == "failed" and dev["smoke"]["exit_code"] == 3
    assert "exited 3" in report["error"]["message"]
    assert (dist / "SHA256SUMS").is_file()  # the assets were complete before the smoke test
    assert [line for line in cp.stderr.splitlines() if line.startswith("::error")] == [
        f"::error::smoke test failed on 1 target(s): local:{tmp_path / 'dev'}: `check.sh 3` exited 3 "
        f"(log: {dev['smoke']['log']})"]
    assert "✅ ok | ❌ failed (exit 3)" in (tmp_path / "step-summary.md").read_text()


def test_deploy_failure_skips_smoke(linux_pkg, tmp_path):
    (tmp_path / "afile").write_text("x")
    good, bad = tmp_path / "good", tmp_path / "afile" / "dev"  # a directory under a file cannot exist
    dist = tmp_path / "dist"
    cp = release("--prebuilt", f"linux={linux_pkg}", "--dist", dist, "-t", f"local:{good}", "-t", f"local:{bad}",
                 "--smoke", "check.sh", env={"CI": "true"}, cwd=tmp_path)
    assert cp.returncode == errors.DEPLOY_FAILED, cp.stderr
    report = report_of(dist)
    assert report["failed_stage"] == "deploy"
    assert stage_status(report)[-3:] == [("deploy", None, "failed"), ("smoke", None, "skipped"),
                                         ("test", None, "skipped")]
    devices = {d["target"]: d for d in report["devices"]}
    assert devices[f"local:{good}"]["deploy"] == "ok" and devices[f"local:{bad}"]["deploy"] == "failed"
    assert devices[f"local:{bad}"]["error"] and devices[f"local:{good}"]["smoke"] is None


@pytest.mark.device
def test_deploy_and_smoke_on_a_phone(packages, make_device, tmp_path):
    """A virtual phone (real adbd behind the real adb server): the Android tarball is deployed to
    /data/local/tmp/llama.cpp and the smoke command runs there through adb shell."""
    pkg = tmp_path / "llama.cpp"
    subprocess.run(["cp", "-a", str(packages["android"]), str(pkg)], check=True)
    (pkg / "bin" / "check.sh").write_text('#!/bin/sh\necho "on the phone: $ADSP_LIBRARY_PATH"\n')
    (pkg / "bin" / "check.sh").chmod(0o755)
    phone = make_device("SM8550")  # v73: the fixture package's skels (on a v75 phone --strict fails the deploy warning)
    dist = tmp_path / "dist"
    cp = release("--prebuilt", pkg, "--os", "android", "--dist", dist, "-t", f"adb:{phone.serial}",
                 "--smoke", "check.sh", env=github(tmp_path), cwd=tmp_path)
    report = report_of(dist)
    dev = report["devices"][0]
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert dev["deploy"] == "ok" and dev["dest"] == "/data/local/tmp/llama.cpp"
    assert "SM8550" in dev["device"] and dev["smoke"]["exit_code"] == 0
    assert "  | on the phone: /data/local/tmp/llama.cpp/lib" in cp.stderr
    assert (phone.tmp / "llama.cpp" / "lib" / "libggml-htp-v73.so").is_file()
    assert f"| `adb:{phone.serial}` | {dev['device']} | ✅ ok | ✅ ok (exit 0) | - |" in \
        (tmp_path / "step-summary.md").read_text()


def test_target_of_another_os_is_refused_before_building(packages, tmp_path):
    cp = release("--prebuilt", packages["android"], "--os", "android", "--dist", tmp_path / "dist",
                 "-t", f"local:{tmp_path / 'dev'}", cwd=tmp_path)
    assert cp.returncode == errors.USAGE
    assert "runs linux, but this release builds android" in cp.stderr and "--os android,linux" in cp.stderr


def test_cancelled_job_writes_the_report(linux_pkg, tmp_path):
    """A cancelled CI job gets SIGTERM (here, the whole process group, like a terminal's Ctrl-C):
    the running stage is marked interrupted, the rest skipped, the report written, exit 130."""
    import signal
    import time

    pkg = tmp_path / "llama.cpp"
    subprocess.run(["cp", "-a", str(linux_pkg), str(pkg)], check=True)
    (pkg / "bin" / "slow.sh").write_text("#!/bin/sh\necho started\nexec sleep 60\n")
    (pkg / "bin" / "slow.sh").chmod(0o755)
    dist = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in CI_VARS and not k.startswith("HEXBUILD_")}
    env.update({"CI": "true", "PYTHONPATH": str(REPO)})
    p = subprocess.Popen([sys.executable, "-m", "hexbuild", "release", "--prebuilt", f"linux={pkg}",
                          "--dist", str(dist), "-t", f"local:{tmp_path / 'dev'}", "--smoke", "slow.sh"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs = list((tmp_path / "hexbuild-results").glob(".*.part"))
            if logs and "started" in logs[0].read_text():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the smoke command never started")
        os.killpg(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == errors.INTERRUPTED, err.decode()
    report = report_of(dist)
    assert report["exit_code"] == 130 and report["failed_stage"] == "smoke"
    assert report["stages"][-2]["error"]["type"] == "interrupted"  # smoke; test was skipped
    assert (dist / "SHA256SUMS").is_file()
    no_partial_files(dist)


# -- end to end: the real build of the fixture project in the fixture toolchain images ----------------
FIXTURE = REPO / "tests" / "fixtures" / "llama-mini"


def _fixture_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "llama.cpp"
    subprocess.run(["cp", "-a", str(FIXTURE), str(tree)], check=True)
    return tree


def _docker_env(tmp_path, docker_host, tree):
    return github(tmp_path, DOCKER_HOST=docker_host, GITHUB_WORKSPACE=str(tree))


@pytest.mark.docker
def test_release_builds_the_fixture_project(docker_host, toolchain_images, tmp_path):
    tree = _fixture_tree(tmp_path)
    dist = tmp_path / "dist"
    cp = release("--source", tree, "--os", "android,linux", "--dist", dist,
                 env=_docker_env(tmp_path, docker_host, tree), cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr[-4000:]
    report = report_of(dist)
    assert [(s["name"], s["os"], s["status"]) for s in report["stages"]][:6] == [
        ("build", "android", "ok"), ("verify", "android", "ok"), ("package", "android", "ok"),
        ("build", "linux", "ok"), ("verify", "linux", "ok"), ("package", "linux", "ok")]
    builds = [s["build"] for s in report["stages"] if s["name"] == "build"]
    assert [b["image"] for b in builds] == [toolchain_images["android"], toolchain_images["linux"]]
    for s in report["stages"]:
        if s["name"] == "verify":
            assert s["verify"]["ok"] and s["verify"]["htp_versions"] == ["v68", "v69", "v73"]
    # one tarball per OS, recorded with the image the build used, and SHA256SUMS over all
    manifest = json.loads((dist / "manifest.json").read_text())
    assert sorted(a["os"] for a in manifest["assets"]) == ["android", "linux"]
    assert {a["image"]["reference"] for a in manifest["assets"]} == {toolchain_images["android"],
                                                                   toolchain_images["linux"]}
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count(": OK") == 3, check.stdout
    with tarfile.open(next(dist.glob("llama.cpp-android-*.tar.gz"))) as tar:
        names = tar.getnames()
    assert "llama.cpp/lib/libggml-htp-v73.so" in names and "llama.cpp/bin/llama-cli" in names
    # the CI log: a group per stage, the build's own group not nested inside it (GitHub cannot)
    opened = [line[len("::group::"):] for line in cp.stderr.splitlines() if line.startswith("::group::")]
    assert opened == ["build (android)", "verify (android)", "package (android)", "build (linux)",
                      "verify (linux)", "package (linux)", "checksums"]
    assert cp.stderr.count("::endgroup::") == len(opened) and "::error" not in cp.stderr
    # no terminal: no spinner, no redraw, no colour; hexbuild's own lines are timestamped
    assert "\r" not in cp.stderr and "\x1b" not in cp.stderr and "\x1b" not in cp.stdout
    assert re.search(r"^\[\d\d:\d\d:\d\d\] build \(linux\): ok \(", cp.stderr, re.M)
    summary = (tmp_path / "step-summary.md").read_text()
    assert summary.startswith("## hexbuild release: succeeded")
    for a in report["artifacts"]:
        assert f"`{a['sha256']}`" in summary


@pytest.mark.docker
def test_broken_build_stops_the_release_with_an_annotation(docker_host, toolchain_images, tmp_path):
    tree = _fixture_tree(tmp_path)
    src = tree / "ggml" / "src" / "ggml-hexagon" / "ggml-hexagon.c"
    lines = src.read_text().splitlines()
    lines.insert(36, "    int broken = undeclared_identifier_for_the_test;")  # becomes line 37
    src.write_text("\n".join(lines) + "\n")
    dist = tmp_path / "dist"
    cp = release("--source", tree, "--os", "android,linux", "--dist", dist,
                 env=_docker_env(tmp_path, docker_host, tree), cwd=tmp_path)
    assert cp.returncode == errors.BUILD_FAILED, cp.stderr[-4000:]
    annotations = [line for line in cp.stderr.splitlines() if line.startswith("::error file=")]
    assert annotations and annotations[0].startswith(
        "::error file=ggml/src/ggml-hexagon/ggml-hexagon.c,line=37,col="), annotations
    assert "undeclared_identifier_for_the_test" in annotations[0]
    assert any(line.startswith("::error::") and "failed" in line for line in cp.stderr.splitlines())
    report = report_of(dist)
    assert report["exit_code"] == 4 and report["failed_stage"] == "build (android)"
    assert report["error"]["type"] == "build"
    assert [d["line"] for d in report["error"]["details"]["diagnostics"]] == [37]
    statuses = [s["status"] for s in report["stages"]]
    assert statuses[0] == "failed" and len(statuses) > 1 and set(statuses[1:]) == {"skipped"}
    assert report["stages"][0]["build"]["log"].endswith("hexbuild-build.log")
    assert sorted(p.name for p in dist.iterdir()) == ["release-report.json"]
    assert "failed at build (android)" in (tmp_path / "step-summary.md").read_text()


@pytest.mark.docker
def test_built_package_that_fails_verification_exits_5(docker_host, toolchain_images, tmp_path):
    """The build succeeds but its skels export nothing: that is the verify stage's failure (5),
    not the build's (4)."""
    tree = _fixture_tree(tmp_path)
    cmake = tree / "ggml" / "src" / "ggml-hexagon" / "htp" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + "target_compile_options(${TARGET_NAME} PRIVATE -fvisibility=hidden)\n")
    dist = tmp_path / "dist"
    cp = release("--source", tree, "--htp", "v73", "--dist", dist,
                 env=_docker_env(tmp_path, docker_host, tree), cwd=tmp_path)
    assert cp.returncode == errors.VERIFY_FAILED, cp.stderr[-4000:]
    report = report_of(dist)
    assert [(s["name"], s["status"]) for s in report["stages"]][:3] == [
        ("build", "ok"), ("verify", "failed"), ("package", "skipped")]
    assert report["failed_stage"] == "verify (android)" and "skel symbol" in report["error"]["message"]
    verify = report["stages"][1]["verify"]
    assert not verify["ok"] and verify["htp_versions"] == ["v73"]
    assert {(p["file"], p["check"]) for p in verify["problems"] if p["status"] == "fail"} == {
        ("lib/libggml-htp-v73.so", "skel symbol")}
    assert sorted(p.name for p in dist.iterdir()) == ["release-report.json"]


def _local_toolchain_env(tmp_path, tree):
    """What the toolchain image sets, pointing at the same stand-ins on this machine (clang-19,
    cmake and ninja are installed here): `--engine local` as docs/ci/github-local-engine.yml runs it."""
    from tests.infra.toolchain_double import local_sdk

    tc = REPO / "docker" / "toolchain-fixture"
    sdk = tmp_path / "hexagon-sdk"  # the double's SDK laid out here (once per test), its Hexagon tools LLVM 21
    if not sdk.exists():
        local_sdk(sdk)
    return github(tmp_path, GITHUB_WORKSPACE=str(tree), ANDROID_NDK_ROOT=str(tc / "android-ndk"),
                  HEXAGON_SDK_ROOT=str(sdk), HEXAGON_TOOLS_ROOT=str(sdk / "tools" / "HEXAGON_Tools" / "21.1.8"))


def test_release_with_the_local_engine(tmp_path):
    tree = _fixture_tree(tmp_path)
    dist = tmp_path / "dist"
    cp = release("--engine", "local", "--os", "android", "--htp", "v73", "--source", tree, "--dist", dist,
                 env=_local_toolchain_env(tmp_path, tree), cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr[-4000:]
    report = report_of(dist)
    build = report["stages"][0]["build"]
    assert build["image"] is None and build["htp_versions"] == ["v73"]
    assert report["artifacts"][0]["name"].startswith("llama.cpp-android-")
    assert (dist / "SHA256SUMS").is_file()

    # broken: the compiler's absolute host paths become checkout-relative annotations
    src = tree / "ggml" / "src" / "ggml.c"
    src.write_text(src.read_text() + "\nint broken(void) { return not_declared_here; }\n")
    line = src.read_text().splitlines().index("int broken(void) { return not_declared_here; }") + 1
    cp = release("--engine", "local", "--os", "android", "--htp", "v73", "--source", tree, "--dist", dist,
                 env=_local_toolchain_env(tmp_path, tree), cwd=tmp_path)
    assert cp.returncode == errors.BUILD_FAILED, cp.stderr[-4000:]
    annotations = [l for l in cp.stderr.splitlines() if l.startswith("::error file=")]
    assert annotations and annotations[0].startswith(f"::error file=ggml/src/ggml.c,line={line},col="), annotations
    assert sorted(p.name for p in dist.iterdir()) == ["release-report.json"]  # the earlier assets are gone


@pytest.mark.parametrize("log,code", [("test-backend-ops-blas-ok.log", 0), ("test-backend-ops-blas-fail.log", 13)])
def test_release_test_ops_after_deploy(linux_pkg, tmp_path, log, code):
    """--test ops runs `hexbuild test ops` on each target: the session's output is a real
    test-backend-ops log (tests/data/logs; the failing one has a fault injected below BLAS)."""
    pkg = tmp_path / "pkg" / "llama.cpp"
    pkg.parent.mkdir()
    subprocess.run(["cp", "-a", str(linux_pkg), str(pkg)], check=True)
    tbo = pkg / "bin" / "test-backend-ops"
    tbo.write_text(f"#!/bin/sh\ncat {Path(__file__).parent / 'data' / 'logs' / log}\nexit {1 if code else 0}\n")
    tbo.chmod(0o755)
    dist, dev = tmp_path / "dist", tmp_path / "dev"
    cp = release("--prebuilt", f"linux={pkg}", "--dist", dist, "--target", f"local:{dev}", "--test", "ops",
                 "--json", cwd=tmp_path)
    assert cp.returncode == code, cp.stderr
    report = json.loads(cp.stdout)
    test_stage = report["stages"][-1]
    assert test_stage["name"] == "test" and test_stage["status"] == ("ok" if code == 0 else "failed")
    (result,) = test_stage["tests"].values()
    assert Path(result["files"]["junit"]).is_file() and str(dist / "tests") in result["files"]["junit"]
    if code:
        assert "MUL_MAT(type_a=f16" in result["reason"] and report["error"]["exit_code"] == 13


# -- release takes what build takes --------------------------------------------------------------------
def test_release_takes_every_option_build_passes_on():
    """release builds through BuildOptions.from_settings: every build.* setting reaches the build,
    so every build flag must be a release flag too (a pipeline releasing the open build needed
    HEXBUILD_BUILD_TOOLCHAIN=open). Only build's own --dry-run (print the plan) is not."""
    from hexbuild.cli.main import build_cli

    def options(name):
        cmd = build_cli(name).commands[name]
        return {o for p in cmd.params for o in p.opts if o.startswith("--")}

    build, release_opts = options("build"), options("release")
    missing = sorted(build - release_opts - {"--dry-run"})
    assert missing == [], f"release lacks build's {missing}"


def test_a_cpu_only_package_is_not_named_hexagon(tmp_path):
    """The open toolchain's package (no Hexagon backend) is llama.cpp-<os>-<rev>-cpu.tar.gz."""
    pkg = ef.make_package(tmp_path / "open", os="linux", htp=[], hexagon=False)
    (pkg / "manifest.json").write_text(json.dumps({"os": "linux", "toolchain": "open", "lacks": ["htp"]}))
    dist = tmp_path / "dist"
    cp = release("--prebuilt", f"linux={pkg}", "--dist", dist, "--json", cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert [a["name"] for a in json.loads(cp.stdout)["artifacts"]] == ["llama.cpp-linux-unknown-cpu.tar.gz"]
    # hexbuild package names it the same way
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([sys.executable, "-m", "hexbuild", "package", str(pkg), "-o", str(out)], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    assert [p.name for p in out.iterdir()] == ["llama.cpp-linux-unknown-cpu.tar.gz"]
