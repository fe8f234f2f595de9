"""hexbuild results parse, on real logs only.

* tests/data/logs/: unedited console output of llama.cpp programs built from the cached 0.3.20
  tree and run on the CPU (tests/data/logs/regenerate.py says how); the failing
  test-backend-ops log is the real program over a BLAS library with an injected fault.
* Device transcripts from the Hexagon docs of the cached llama.cpp trees (read at test time,
  never copied): the 4-session gpt-oss-20b run of developer.md and the README examples.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild import errors
from hexbuild.results import SCHEMA, buffer_device, parse_text

LOGS = Path(__file__).parent / "data" / "logs"
LOG_KEYS = {"source", "perf", "sampler", "offload", "model_buffers", "output_buffers", "compute_buffers",
            "kv_cache", "memory_breakdown", "devices", "hexagon", "bench", "backend_ops"}


def doc_blocks(path: Path) -> list[str]:
    """The fenced code blocks of a markdown file."""
    return re.findall(r"```[^\n]*\n(.*?)```", path.read_text(), re.S)


def block_with(path: Path, needle: str) -> str:
    found = [b for b in doc_blocks(path) if needle in b]
    assert found, f"no code block with {needle!r} in {path}"
    return found[0]


def parse_log(name: str) -> dict:
    with (LOGS / name).open(encoding="utf-8", errors="replace", newline="") as f:
        return parse_text(f, name)


def parse_block(text: str) -> dict:
    return parse_text(text.splitlines(keepends=True), "doc")


# -- device transcripts from the llama.cpp docs ----------------------------------------------------

def test_gpt_oss_four_sessions(tree_0_3_20):
    log = parse_block(block_with(tree_0_3_20 / "docs/backend/snapdragon/developer.md", "gpt-oss-20b"))
    assert set(log) == LOG_KEYS
    assert log["perf"] == {
        "load_ms": None,
        "prompt_eval": {"ms": 3843.67, "tokens": 197, "ms_per_token": 19.51, "tokens_per_second": 51.25},
        "eval": {"ms": 1686.13, "runs": 31, "ms_per_token": 54.39, "tokens_per_second": 18.39},
        "total": {"ms": 6266.30, "tokens": 228}, "unaccounted_ms": None, "graphs_reused": 30}
    assert log["offload"] == {"offloaded": 25, "total": 25}
    repack = {b["device"]: b["mib"] for b in log["model_buffers"] if b["kind"] == "repack"}
    assert repack == {"HTP0": 2923.59, "HTP1": 2505.94, "HTP2": 2505.94, "HTP3": 2088.28}
    plain = {b["buffer"]: b["mib"] for b in log["model_buffers"] if b["kind"] == "model"}
    assert plain == {"CPU": 1182.09, "HTP0": 7.75, "HTP1": 6.64, "HTP2": 6.64, "HTP3": 5.55}
    kv = log["kv_cache"]
    assert [c["kind"] for c in kv["caches"]] == ["non-SWA", "SWA"]
    assert kv["caches"][0] | {"buffers": None} == {
        "kind": "non-SWA", "buffers": None, "size_mib": 102.0, "cells": 8192, "layers": 12, "seqs": 1,
        "streams": 1, "k_type": "q8_0", "k_mib": 51.0, "v_type": "q8_0", "v_mib": 51.0}
    assert {b["buffer"]: b["mib"] for b in kv["caches"][1]["buffers"]} == {
        "HTP1": 0.80, "HTP3": 0.53, "HTP0": 1.06, "HTP2": 0.80}
    assert kv["total_mib"] == 105.19
    assert {b["buffer"]: b["mib"] for b in log["compute_buffers"]} == {
        "HTP0": 16.06, "HTP1": 16.06, "HTP2": 16.06, "HTP3": 16.06, "CPU": 98.19}
    assert log["output_buffers"] == [{"buffer": "CPU", "mib": 0.77}]
    devices = {d["device"]: d for d in log["devices"]}
    assert list(devices) == ["CPU", "HTP0", "HTP1", "HTP2", "HTP3"]
    assert devices["HTP0"] == {"device": "HTP0", "model_mib": 7.75, "repack_mib": 2923.59, "kv_mib": 26.56,
                               "compute_mib": 16.06, "output_mib": 0.0}
    rows = {r["name"]: r for r in log["memory_breakdown"]}
    assert rows["HTP2"] == {"name": "HTP2", "description": "Hexagon", "kind": "device", "total": 2048,
                            "free": 2048, "self": 0, "model": 0, "context": 0, "compute": 0, "unaccounted": 0}
    assert rows["Host"]["kind"] == "host" and (rows["Host"]["self"], rows["Host"]["model"],
                                               rows["Host"]["context"], rows["Host"]["compute"]) == (1476, 1208, 105, 162)
    assert rows["HTP0-REPACK"]["kind"] == "buffer_type" and rows["HTP0-REPACK"]["model"] == 2923
    assert len(rows) == 9
    assert log["hexagon"] is None and log["bench"] == [] and log["backend_ops"] is None


def test_readme_llama_cli_session_and_skel(tree_0_3_20):
    log = parse_block(block_with(tree_0_3_20 / "docs/backend/snapdragon/README.md", "Llama-3.2-1B-Instruct-Q4_0.gguf D=HTP0"))
    assert log["hexagon"] == {
        "arch": 79, "dma64": None, "ndev": 1,
        "sessions": [{"name": "HTP0", "status": "opened", "phys": None, "virt": None, "domain": None,
                      "peers": [], "session_id": 0, "domain_id": 3,
                      "uri": "file:///libggml-htp-v79.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0",
                      "skel": "libggml-htp-v79.so", "error": None, "code": None}],
        "errors": []}
    assert log["sampler"] == {"sampling_ms": 30.08, "samplers_ms": None, "runs": 487, "ms_per_token": 0.06,
                              "tokens_per_second": 16191.77}
    assert log["perf"]["load_ms"] == 617.94 and log["perf"]["graphs_reused"] == 473
    assert {d["device"]: d["repack_mib"] for d in log["devices"]} == {"CPU": 0.0, "HTP0": 504.0}


def test_readme_two_sessions(tree_0_3_20):
    log = parse_block(block_with(tree_0_3_20 / "docs/backend/snapdragon/README.md", "OLMoE"))
    assert [s["name"] for s in log["hexagon"]["sessions"]] == ["HTP0", "HTP1"]
    assert log["hexagon"]["arch"] == 81
    assert {d["device"]: d["kv_mib"] for d in log["devices"]} == {"CPU": 0.0, "HTP0": 306.0, "HTP1": 238.0}
    assert log["kv_cache"]["caches"][0]["kind"] is None and log["kv_cache"]["total_mib"] == 544.0


def test_readme_bench_table_and_op_test(tree_0_3_20):
    log = parse_block(block_with(tree_0_3_20 / "docs/backend/snapdragon/README.md", "run-bench.sh"))
    assert log["bench"] == [
        {"format": "markdown", "model": "llama 1B Q4_0", "size_bytes": round(729.75 * 1024 ** 2),
         "params": 1240000000, "backend": "HTP", "test": "pp128", "n_prompt": 128, "n_gen": 0, "n_depth": 0,
         "avg_ts": 169.42, "stddev_ts": 1.75, "build": "6a8cf8914",
         "fields": {"ngl": "99", "threads": "4", "n_batch": "128", "mmap": "0"}},
        {"format": "markdown", "model": "llama 1B Q4_0", "size_bytes": round(729.75 * 1024 ** 2),
         "params": 1240000000, "backend": "HTP", "test": "tg64", "n_prompt": 0, "n_gen": 64, "n_depth": 0,
         "avg_ts": 51.54, "stddev_ts": 1.13, "build": "6a8cf8914",
         "fields": {"ngl": "99", "threads": "4", "n_batch": "128", "mmap": "0"}},
    ]
    ops = log["backend_ops"]
    assert (ops["passed"], ops["failed"], ops["not_supported"]) == (3, 0, 0)
    assert ops["backends"] == [{"name": "HTP0", "tests_passed": None, "tests_total": None, "status": None}]


def test_newer_readme_device_names(tree_0_3_36):
    readme = tree_0_3_36 / "docs/backend/snapdragon/README.md"
    log = parse_block(block_with(readme, "gemma-2-2b-it-Q4_0.gguf"))
    assert log["hexagon"]["sessions"][0]["name"] == "HTP0:0"
    assert {b["buffer"]: b["mib"] for b in log["model_buffers"]} == {"CPU": 300.0, "HTP0:0": 1400.26}
    assert log["devices"][1]["device"] == "HTP0:0" and log["devices"][1]["model_mib"] == 1400.26
    ops = parse_block(block_with(readme, "test-backend-ops -b HTP0:0"))["backend_ops"]
    assert ops["passed"] == 3 and ops["backends"][0]["name"] == "HTP0:0"


def test_every_doc_block_with_llama_output_parses(tree_0_3_20, tree_0_3_36):
    # every transcript in the Snapdragon docs of both trees: nothing crashes, perf is consistent
    seen = 0
    for tree in (tree_0_3_20, tree_0_3_36):
        for md in sorted((tree / "docs/backend/snapdragon").glob("*.md")):
            for block in doc_blocks(md):
                try:
                    log = parse_block(block)
                except errors.ParseFailed:
                    continue
                seen += 1
                assert set(log) == LOG_KEYS
                json.dumps(log, allow_nan=False)
                if log["perf"] and log["perf"]["prompt_eval"]:
                    pe = log["perf"]["prompt_eval"]
                    assert pe["tokens_per_second"] == pytest.approx(1000 * pe["tokens"] / pe["ms"], rel=0.01)
    assert seen >= 8


# -- our own CPU runs ------------------------------------------------------------------------------

def check_perf_consistent(perf: dict) -> None:
    for key, count in (("prompt_eval", "tokens"), ("eval", "runs")):
        s = perf[key]
        assert s["ms_per_token"] == pytest.approx(s["ms"] / s[count], abs=0.011)
        assert s["tokens_per_second"] == pytest.approx(1000 * s[count] / s["ms"], rel=0.02)
    assert perf["total"]["tokens"] == perf["prompt_eval"]["tokens"] + perf["eval"]["runs"]


def test_llama_completion_cpu_log():
    log = parse_log("llama-completion-cpu.log")
    perf = log["perf"]
    assert perf["prompt_eval"]["tokens"] == 13 and perf["eval"]["runs"] == 15 and perf["graphs_reused"] == 14
    assert perf["load_ms"] > 0 and perf["unaccounted_ms"] is not None
    check_perf_consistent(perf)
    assert log["sampler"]["runs"] == 29 and log["sampler"]["sampling_ms"] >= log["sampler"]["samplers_ms"]
    assert log["model_buffers"] == [
        {"buffer": "CPU_Mapped", "device": "CPU", "kind": "model", "mib": 0.78},
        {"buffer": "CPU_REPACK", "device": "CPU", "kind": "repack", "mib": 0.74}]
    assert log["compute_buffers"] == [{"buffer": "CPU", "mib": 2.63}]  # printed by sched_reserve in 0.3.20
    assert log["kv_cache"]["caches"] == [{
        "kind": None, "buffers": [{"buffer": "CPU", "mib": 0.5}], "size_mib": 0.5, "cells": 256, "layers": 2,
        "seqs": 1, "streams": 1, "k_type": "f16", "k_mib": 0.25, "v_type": "f16", "v_mib": 0.25}]
    assert log["devices"] == [{"device": "CPU", "model_mib": 0.78, "repack_mib": 0.74, "kv_mib": 0.5,
                               "compute_mib": 2.63, "output_mib": 0.0}]
    assert [(r["name"], r["kind"]) for r in log["memory_breakdown"]] == [("Host", "host"), ("CPU_REPACK", "buffer_type")]
    assert log["offload"] is None and log["hexagon"] is None and log["bench"] == []


def test_infinite_rates_become_null():
    log = parse_log("llama-completion-n0-cpu.log")
    raw = (LOGS / "llama-completion-n0-cpu.log").read_text(errors="replace")
    assert "inf tokens per second" in raw
    assert log["perf"]["eval"]["tokens_per_second"] is None
    json.dumps(log, allow_nan=False)


def test_timestamped_coloured_log_parses_like_the_plain_one():
    raw = (LOGS / "llama-completion-prefixed-cpu.log").read_text(errors="replace")
    assert "\x1b[" in raw and re.search(r"\d\.\d\d\.\d{3}\.\d{3}", raw)
    log = parse_log("llama-completion-prefixed-cpu.log")
    plain = parse_log("llama-completion-cpu.log")
    for key in ("model_buffers", "compute_buffers", "kv_cache", "devices", "memory_breakdown"):
        assert log[key] == plain[key], key
    assert log["perf"]["prompt_eval"]["tokens"] == 13 and log["perf"]["eval"]["runs"] == 3
    check_perf_consistent(log["perf"])


@pytest.mark.parametrize("name,fmt", [("llama-bench-cpu.md.log", "markdown"), ("llama-bench-cpu.json.log", "json"),
                                      ("llama-bench-cpu.jsonl.log", "jsonl")])
def test_llama_bench_outputs(name, fmt):
    log = parse_log(name)
    rows = log["bench"]
    assert [r["format"] for r in rows] == [fmt, fmt]
    assert [(r["test"], r["n_prompt"], r["n_gen"]) for r in rows] == [("pp32", 32, 0), ("tg8", 0, 8)]
    for r in rows:
        assert r["model"] == "llama ?B Q4_0" and r["backend"] == "BLAS" and r["build"] == "f49e917"
        assert r["avg_ts"] > 0 and r["stddev_ts"] >= 0
        assert r["size_bytes"] == pytest.approx(862208, rel=0.01) and r["params"] == pytest.approx(1459456, rel=0.01)
    if fmt != "markdown":
        assert rows[0]["size_bytes"] == 862208 and rows[0]["params"] == 1459456
        assert rows[0]["fields"]["n_threads"] == 2 and len(rows[0]["fields"]["samples_ts"]) == 2
        assert rows[0]["avg_ts"] == pytest.approx(sum(rows[0]["fields"]["samples_ts"]) / 2, rel=0.01)
    else:
        assert rows[0]["fields"] == {"threads": "2"}


def test_test_backend_ops_ok():
    ops = parse_log("test-backend-ops-blas-ok.log")["backend_ops"]
    assert (ops["passed"], ops["failed"], ops["not_supported"], ops["skipped"]) == (4, 0, 50, 0)
    assert ops["backends"] == [{"name": "BLAS", "tests_passed": 4, "tests_total": 4, "status": "OK"},
                               {"name": "CPU", "tests_passed": None, "tests_total": None, "status": "SKIPPED"}]
    assert (ops["backends_passed"], ops["backends_total"]) == (2, 2) and ops["failures"] == []


def test_test_backend_ops_failures():
    raw = (LOGS / "test-backend-ops-blas-fail.log").read_text()
    assert "\x1b[1;31mFAIL\x1b[0m" in raw  # the real colour codes are in the log
    ops = parse_log("test-backend-ops-blas-fail.log")["backend_ops"]
    assert (ops["passed"], ops["failed"], ops["not_supported"]) == (2, 2, 50)
    assert ops["backends"][0] == {"name": "BLAS", "tests_passed": 2, "tests_total": 4, "status": "FAIL"}
    assert (ops["backends_passed"], ops["backends_total"]) == (1, 2)
    cases = [f["case"] for f in ops["failures"]]
    assert cases == ["MUL_MAT(type_a=f16,type_b=f32,m=64,n=45,k=128,bs=[8,1],nr=[4,1],per=[0,1,2,3],k_v=0,o=1)",
                     "MUL_MAT(type_a=f32,type_b=f32,m=64,n=77,k=77,bs=[12,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"]
    # the same list test-backend-ops prints under "Failing tests:"
    listed = raw.split("Failing tests:\n", 1)[1].split("  Backend")[0].split()
    assert cases == listed
    f = ops["failures"][0]
    assert f["backend"] == "BLAS" and f["op"] == "MUL_MAT" and f["params"].startswith("type_a=f16")
    assert re.fullmatch(r"\[MUL_MAT\] ERR = [\d.]+ > 0\.000500000", f["detail"])


# -- the command ---------------------------------------------------------------------------------

def test_cli_json_several_logs(cli):
    r = cli("results", "parse", str(LOGS / "llama-bench-cpu.md.log"), str(LOGS / "test-backend-ops-blas-ok.log"), "--json")
    assert r.rc == 0, r.err
    data = r.json
    assert data["schema"] == SCHEMA
    assert [log["source"] for log in data["logs"]] == [str(LOGS / "llama-bench-cpu.md.log"),
                                                       str(LOGS / "test-backend-ops-blas-ok.log")]
    for log in data["logs"]:
        assert set(log) == LOG_KEYS


def test_cli_human(cli):
    r = cli("results", "parse", str(LOGS / "test-backend-ops-blas-fail.log"), str(LOGS / "llama-completion-cpu.log"))
    assert r.rc == 0, r.err
    assert "2 OK, 2 FAIL, 50 not supported" in r.out
    # failing cases are whole lines, ready for test-backend-ops -o/-p
    assert "FAIL MUL_MAT(type_a=f32,type_b=f32,m=64,n=77,k=77,bs=[12,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)\n" in r.out
    assert re.search(r"CPU\s+│\s+0\.78\s+│\s+0\.74\s+│\s+0\.50\s+│\s+2\.63", r.out)


def test_cli_stdin(cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO((LOGS / "llama-bench-cpu.jsonl.log").read_text()))
    r = cli("--json", "results", "parse", "-")
    assert r.rc == 0, r.err
    assert r.json["logs"][0]["source"] == "-" and len(r.json["logs"][0]["bench"]) == 2


def test_stdin_through_a_pipe():
    text = (LOGS / "test-backend-ops-blas-fail.log").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "hexbuild", "results", "parse", "-", "--json"], input=text,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["logs"][0]["backend_ops"]["failed"] == 2


def test_nothing_recognizable(cli, tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\nthis is not llama.cpp output\n| a | b |\n[\n")
    r = cli("results", "parse", str(junk))
    assert r.rc == errors.PARSE_FAILED == 9
    assert r.err.count("\n") == 1 and "no llama.cpp output recognized" in r.err and "Traceback" not in r.err
    r = cli("results", "parse", str(junk), "--json")
    assert r.rc == 9 and r.json["error"]["type"] == "parse"
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert cli("results", "parse", str(empty)).rc == 9


def test_prose_about_the_backend_is_not_its_output(cli, tmp_path):
    """Text that names ggml-hex (the reference of `run` and `explain`, an issue comment) is not a
    backend line: no invented Hexagon error, and nothing recognizable is exit 9."""
    docs = Path(__file__).resolve().parent.parent / "docs" / "commands"
    for page in ("run.md", "explain.md"):
        assert "ggml-hex" in (docs / page).read_text()
        r = cli("results", "parse", str(docs / page), "--json")
        assert r.rc == 9, (page, r.out)
    notes = tmp_path / "notes.md"
    notes.write_text("explain finds the first `ggml-hex` failure in a log\nsee 'ggml-hex: failed to open "
                     "session' in the docs\nggml-hex: failed to open session 1 : error 0x80000406\n")
    log = cli("results", "parse", str(notes), "--json").json["logs"][0]
    assert log["hexagon"]["errors"] == ["ggml-hex: failed to open session 1 : error 0x80000406"]


def test_a_log_without_the_arch_line_names_no_version(cli):
    """The real backend on a machine without FastRPC prints no arch line: the table said
    'hexagon vNone'."""
    log = Path(__file__).parent / "data" / "explain" / "real-board-0.3.28.log"
    r = cli("results", "parse", str(log))
    assert r.rc == 0, r.err
    line = next(ln for ln in r.out.splitlines() if ln.startswith("hexagon"))
    assert "None" not in line and "arch not printed" in line, line


def test_missing_log(cli, tmp_path):
    r = cli("results", "parse", str(tmp_path / "nope.log"))
    assert r.rc == errors.USAGE and "no such file" in r.err


def test_a_stray_bracket_line_does_not_swallow_the_log():
    lines = ["[\n"] + (LOGS / "llama-completion-cpu.log").read_text(errors="replace").splitlines(keepends=True)
    log = parse_text(lines, "x")
    assert log["perf"]["prompt_eval"]["tokens"] == 13 and log["devices"]


@pytest.mark.parametrize("name,device,kind", [("HTP0-REPACK", "HTP0", "repack"), ("CPU_REPACK", "CPU", "repack"),
                                              ("CPU_Mapped", "CPU", "model"), ("HTP0:0", "HTP0:0", "model"),
                                              ("HTP12", "HTP12", "model"), ("CUDA0", "CUDA0", "model")])
def test_buffer_device(name, device, kind):
    assert buffer_device(name) == (device, kind)


def test_parse_is_fast_on_a_large_log():
    # 200 copies of the gpt-oss-sized completion log: ~1.7 MB, parsed in well under a second per MB
    import time

    lines = (LOGS / "llama-completion-cpu.log").read_text(errors="replace").splitlines(keepends=True) * 200
    start = time.perf_counter()
    log = parse_text(lines, "big")
    elapsed = time.perf_counter() - start
    assert log["perf"]["eval"]["runs"] == 15
    assert elapsed < 2.0, elapsed


def test_an_interrupted_llama_bench_json_run_keeps_its_finished_rows():
    # llama-bench -o json stopped after its first test: the array never gets its closing "]"
    lines = (LOGS / "llama-bench-cpu.json.log").read_text().splitlines(keepends=True)
    first_end = next(i for i, ln in enumerate(lines) if ln.rstrip() == "  },")  # printer: "  }" then ",\n"
    log = parse_text(lines[: first_end + 1], "x")
    assert [r["test"] for r in log["bench"]] == ["pp32"]
    assert log["bench"][0]["size_bytes"] == 862208


def test_windows_line_endings():
    text = (LOGS / "llama-completion-cpu.log").read_text(errors="replace").replace("\n", "\r\n")
    log = parse_text(io.StringIO(text, newline=""), "x")
    assert log == parse_log("llama-completion-cpu.log") | {"source": "x"}
