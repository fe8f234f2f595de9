"""`hexbuild verify` and `hexbuild package` from the command line: output, exit codes, signals."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tests import elf_factory as ef

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No settings from the environment or a config file; plain (non-CI) error lines."""
    for var in ("CI", "GITHUB_ACTIONS", "GITLAB_CI"):
        monkeypatch.delenv(var, raising=False)
    for var in [v for v in os.environ if v.startswith("HEXBUILD_") and v != "HEXBUILD_TEST_CACHE"]:
        monkeypatch.delenv(var)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def pkg(tmp_path):
    return ef.make_package(tmp_path / "pkg-snapdragon", os="android", htp=["v68", "v73"])


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("hexbuild: error:")]


# -- verify -----------------------------------------------------------------------------------------

def test_verify_ok(pkg, cli):
    r = cli("verify", str(pkg))
    assert r.rc == 0, r.err
    out, err = r.out, r.err
    assert "libggml-htp-v73.so" in out and "skel symbol" in out and "more files" in out
    assert "0 failed" in err
    r = cli("verify", str(pkg), "--json", "--htp", "v68,v73")
    assert r.rc == 0, r.err
    out = r.out
    data = json.loads(out)
    assert data["ok"] is True and data["os"] == "android" and data["htp_versions"] == ["v68", "v73"]
    assert data["failures"] == 0 and data["warnings"] == 0 and len(data["checks"]) > 10


def test_verify_verbose_lists_every_check(pkg, cli):
    r = cli("verify", "-v", str(pkg))
    assert r.rc == 0, r.err
    out = r.out
    assert "bin/llama-bench" in out and "more files" not in out


def test_verify_failure_prints_report_then_one_error(pkg, cli):
    (pkg / "lib" / "libggml-htp-v73.so").rename(pkg / "lib" / "libggml-htp-v69.so")
    ef.x86_64_exe(pkg / "bin" / "llama-cli")
    r = cli("verify", str(pkg))
    assert r.rc == 5, r.err
    out, err = r.out, r.err
    assert "fail" in out and "bin/llama-cli" in out and "libggml-htp-v69.so" in out
    lines = error_lines(err)
    assert len(lines) == 1 and "(and 1 more)" in lines[0]
    r = cli("verify", "--json", str(pkg), "--htp", "v68,v69,v79")
    assert r.rc == 5, r.err
    out, err = r.out, r.err
    report = json.loads(out)  # one complete document: the error adds none to stdout
    assert report["ok"] is False and report["failures"] == 3
    failed = {(c["file"], c["check"]) for c in report["checks"] if c["status"] == "fail"}
    assert failed == {("lib/libggml-htp-v69.so", "arch"), ("bin/llama-cli", "format"),
                      ("lib/libggml-htp-v79.so", "present")}
    assert len(error_lines(err)) == 1


def test_verify_warning_keeps_exit_zero(pkg, cli):
    ef.hexagon_so(pkg / "lib" / "libggml-htp-v68.so", "v68", exports=["htp_iface_skel_handle_invoke"],
                  hidden=["op_matmul"])
    r = cli("verify", "--json", str(pkg))
    assert r.rc == 0, r.err
    data = r.json
    assert data["ok"] and data["warnings"] == 1


def test_verify_os_from_manifest_flag_and_env(tmp_path, cli, monkeypatch):
    linux = ef.make_package(tmp_path / "l", os="linux", htp=["v73"])
    r = cli("verify", "--json", str(linux))
    assert r.rc == 5 and r.json["os"] == "android"  # build.os defaults to android
    assert cli("verify", "--json", "--os", "linux", str(linux)).rc == 0
    assert cli("verify", "--json", str(linux), env={"HEXBUILD_BUILD_OS": "linux"}).rc == 0
    monkeypatch.delenv("HEXBUILD_BUILD_OS")
    (linux / "manifest.json").write_text(json.dumps({"os": "linux"}))
    r = cli("verify", "--json", str(linux))
    assert r.rc == 0 and r.json["os"] == "linux"


@pytest.mark.parametrize("args,needle", [
    (["verify", "{tmp}/missing"], "package directory not found"),
    (["verify", "{pkg}", "--htp", "v73,vXX"], "unknown HTP version 'vXX'"),
    (["verify", "{pkg}", "--os", "windows"], "--os"),
    (["verify", "{pkg}/bin/llama-cli"], "not a directory"),
    (["package", "{tmp}/missing"], "package directory not found"),
    (["package", "{pkg}", "--os", "ios"], "--os"),
    (["package", "{pkg}", "-o", "{pkg}/lib/x.tar.gz"], "inside the package"),
])
def test_bad_input_is_one_line_and_exit_2(pkg, tmp_path, cli, args, needle):
    argv = [a.format(tmp=tmp_path, pkg=pkg) for a in args]
    r = cli(*argv)
    assert r.rc == 2
    out, err = r.out, r.err
    lines = error_lines(err)
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err and out == ""
    r = cli(*argv, "--json")
    assert r.rc == 2, r.err
    out = r.out
    assert json.loads(out)["error"]["exit_code"] == 2


