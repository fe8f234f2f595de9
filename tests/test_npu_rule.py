"""hexbuild/artifacts/npu.py: the one rule for CPU-only and broken NPU packages, as run, bench,
serve, test and deploy follow it.

- on a virtual phone (real adbd): a package with the Hexagon host library and no skel for the
  phone's arch is an NPU package: deploy warns, the sessions asked for are kept, and the
  backend's failure lines make the run exit 12;
- on qemu: with the real open-toolchain build (CPU only): it runs with one warning, and HTP
  sessions asked for explicitly (flag or config) are exit 12 before anything runs or is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hexbuild.artifacts import write_manifest
from hexbuild.artifacts.npu import CPU, NPU, UNKNOWN, missing_skel_note, npu_support
from tests.infra.hexlog import HexFormats
from tests.test_dispatch import EUNABLETOLOAD, SKEL_URI, first_json, npu_program

SYSROOT = "/usr/aarch64-linux-gnu"


@pytest.fixture(scope="module")
def new_fmt(tree_0_3_36):
    return HexFormats(tree_0_3_36)


def files(*paths: str) -> list[dict]:
    return [{"path": p} for p in paths]


@pytest.mark.parametrize("manifest, want", [
    (None, UNKNOWN),
    ({"files": files("bin/llama-cli")}, UNKNOWN),  # a partial listing says nothing
    ({"htp_versions": [], "files": files("bin/llama-cli")}, CPU),
    ({"toolchain": "open", "files": files("bin/llama-cli", "lib/libggml-hexagon.so")}, CPU),
    ({"lacks": ["htp"]}, CPU),
    ({"files": files("lib/libggml.so", "lib/libllama.so")}, CPU),
    ({"files": files("lib/libggml-hexagon.so")}, NPU),  # no skel at all: still an NPU package
    ({"htp_versions": [], "files": files("lib/libggml-hexagon.so")}, NPU),
])
def test_what_a_manifest_brings_for_the_npu(manifest, want):
    assert npu_support(manifest) == want


def test_a_missing_skel_is_named_only_for_npu_packages_and_known_arches():
    npu = {"files": files("lib/libggml-hexagon.so", "lib/libggml-htp-v75.so")}
    note = missing_skel_note(npu, "v79")
    assert note and "libggml-htp-v79.so" in note and "v75" in note and "--htp v79" in note
    assert missing_skel_note(npu, "v75") is None and missing_skel_note(npu, None) is None
    assert missing_skel_note({"files": files("lib/libggml.so")}, "v79") is None


@pytest.fixture
def skel_less_package(tmp_path, new_fmt) -> Path:
    """An Android package with the host library and no skel (lost, or a hand-assembled package);
    its llama-completion prints what the real backend prints when the skel cannot load, then a
    CPU answer."""
    failing = [new_fmt.line("allocating new registry", 2), new_fmt.line("Arch version", 79, "disabled"),
               new_fmt.line("failed to open session :", "HTP0", SKEL_URI.format(0), EUNABLETOLOAD)]
    pkg = tmp_path / "pkg" / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (pkg / "bin" / "llama-completion").write_bytes(npu_program(tmp_path, failing).read_bytes())
    (pkg / "bin" / "llama-completion").chmod(0o755)
    (pkg / "lib" / "libggml-hexagon.so").write_bytes(b"not loaded by this test\n")
    write_manifest(pkg, {"os": "android"})
    return pkg


def test_npu_package_without_the_phones_skel(cli, phones, skel_less_package, tmp_path):
    phone = phones["SM8750"]  # v79
    spec = f"adb:{phone.serial}"
    r = cli("--json", "deploy", str(skel_less_package), "--target", spec, "--dest", "/data/local/tmp/npu-rule")
    assert r.rc == 0, r.err
    (res,) = r.json
    assert len(res["warnings"]) == 1 and "no skel for this v79 device" in res["warnings"][0]
    assert sum("no skel for this v79 device" in line for line in r.err.splitlines()) == 1
    r = cli("--json", "run", "completion", "-t", spec, "--dest", "/data/local/tmp/npu-rule", "--ndev", "2",
            "--model", "m.gguf", "--results-dir", str(tmp_path / "res"))
    assert r.rc == 12, r.err  # the backend's own lines are the evidence
    doc = first_json(r.out)
    assert doc["argv"][doc["argv"].index("--device") + 1] == "HTP0,HTP1"  # the sessions asked for were kept
    assert doc["dispatch"]["failed_session"] == "HTP0" and "0x80000406" in r.err
    r = cli("run", "completion", "-t", spec, "--dest", "/data/local/tmp/npu-rule", "--ndev", "2",
            "--allow-cpu-fallback", "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0 and "fell back to the CPU" in r.err and "once upon a time" in r.out


def test_session_failures_are_exit_12_whatever_the_manifest_says(cli, tmp_path, new_fmt):
    """A manifest that calls the package CPU only does not hide what the backend printed."""
    from tests.test_dispatch import install

    failing = [new_fmt.line("failed to open session :", "HTP0", SKEL_URI.format(0), EUNABLETOLOAD)]
    spec, _ = install(tmp_path, npu_program(tmp_path, failing), manifest={"lacks": ["htp"], "files": files("bin/llama-completion")})
    r = cli("--json", "run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"))
    assert r.rc == 12 and "HTP0 did not open" in r.err


@pytest.fixture
def qemu_env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)


def test_cpu_only_package_on_qemu(cli, qemu_env, tmp_path, real_linux_package, tiny_gguf):
    spec = f"qemu:{tmp_path}/inst"
    models = ["--models-dir", str(tiny_gguf.parent)]
    r = cli("--json", "deploy", str(real_linux_package), "--target", spec, "--ndev", "2")
    assert r.rc == 12 and "has no NPU libraries" in r.json["error"]["message"]
    assert not (tmp_path / "inst").exists()  # refused before any target was touched
    r = cli("--json", "deploy", str(real_linux_package), "--target", spec)
    assert r.rc == 0, r.err
    assert sum("runs on the CPU only" in line for line in r.err.splitlines()) == 1

    for asked in (["--ndev", "2"], ["--devices", "HTP0,HTP1"]):
        r = cli("--json", "run", "completion", "-t", spec, "--model", tiny_gguf.name, *models, *asked,
                "--results-dir", str(tmp_path / "res"))
        assert r.rc == 12 and "has no NPU libraries" in r.json["error"]["message"], r.err
    assert not (tmp_path / "res").exists()  # nothing ran
    r = cli("--json", "run", "completion", "-t", spec, "--model", tiny_gguf.name, *models,
            "--results-dir", str(tmp_path / "res"), "--", "-n", "0", "-p", "hi")  # no sampled bytes
    assert r.rc == 0, r.err
    assert r.json["dispatch"]["cpu_only"] and "--device" not in r.json["argv"]
    assert sum("runs on the CPU only" in line for line in r.err.splitlines()) == 1

    r = cli("--json", "run", "completion", "-t", spec, "--model", tiny_gguf.name, *models,
            "--results-dir", str(tmp_path / "res2"), env={"HEXBUILD_RUN_NDEV": "2"})  # the config asks too
    assert r.rc == 12 and "has no NPU libraries" in r.json["error"]["message"], r.err


def test_real_llama_bench_through_hexbuild_bench_on_qemu(cli, qemu_env, tmp_path, real_linux_package, tiny_gguf):
    """`hexbuild bench` drives the real llama-bench (argument and output drift would show here);
    without --ndev a CPU-only package benches on the CPU, with it the rule says exit 12."""
    spec = f"qemu:{tmp_path}/inst"
    assert cli("deploy", str(real_linux_package), "--target", spec).rc == 0
    common = ["-t", spec, "--model", tiny_gguf.name, "--models-dir", str(tiny_gguf.parent), "--threads", "2",
              "--ubatch", "32", "--db", str(tmp_path / "bench.sqlite")]
    r = cli("--json", "bench", *common, "--ndev", "2", "--out", str(tmp_path / "refused"))
    assert r.rc == 12 and "has no NPU libraries" in r.json["error"]["message"]
    r = cli("--json", "bench", *common, "--out", str(tmp_path / "out"), "--", "-p", "16", "-n", "4", "-r", "1")
    assert r.rc == 0, r.err
    tests = {row["test"]: row for row in r.json["results"]}
    assert set(tests) == {"pp16", "tg4"} and all(row["median_ts"] > 0 for row in tests.values())
    assert r.json["db_rows"] == 2


def test_real_llama_bench_on_qemu_takes_the_targets_defaults(cli, qemu_env, tmp_path, real_linux_package, tiny_gguf):
    """Without --threads, bench on qemu: runs the real llama-bench with this machine's cores and
    no --poll (a CPU-only package), as run does (runner/defaults.py); it used a phone's -t 6
    --poll 1000 and measured 250x too slow. The package is said to be CPU only, once, and the
    table shows CPU, not 'ndev 1'."""
    import json
    import os

    cores = len(os.sched_getaffinity(0))
    spec = f"qemu:{tmp_path}/inst"
    assert cli("deploy", str(real_linux_package), "--target", spec).rc == 0
    common = ["-t", spec, "--model", tiny_gguf.name, "--models-dir", str(tiny_gguf.parent)]
    r = cli("--json", "bench", *common, "--out", str(tmp_path / "out"), "--db", "", "--", "-p", "16", "-n", "4", "-r", "1")
    assert r.rc == 0, r.err
    (run,) = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert run["argv"][run["argv"].index("-t") + 1] == str(cores) and "--poll" not in run["argv"]
    assert {row["n_threads"] for row in r.json["results"]} == {cores} and {row["ndev"] for row in r.json["results"]} == {0}
    assert "| CPU |" in (tmp_path / "out" / "results.md").read_text()
    assert sum("runs on the CPU only" in line for line in r.err.splitlines()) == 1
    printed = cli("--json", "run", "completion", "--print", *common)
    assert printed.json["argv"][printed.json["argv"].index("-t") + 1] == str(cores)  # run renders the same
