"""hexbuild/bench/matrix.py: the llama-bench matrix, medians over repeats, and the JSON/CSV/markdown/PNG
outputs, end to end through a real target running a fake llama-bench that prints genuine JSONL
records (tests/tools/fake_llama_bench.sh). The same flow over real adbd is in test_run_device.py."""

import csv
import json
import struct
import subprocess

import pytest

from hexbuild.bench import matrix as bench
from hexbuild.errors import UsageError
from tests.infra.runner_tools import make_install

FACTORS = (1.0, 1.1, 1.5)  # what the fake multiplies successive runs by: median 1.1, mean 1.2


def expected_ts(kind: str, ndev: int, ubatch: int, threads: int, factor: float = 1.1) -> float:
    base = 100 * ndev + ubatch / 10 + threads if kind == "prompt" else 10 * ndev + threads
    return base * factor


def test_test_names_match_llama_bench():
    assert bench.test_name(512, 0) == "pp512"
    assert bench.test_name(0, 128) == "tg128"
    assert bench.test_name(512, 128) == "pp512+tg128"
    assert bench.test_name(512, 0, 4096) == "pp512 @ d4096"


def test_int_lists():
    assert bench.int_list("1, 2,4,2", "--ndev", maximum=16) == [1, 2, 4]
    with pytest.raises(UsageError, match="not a whole number"):
        bench.int_list("1,x", "--ndev")
    with pytest.raises(UsageError, match="out of range"):
        bench.int_list("17", "--ndev", maximum=16)


def test_summary_is_the_median_not_the_mean():
    rows = [{"target": "t", "ndev": 1, "model": "m", "n_batch": 2048, "n_ubatch": 512, "n_threads": 6,
             "test": "pp512", "kind": "prompt", "avg_ts": v} for v in (10.0, 11.0, 15.0)]
    (s,) = bench.summarize(rows)
    assert (s["median_ts"], s["min_ts"], s["max_ts"], s["n"]) == (11.0, 10.0, 15.0, 3)


