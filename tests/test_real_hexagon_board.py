"""What a board without a DSP shows the real backend: the real 0.3.28 package with libggml-hexagon.so
and its skels (built on the toolchain double, tests/infra/real_hexagon.py) deployed to the qemu:
target and to the virtual bullseye board (ssh://), and run. The real library loads and cannot open
a session (no libcdsprpc.so, no FastRPC node): the dispatch proof catches the backend's own lines,
exit 12 with its reason, `hexbuild explain` names the fix; with --allow-cpu-fallback real tokens
come from the CPU. The lines the backend printed are kept in tests/data/explain/ beside the ones
quoted from users (real-board-0.3.28.log), and must still match what it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexbuild import errors

SYSROOT = "/usr/aarch64-linux-gnu"
PROMPT = "The quick brown fox"
RECORDED = Path(__file__).parent / "data" / "explain" / "real-board-0.3.28.log"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    from tests.infra.docker_engine import cache_dir

    monkeypatch.setenv("HEXBUILD_TEST_CACHE", str(cache_dir()))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)


def backend_lines(text: str) -> list[str]:
    """The backend's lines, from "ggml-hex:" on (the run's time prefix differs every run)."""
    return [line[line.index("ggml-hex:"):] for line in text.splitlines() if "ggml-hex:" in line]


def run_both(cli, spec: str, models: str, model: str, res: Path, extra: list[str]) -> tuple:
    argv = ["--json", "-q", "run", "completion", "-t", spec, "--models-dir", models, "--model", model,
            "--results-dir", str(res), *extra]
    no = cli(*argv, "--", "-t", "2", "-n", "16", "--ignore-eos", "-p", PROMPT)
    yes = cli(*argv, "--allow-cpu-fallback", "--", "-t", "2", "-n", "16", "--ignore-eos", "-p", PROMPT)
    return no, yes


def check_fallback(no, yes, log_dir: Path) -> str:
    assert no.rc == errors.CPU_FALLBACK, no.err
    assert "failed to load libcdsprpc.so" in no.err  # the backend's own reason, in hexbuild's one line
    assert yes.rc == 0, yes.err
    # -q: no warning line (the run's own output may hold bytes that are no UTF-8); the document says why
    assert "libcdsprpc" in yes.json["dispatch"]["fallback_reason"]
    perf = yes.json["results"]["perf"]
    assert perf["eval"]["runs"] == 15 and perf["eval"]["tokens_per_second"] > 0  # real tokens, from the CPU
    logs = sorted(log_dir.rglob("*.log"))
    assert logs
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    lines = backend_lines(text)
    assert any("failed to load" in line and "libcdsprpc" in line for line in lines), lines
    return "\n".join(dict.fromkeys(lines))


def test_real_backend_on_the_qemu_target(cli, tmp_path, real_hexagon_package, tiny_gguf):
    spec, models = f"qemu:{tmp_path}/inst", str(tmp_path / "models")
    r = cli("--json", "deploy", str(real_hexagon_package), "-t", spec, "--model", str(tiny_gguf), "--models-dir", models)
    assert r.rc == 0, r.err
    no, yes = run_both(cli, spec, models, tiny_gguf.name, tmp_path / "res", [])
    lines = check_fallback(no, yes, tmp_path / "res")
    recorded = backend_lines(RECORDED.read_text())
    assert set(recorded) <= set(lines.splitlines()), "the backend no longer prints the recorded lines"
    r = cli("--json", "explain", str(RECORDED))
    assert r.rc == 0 and r.json["kind"] == "driver-not-loaded" and r.json["checks"] == ["fastrpc:library"]
    assert "hexbuild doctor --target" in r.json["fix"]


def test_real_backend_on_the_virtual_board(cli, tmp_path, real_hexagon_package, tiny_gguf, virtual_board,
                                           monkeypatch):
    for k, v in virtual_board.env.items():
        monkeypatch.setenv(k, v)
    dest, models = "/opt/hexagon/llama.cpp", "/opt/hexagon/gguf"  # the session's board is shared: a place of its own
    r = cli("--json", "deploy", str(real_hexagon_package), "-t", virtual_board.spec, "--dest", dest,
            "--models-dir", models, "--model", str(tiny_gguf), "--bundle-runtime")
    assert r.rc == 0, r.err
    no, yes = run_both(cli, virtual_board.spec, models, tiny_gguf.name, tmp_path / "res", ["--dest", dest])
    check_fallback(no, yes, tmp_path / "res")
    r = cli("--json", "doctor", "--target", virtual_board.spec, "--package", str(real_hexagon_package))
    assert r.rc == errors.ENVIRONMENT
    checks = {c["name"]: c for c in r.json["checks"]}
    lib = checks["device:fastrpc:library"]
    assert lib["status"] in ("fail", "missing") and "libcdsprpc" in json.dumps(lib), lib
