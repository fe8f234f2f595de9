"""The inspect gate inside `verify --strict` and `release` (strict under CI=true): a package whose
NPU library has in-loop HVX spills and helpers in hot loops fails verification (exit 5) unless a
baseline accepts them; without a disassembler the gate is a warning, fatal under --strict (10)."""

from __future__ import annotations

import json

import pytest

from hexbuild import errors
from tests import elf_factory as ef
from tests import inspect_kernels as ik
from tests.test_release import release, report_of


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    clean = ef.make_package(root / "clean", os="android", htp=["v73"])
    planted = ef.make_package(root / "planted", os="android", htp=["v69", "v73"])
    ik.build(planted / "lib" / "libggml-htp-v73.so", "v73")
    return {"clean": clean, "planted": planted}


def test_verify_strict_runs_the_gate(packages, tmp_path, cli):
    r = cli("verify", str(packages["clean"]), "--strict", "--json")
    assert r.rc == 0, r.err
    gate = [c for c in r.json["checks"] if c["check"] == "inspect"]
    assert [c["status"] for c in gate] == ["ok"] and "no in-loop HVX spills" in gate[0]["detail"]

    assert cli("verify", str(packages["planted"])).rc == 0  # not strict: the gate does not run
    r = cli("verify", str(packages["planted"]), "--strict", "--json")
    assert r.rc == errors.VERIFY_FAILED
    failed = [c for c in r.json["checks"] if c["status"] == "fail"]
    assert [c["file"] for c in failed] == ["lib/libggml-htp-v73.so"]
    assert "spill_accumulators" in failed[0]["detail"] and "__hexagon_udivsi3" in failed[0]["detail"]
    assert any(c["file"] == "lib/libggml-htp-v69.so" and c["status"] == "ok" for c in r.json["checks"])

    base = tmp_path / "inspect.json"
    assert cli("inspect", str(packages["planted"]), "--write-baseline", str(base)).rc == 0
    r = cli("verify", str(packages["planted"]), "--strict", "--baseline", str(base), "--json")
    assert r.rc == 0, r.err
    assert any("within the baseline" in c["detail"] for c in r.json["checks"])
    assert cli("verify", str(packages["planted"]), "--baseline", str(base)).rc == errors.USAGE


def test_release_in_ci_fails_verify_on_the_gate_and_a_baseline_accepts(packages, tmp_path):
    dist = tmp_path / "dist"
    cp = release("--prebuilt", packages["planted"], "--dist", dist, env={"CI": "true"}, cwd=tmp_path)
    assert cp.returncode == errors.VERIFY_FAILED, cp.stderr
    report = report_of(dist)
    assert report["failed_stage"] == "verify (android)" and "in-loop HVX spills" in report["error"]["message"]

    cp = release("--prebuilt", packages["planted"], "--dist", dist, "--no-strict", env={"CI": "true"}, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr  # --no-strict: no gate

    base = tmp_path / "baselines" / "inspect.json"
    from hexbuild.artifacts.inspect import find_objdump, inspect_library, write_baseline

    write_baseline(base, [inspect_library(packages["planted"] / "lib" / n, find_objdump())
                          for n in ("libggml-htp-v69.so", "libggml-htp-v73.so")])
    (tmp_path / "hexbuild.toml").write_text('[inspect]\nbaseline = "baselines/inspect.json"\n')
    cp = release("--prebuilt", packages["planted"], "--dist", dist, env={"CI": "true"}, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    checks = report_of(dist)["stages"][1]["verify"]
    assert checks["ok"] and checks["failures"] == 0


def test_release_without_a_disassembler_is_a_strict_warning(packages, tmp_path):
    dist = tmp_path / "dist"
    cp = release("--prebuilt", packages["clean"], "--dist", dist, env={"CI": "true", "PATH": str(tmp_path)},
                 cwd=tmp_path)
    assert cp.returncode == errors.WARNINGS_FATAL, cp.stderr
    assert "llvm-19" in cp.stderr
    assert json.loads((dist / "release-report.json").read_text())["stages"][1]["status"] == "ok"