def test_fake_bench_prints_records_llama_bench_fields(tmp_path, fake_llama_bench, tree_0_3_36):
    """The fake's JSONL carries exactly test::get_fields() of the real llama-bench.cpp."""
    import re

    src = (tree_0_3_36 / "tools/llama-bench/llama-bench.cpp").read_text()
    block = src[src.index("static const std::vector<std::string> & get_fields()"):]
    block = block[:block.index("};")]
    fields = re.findall(r'"(\w+)"', block)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    cp = subprocess.run(["sh", str(fake_llama_bench), "-m", "m.gguf", "-o", "jsonl", "-t", "4,6"],
                        cwd=tmp_path, capture_output=True, check=True)
    records = bench.jsonl_records(cp.stdout)
    assert len(records) == 4
    assert list(records[0])[:len(fields)] == fields
    assert list(records[0])[len(fields):] == ["samples_ns", "samples_ts"]


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch):
    """The default history database goes to <run.results_dir>/bench.sqlite: keep it out of the checkout."""
    monkeypatch.setenv("HEXBUILD_RUN_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture
def bench_install(tmp_path, fake_llama_bench, argv_echo):
    inst = make_install(tmp_path / "device" / "llama.cpp", {"llama-bench": fake_llama_bench,
                                                            "llama-cli": argv_echo})
    models = tmp_path / "device" / "gguf dir"
    models.mkdir()
    for name in ("a.gguf", "b model.gguf"):
        (models / name).write_bytes(b"GGUF")
    return inst, models


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_bench_matrix_end_to_end(cli, tmp_path, bench_install, monkeypatch):
    inst, models = bench_install
    out = tmp_path / "out"
    summary_file = tmp_path / "step-summary.md"
    summary_file.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    r = cli("--json", "bench", "-t", f"local:{inst}", "--ndev", "1,2", "--ubatch", "256,512",
            "--threads", "4,6", "--model", "a.gguf,b model.gguf", "--repeat", "3", "--out", str(out),
            "--models-dir", str(models))
    assert r.rc == 0, r.err
    doc = r.json
    assert doc["run_count"] == 2 * 2 * 3 and not doc["failures"]
    results = doc["results"]
    assert len(results) == 2 * 2 * 2 * 2 * 2  # ndev × model × ubatch × threads × (pp, tg)
    for s in results:
        assert s["n"] == 3
        assert s["median_ts"] == pytest.approx(expected_ts(s["kind"], s["ndev"], s["n_ubatch"], s["n_threads"]))
        assert s["min_ts"] == pytest.approx(expected_ts(s["kind"], s["ndev"], s["n_ubatch"], s["n_threads"], 1.0))
    assert {s["test"] for s in results} == {"pp512", "tg128"}
    assert {s["model"] for s in results} == {"a.gguf", "b model.gguf"}

    saved = json.loads((out / "results.json").read_text())
    assert saved["results"] == results and len(saved["records"]) == 3 * len(results)
    # every run went through the renderer: sessions, device list and JSONL output
    for run in saved["runs"]:
        argv = run["argv"]
        assert argv[argv.index("-o") + 1] == "jsonl" and argv[argv.index("-t") + 1] == "4,6"
        assert argv[argv.index("--ubatch-size") + 1] == "256,512"
        assert argv[argv.index("-m") + 1] == str(models / run["model"])
        names = [f"HTP{i}" for i in range(run["ndev"])]
        assert argv[argv.index("--device") + 1] == "/".join(names)
        assert run["env"].get("GGML_HEXAGON_NDEV") == (str(run["ndev"]) if run["ndev"] > 1 else None)

    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == len(results) and set(rows[0]) >= {"target", "ndev", "model", "test", "median_ts"}
    md = (out / "results.md").read_text()
    assert md.count("\n| local:") == 2 * 2 * 2 * 2 and "pp512 t/s" in md and "tg128 t/s" in md
    step = summary_file.read_text()
    assert step.startswith("earlier step\n") and "### hexbuild bench" in step and "pp512 t/s" in step
    w, h = png_size(out / "results.png")
    assert w > 600 and h > 300
    assert len(list((out / "logs").glob("*.log"))) == 12
    assert doc["db"] == str(tmp_path / "results" / "bench.sqlite") and doc["db_rows"] == len(saved["records"])


def test_bench_human_output_is_the_markdown_table(cli, tmp_path, bench_install):
    inst, models = bench_install
    r = cli("bench", "-t", f"local:{inst}", "--model", "a.gguf", "--threads", "4", "--ubatch", "128",
            "--out", str(tmp_path / "o"), "--models-dir", str(models))
    assert r.rc == 0, r.err
    assert r.out.startswith("| target | ndev | model |") and "| local:" in r.out
    assert "[1/1]" in r.err


def test_failed_runs_are_reported_and_results_kept(cli, tmp_path, bench_install):
    inst, models = bench_install
    out = tmp_path / "o"
    r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf,missing.gguf", "--threads", "4",
            "--out", str(out), "--models-dir", str(models))
    assert r.rc == 8
    err = r.json["error"]  # one JSON document: the error, with where the partial results are
    assert err["details"]["out"] == str(out) and err["details"]["failures"][0]["model"] == "missing.gguf"
    saved = json.loads((out / "results.json").read_text())
    assert [f["model"] for f in saved["failures"]] == ["missing.gguf"]
    assert {s["model"] for s in saved["results"]} == {"a.gguf"}
    assert "failed" in (out / "results.md").read_text()
    assert "1 of 2 llama-bench runs failed" in r.err


def test_bench_refuses_an_output_format_of_its_own(cli, tmp_path, bench_install):
    inst, models = bench_install
    r = cli("bench", "-t", f"local:{inst}", "--model", "a.gguf", "--out", str(tmp_path / "o"),
            "--models-dir", str(models), "--", "-o", "md")
    assert r.rc == 2 and "JSONL" in r.err


def test_bench_needs_a_model_and_a_target(cli, tmp_path, bench_install):
    inst, _ = bench_install
    r = cli("bench", "-t", f"local:{inst}")
    assert r.rc == 2 and "no model" in r.err
    r = cli("bench", "--model", "a.gguf")
    assert r.rc == 2 and "no target" in r.err


def test_results_are_written_as_the_users_files(cli, tmp_path, bench_install):
    """bench's results (JSON, CSV, markdown, chart) and its run logs get the mode a file the user
    writes gets (the umask's: 0644 under 022); they were 0600, hexbuild's private-state mode."""
    import os
    import stat

    inst, models = bench_install
    old = os.umask(0o022)
    try:
        r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf", "--out", str(tmp_path / "out"),
                "--models-dir", str(models), "--db", "")
    finally:
        os.umask(old)
    assert r.rc == 0, r.err
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"results.json", "results.csv", "results.md", "results.png"}
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: "0o644" for p in files}
