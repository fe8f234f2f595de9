"""Real llama.cpp programs (the 0.3.28 tree built for AArch64 Linux: the ``real_linux_package``
fixture) deployed and run for real: on the qemu: target, and over ssh:// on the virtual bullseye
board, where the package's glibc is newer than the board's so only --bundle-runtime makes it run.
The model is a tiny real GGUF (``tiny_gguf``)."""

from __future__ import annotations

import json

import pytest

from hexbuild.artifacts import glibc

SYSROOT = "/usr/aarch64-linux-gnu"
PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture
def real_package(real_linux_package):
    """The real open-toolchain package (tests/infra/real_build.py); a fixture that cannot be made
    fails these tests, it never skips them."""
    return real_linux_package


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    from tests.infra.docker_engine import cache_dir

    monkeypatch.setenv("HEXBUILD_TEST_CACHE", str(cache_dir()))  # the real build's caches stay shared
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)


def check_completion(doc: dict) -> None:
    assert doc["exit_code"] == 0
    perf = doc["results"]["perf"]
    assert perf["prompt_eval"]["tokens"] > 1 and perf["prompt_eval"]["tokens_per_second"] > 0
    assert perf["eval"]["runs"] == 15 and perf["eval"]["tokens_per_second"] > 0  # -n 16: the first comes from the prompt pass


def test_completion_on_the_qemu_target(cli, tmp_path, real_package, tiny_gguf):
    spec = f"qemu:{tmp_path}/inst"
    models = str(tmp_path / "models")
    r = cli("--json", "deploy", str(real_package), "-t", spec, "--model", str(tiny_gguf), "--models-dir", models)
    assert r.rc == 0, r.err
    r = cli("--json", "-q", "run", "completion", "-t", spec, "--models-dir", models, "--model", tiny_gguf.name,
            "--results-dir", str(tmp_path / "res"), "--", "-n", "16", "--ignore-eos", "-p", PROMPT)
    assert r.rc == 0, r.err
    check_completion(r.json)
    assert "--device" not in r.json["argv"]  # a CPU-only build: no HTP device is selected
    r = cli("--json", "-q", "run", "tool", "-t", spec, "--results-dir", str(tmp_path / "res"), "--",
            "test-backend-ops", "-o", "MUL_MAT")
    assert r.rc == 0, r.err
    assert r.json["results"]["backend_ops"] is not None


def test_completion_on_the_older_board_needs_the_bundled_runtime(cli, tmp_path, real_package, tiny_gguf,
                                                                   virtual_board, monkeypatch):
    for k, v in virtual_board.env.items():
        monkeypatch.setenv(k, v)
    need = json.loads(cli("--json", "verify", str(real_package), "--os", "linux").out)["glibc"]["needs"]["GLIBC"]
    assert glibc.key(need) > glibc.key(virtual_board.glibc)
    r = cli("verify", str(real_package), "--os", "linux", "--glibc", virtual_board.glibc)
    assert r.rc == 5 and f"a glibc {virtual_board.glibc} system cannot load" in r.err and "bin/llama-completion" in r.err

    dest, models = "/opt/llama.cpp", "/opt/gguf"
    r = cli("--json", "deploy", str(real_package), "-t", virtual_board.spec, "--dest", dest,
            "--models-dir", models, "--model", str(tiny_gguf))
    assert r.rc == 7 and f"has glibc {virtual_board.glibc}" in r.json[0]["error"]
    assert not virtual_board.path(dest).exists()

    r = cli("--json", "deploy", str(real_package), "-t", virtual_board.spec, "--dest", dest,
            "--models-dir", models, "--model", str(tiny_gguf), "--bundle-runtime")
    assert r.rc == 0, r.err
    r = cli("--json", "-q", "run", "completion", "-t", virtual_board.spec, "--dest", dest, "--models-dir", models,
            "--model", tiny_gguf.name, "--results-dir", str(tmp_path / "res"), "--",
            "-t", "2", "-n", "16", "--ignore-eos", "-p", PROMPT)
    assert r.rc == 0, r.err
    check_completion(r.json)
    assert r.json["argv"][0] == f"{dest}/runtime/ld-linux-aarch64.so.1"


def test_plan_follows_the_deployed_revision_else_the_newest(cli, tmp_path, real_package, tiny_gguf):
    """plan --target reads the rules the real build recorded and deploy copied to the qemu:
    install (the 0.3.28 tree: its row limit, GGML_HEXAGON_NDEV); with no revision at all it
    follows the newest tree hexbuild knows and names it (it assumed older rules: a 3.5 GiB
    budget and GGML_HEXAGON_NDEV)."""
    spec = f"qemu:{tmp_path}/inst"
    assert cli("deploy", str(real_package), "-t", spec).rc == 0
    r = cli("--json", "plan", "-m", str(tiny_gguf), "-t", spec)
    assert r.rc == 0, r.err
    deployed = r.json["rules"]
    assert (deployed["origin"], deployed["row_limit"]) == ("target", 16384) and list(r.json["env"]) == ["GGML_HEXAGON_NDEV"]
    r = cli("--json", "plan", "-m", str(tiny_gguf))
    assert r.rc == 0, r.err
    assumed = r.json["rules"]
    assert (assumed["origin"], assumed["revision"], assumed["row_limit"]) == ("assumed", "0c1e570", 0)
    assert assumed["revision"] != deployed["revision"] and list(r.json["env"]) == ["GGML_HEXAGON_DEVICES"]
    assert r.json["vmem"] == 3200 * 2 ** 20 and any("0c1e570 (llama-cpp-python 0.3.36)" in n for n in r.json["notes"])