# -- package ----------------------------------------------------------------------------------------

def test_package_default_name_and_json(pkg, cli):
    (pkg / "manifest.json").write_text(json.dumps({"os": "android", "llama_cpp": {"revision": "b9633"}}))
    r = cli("package", str(pkg), "--json")
    assert r.rc == 0, r.err
    out, err = r.out, r.err
    data = json.loads(out)
    path = Path("llama.cpp-android-b9633-hexagon.tar.gz")
    assert data["path"] == str(path) and path.is_file()
    assert data["size"] == path.stat().st_size and len(data["sha256"]) == 64
    import hashlib
    assert data["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    with tarfile.open(path) as tar:
        manifest = json.load(tar.extractfile("llama.cpp/manifest.json"))
        assert data["files"] == len(manifest["files"])
        assert manifest["os"] == "android" and manifest["llama_cpp"]["revision"] == "b9633"
    assert "packing" in err


def test_package_output_dir_and_os_flag(pkg, tmp_path, cli):
    dist = tmp_path / "dist"
    dist.mkdir()
    r = cli("package", str(pkg), "-o", str(dist), "--os", "linux")
    assert r.rc == 0, r.err
    out = r.out
    made = dist / "llama.cpp-linux-unknown-hexagon.tar.gz"
    assert made.is_file() and str(made) in out and "sha256" in out
    assert cli("package", str(pkg), "-o", str(tmp_path / "again.tar.gz"), "--os", "linux").rc == 0
    assert made.read_bytes() == (tmp_path / "again.tar.gz").read_bytes()
    # "-o new/" names a directory to make, not a file called "new"
    r = cli("package", str(pkg), "-o", f"{tmp_path / 'new'}/", "--os", "linux")
    assert r.rc == 0, r.err
    assert (tmp_path / "new" / made.name).read_bytes() == made.read_bytes()


def _hexbuild(args: list[str], **kw) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not (k.startswith("HEXBUILD_") and k != "HEXBUILD_TEST_CACHE")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen([sys.executable, "-m", "hexbuild", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


@pytest.fixture
def big_pkg(pkg):
    """Random (incompressible) data, so that writing the tarball takes a while even on many cores."""
    with open(pkg / "lib" / "weights.bin", "wb") as f:
        for _ in range(128):
            f.write(os.urandom(1 << 20))
    return pkg


def _written(out_dir: Path) -> int:
    total = 0
    for part in out_dir.glob(".p.tar.gz.*.part"):
        try:
            total += part.stat().st_size
        except FileNotFoundError:
            pass
    return total


def test_ctrl_c_leaves_no_partial_file(big_pkg, tmp_path):
    out_dir = tmp_path / "dist"
    out_dir.mkdir()
    proc = _hexbuild(["package", str(big_pkg), "-o", str(out_dir / "p.tar.gz")])
    deadline = time.monotonic() + 60
    # Interrupt once the first MiB is on disk: well inside the write of ~128 MiB.
    while _written(out_dir) < (1 << 20):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the temporary tarball did not grow"
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert os.listdir(out_dir) == [], "a partial tarball was left behind"
    assert "Traceback" not in err


def test_write_error_mid_file_leaves_no_partial_file(big_pkg, tmp_path):
    """A real EFBIG half-way through (RLIMIT_FSIZE, as on a full or quota-limited disk)."""
    out_dir = tmp_path / "dist"
    out_dir.mkdir()

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))

    proc = _hexbuild(["package", str(big_pkg), "-o", str(out_dir / "p.tar.gz")], preexec_fn=limit)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 6, err
    assert os.listdir(out_dir) == []
    lines = error_lines(err)
    assert len(lines) == 1 and "cannot write" in lines[0] and "too large" in lines[0].lower()


def test_package_with_damaged_manifest_fails_cleanly(pkg, tmp_path, cli):
    (pkg / "manifest.json").write_text("{not json")
    r = cli("package", str(pkg), "-o", str(tmp_path / "x.tar.gz"))
    assert r.rc == 2 and not (tmp_path / "x.tar.gz").exists()  # docs/bad-input.md's row package-manifest-truncated
    lines = error_lines(r.err)
    assert len(lines) == 1 and "the package's manifest.json is damaged" in lines[0]
    assert cli("verify", str(pkg)).rc == 2  # one rule: verify does not guess the package's OS either
