"""`hexbuild test ops` and `hexbuild test ppl`.

Real programs: test-backend-ops and llama-perplexity from the 0.3.36 tree built with the open toolchain
(tests/infra/llama_aarch64.py) run on the qemu: target, in a package built for the NPU whose
Hexagon side cannot run here: test-backend-ops then does what upstream's does without an NPU,
prints "OK" having tested nothing, and `test ops` fails saying so; the perplexity gate passes on
the same GGUF and fails, for real, when the CPU reference is another model. The NPU itself is
stood in for at the lowest layer only: a device program printing a real test-backend-ops log
(tests/data/logs, a BLAS backend with a fault injected below it) as the session's output."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hexbuild.checks import ops as ops_check
from hexbuild.checks.ppl import read_ppl
from tests import elf_factory as ef
from tests.infra.runner_tools import make_install
from tests.infra.tiny_model import write_tiny_gguf

LOGS = Path(__file__).parent / "data" / "logs"
SYSROOT = "/usr/aarch64-linux-gnu"


def log_printer(tmp_path: Path, log: str, rc: int, argv_out: Path) -> Path:
    """A test-backend-ops stand-in: records its argv, prints a real test-backend-ops log, exits rc."""
    script = tmp_path / f"tbo-{log}"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {argv_out}\ncat {LOGS / log}\nexit {rc}\n')
    script.chmod(0o755)
    return script


def junit(path: str) -> ET.Element:
    return ET.parse(path).getroot()


# -- test ops -------------------------------------------------------------------------------------
def test_summary_by_op_and_type_from_a_real_failing_log():
    s = ops_check.summarize((LOGS / "test-backend-ops-blas-fail.log").read_text().splitlines())
    rows = {(g["op"], g["type"]): g for g in s["by_op"]}
    assert s["failed"] == 2 and rows[("MUL_MAT", "f16")]["failed"] == 1 and rows[("MUL_MAT", "f32")]["failed"] == 1
    assert rows[("MUL_MAT", "q4_0")]["not_supported"] >= 1
    assert rows[("MUL_MAT", "f16")]["failures"][0]["case"].startswith("MUL_MAT(type_a=f16,type_b=f32,m=64,n=45,k=128")
    assert "ERR = 0.96" in rows[("MUL_MAT", "f16")]["failures"][0]["detail"]


def test_a_case_known_to_fail_on_phones_is_listed_not_counted(cli, tmp_path):
    """The virtual NPU's real log of MUL_MAT q4_0 on 0.3.28 (tests/data/logs): the one case llama.cpp's
    CI leaves out on phones fails there too; test-backend-ops exits 1 for it."""
    s = ops_check.summarize((LOGS / "test-backend-ops-vnpu-q4_0.log").read_text().splitlines())
    assert (s["passed"], s["failed"], s["known"]) == (12, 0, 1)
    assert "llama.cpp's CI leaves it out" in s["by_op"][0]["failures"][0]["known"]
    root = make_install(tmp_path / "dev" / "llama.cpp", {"test-backend-ops": log_printer(
        tmp_path, "test-backend-ops-vnpu-q4_0.log", 1, tmp_path / "argv.txt")})
    r = cli("--json", "test", "ops", "-t", f"local:{root}", "--out", str(tmp_path / "out"))
    assert r.rc == 0, r.err
    (dev,) = r.json["devices"]
    assert dev["verdict"] == "passed" and dev["known"] == 1 and "1 known to fail on phones too" in r.err
    md = (tmp_path / "out" / "results.md").read_text()
    assert "Known to fail on phones too" in md and "m=576,n=512,k=576" in md
    assert 'failures="0"' in (tmp_path / "out" / "junit.xml").read_text()
    r = cli("--json", "test", "ops", "-t", f"local:{root}", "--count-known", "--out", str(tmp_path / "strict"))
    assert r.rc == 13 and "m=576,n=512,k=576" in r.json["reason"], r.err


def test_ops_fail_by_name_on_a_broken_backend(cli, tmp_path, monkeypatch):
    argv_out = tmp_path / "argv.txt"
    root = make_install(tmp_path / "dev" / "llama.cpp",
                        {"test-backend-ops": log_printer(tmp_path, "test-backend-ops-blas-fail.log", 1, argv_out)})
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = cli("--json", "test", "ops", "-t", f"local:{root}", "--ndev", "2", "--out", str(tmp_path / "out"))
    assert r.rc == 13, r.err
    assert "MUL_MAT(type_a=f16,type_b=f32,m=64,n=45,k=128" in r.err.splitlines()[-2]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert not doc["ok"] and [d["device"] for d in doc["devices"]] == ["HTP0", "HTP1"]
    assert all(d["verdict"] == "failed" and d["failed"] == 2 for d in doc["devices"])
    argv = argv_out.read_text().split("\n")
    assert argv[:8] == ["test", "-o", "MUL_MAT,MUL_MAT_ID", "-b", "HTP0", "-p", "type(_a)?=(q4_0|q8_0|mxfp4),", "test"]
    root_xml = junit(doc["files"]["junit"])
    assert root_xml.get("failures") == "4"
    failing = [tc for tc in root_xml.iter("testcase") if tc.find("failure") is not None]
    assert {tc.get("name") for tc in failing} == {"MUL_MAT f16", "MUL_MAT f32"}
    assert "k=128" in failing[0].find("failure").text
    skipped = [tc for tc in root_xml.iter("testcase") if tc.find("skipped") is not None]
    assert any(tc.get("name") == "MUL_MAT iq2_xs" for tc in skipped)  # only "not supported" cases
    md = summary.read_text()
    assert "FAILED" in md and "| HTP1 | MUL_MAT | f16 | 1 | 1 | 0 | 2 |" in md and "`MUL_MAT(type_a=f32" in md


def test_ops_pass_on_a_sound_backend(cli, tmp_path):
    root = make_install(tmp_path / "dev" / "llama.cpp", {"test-backend-ops": log_printer(
        tmp_path, "test-backend-ops-blas-ok.log", 0, tmp_path / "argv.txt")})
    r = cli("--json", "test", "ops", "-t", f"local:{root}", "--types", "all", "-o", "MUL_MAT",
            "--out", str(tmp_path / "out"))
    assert r.rc == 0, r.err
    assert r.json["ok"] and r.json["devices"][0]["passed"] > 0 and r.json["devices"][0]["failed"] == 0
    assert "-p" not in (tmp_path / "argv.txt").read_text().split("\n")
    assert junit(r.json["files"]["junit"]).get("failures") == "0"


def test_ops_on_a_cpu_only_package_tested_nothing(cli, tmp_path, argv_echo):
    root = make_install(tmp_path / "dev" / "llama.cpp", {"test-backend-ops": argv_echo},
                        manifest={"htp_versions": [], "files": [{"path": "bin/test-backend-ops"}]})
    r = cli("test", "ops", "-t", f"local:{root}", "--out", str(tmp_path / "out"))
    assert r.rc == 13 and "nothing was tested" in r.err and "CPU only" in r.err
    assert not (tmp_path / "out" / "logs").exists()  # nothing ran


# -- real programs on the qemu: target ----------------------------------------------------------
@pytest.fixture
def npu_package(tmp_path, aarch64_llama_bin, monkeypatch):
    """The real AArch64 programs and libraries, plus genuine NPU-side files (a Hexagon skel and an
    AArch64 libggml-hexagon.so) so that the package is one built for the NPU: hexbuild asks for
    HTP sessions, and what runs is the real CPU build, as on a phone whose NPU is not reached."""
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    pkg = tmp_path / "pkg" / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    for tool in ("test-backend-ops", "llama-perplexity"):
        (pkg / "bin" / tool).write_bytes((aarch64_llama_bin / tool).read_bytes())
        (pkg / "bin" / tool).chmod(0o755)
    for lib in aarch64_llama_bin.glob("lib*.so*"):
        (pkg / "lib" / lib.name).write_bytes(lib.resolve().read_bytes())
    ef.aarch64_so(pkg / "lib" / "libggml-hexagon.so", os="linux")
    ef.hexagon_so(pkg / "lib" / "libggml-htp-v73.so", "v73")
    (pkg / "manifest.json").write_text(json.dumps({"os": "linux"}))
    return pkg


def deploy(cli, pkg, spec, *models):
    args = [a for m in models for a in ("--model", str(m))]
    r = cli("deploy", str(pkg), "--target", spec, *args)
    assert r.rc == 0, r.err


def test_real_test_backend_ops_says_ok_having_tested_nothing(cli, tmp_path, npu_package):
    spec = f"qemu:{tmp_path / 'board'}"
    deploy(cli, npu_package, spec)
    r = cli("--json", "test", "ops", "-t", spec, "--out", str(tmp_path / "out"))
    assert r.rc == 13, r.err
    log = Path(r.json["devices"][0]["log"]).read_text()
    assert "backends passed" in log and "OK" in log and r.json["devices"][0]["exit_code"] == 0  # upstream: OK
    assert r.json["devices"][0]["verdict"] == "nothing-tested" and "nothing was tested on HTP0" in r.err


def text_file(path: Path) -> Path:
    import random

    rnd = random.Random(3)
    path.write_text(" ".join(rnd.choice("the hello world is of to a".split()) for _ in range(600)))
    return path


def test_real_perplexity_gate_passes_and_fails(cli, tmp_path, npu_package):
    spec = f"qemu:{tmp_path / 'board'}"
    a = write_tiny_gguf(tmp_path / "tiny-a.gguf")
    b = write_tiny_gguf(tmp_path / "tiny-b.gguf", seed=99)
    deploy(cli, npu_package, spec, a, b)
    text = text_file(tmp_path / "text.txt")
    common = ["--text", str(text), "-c", "64", "--chunks", "2"]
    r = cli("--json", "test", "ppl", "-t", spec, "--model", "tiny-a.gguf", *common, "--out", str(tmp_path / "ok"))
    assert r.rc == 0, r.err
    doc = r.json
    assert doc["ok"] and doc["relative_diff"] == 0 and doc["htp"]["ppl"] == doc["cpu"]["ppl"] > 1
    assert doc["cpu"]["env"]["GGML_HEXAGON_NDEV"] == "0" and "none" in doc["cpu"]["argv"]
    assert doc["htp"]["dispatch"]["requested_devices"] == ["HTP0"]
    # a genuinely different result on the reference side: another model
    r = cli("--json", "test", "ppl", "-t", spec, "--model", "tiny-a.gguf", "--reference-model", "tiny-b.gguf",
            *common, "--out", str(tmp_path / "bad"))
    assert r.rc == 13
    assert "apart, more than 1.00%" in r.err
    bad = json.loads((tmp_path / "bad" / "results.json").read_text())
    assert bad["relative_diff"] > 0.01 and bad["cpu"]["ppl"] != bad["htp"]["ppl"]
    assert junit(bad["files"]["junit"]).find("testsuite/testcase/failure") is not None


def test_read_ppl():
    assert read_ppl("[1]12.5,[2]11.6631,\nFinal estimate: PPL = 11.6631 +/- 0.12345\n") == (11.6631, 0.12345, 2)
    assert read_ppl("[1]12.5,[2]11.7,\n") == (11.7, None, 2)
    assert read_ppl("error: failed to load model\n") == (None, None, 0)
