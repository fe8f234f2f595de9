"""The memory roofline (hexbuild/bench/roofline.py, hexbuild/data/dram.toml): bytes read per decode
token from real GGUF files written with the gguf package, checked against figures computed by
hand from their tensor shapes on two SoCs; then bench over a virtual SM8650 phone (real adbd)
and run on a local: target print it with the bandwidth's source, the history keeps it and bench
compare shows it."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hexbuild.bench import roofline
from tests.infra.tiny_model import write_tiny_gguf
from tests.test_run_device import PERF_LOG, populate

Q4_0 = 18 / 32  # bytes per element: 32 weights in 16 bytes of nibbles and a 2-byte scale
Q8_0 = 34 / 32


def hand_weight_bytes(n_layer: int, n_embd: int, n_ff: int, n_vocab: int, per_elem: float) -> tuple[int, int]:
    """(weight bytes a decode token reads, embedding row bytes) of tiny_model's llama layout."""
    per_layer = 4 * n_embd * n_embd * per_elem + 3 * n_embd * n_ff * per_elem + 2 * n_embd * 4  # + two norms, F32
    output = n_vocab * n_embd * per_elem + n_embd * 4                                      # lm head + its norm
    row = n_embd * per_elem                                                                # one token_embd row
    return int(n_layer * per_layer + output + row), int(row)


def test_bytes_per_token_and_bounds_match_the_hand_computed_figures(tmp_path):
    small = write_tiny_gguf(tmp_path / "small.gguf")  # 2 layers, 128 wide, ff 256, vocab 320, Q4_0
    big = write_tiny_gguf(tmp_path / "big.gguf", n_layer=3, n_embd=256, n_head=8, n_ff=512, quant="Q8_0")
    for path, (n_layer, n_embd, n_head, n_ff, per) in ((small, (2, 128, 4, 256, Q4_0)), (big, (3, 256, 8, 512, Q8_0))):
        t = roofline.model_traffic(path)
        weights, row = hand_weight_bytes(n_layer, n_embd, n_ff, 320, per)
        assert (t.weight_bytes, t.embedding_bytes) == (weights, row)
        assert t.kv_per_position == n_layer * n_embd * 2  # K and V, n_head heads of n_embd / n_head
        # tg128 at depth 0: the average token attends to (128 + 1) / 2 positions, F16 K and V
        kv = int(n_layer * n_embd * 2 * 64.5 * 2)
        for soc, gbs in (("SM8650", 76.8), ("SM8750", 84.8)):
            r = roofline.decode(t, roofline.lookup(soc), 1000.0, positions=64.5)
            assert r["bytes_per_token"] == weights + kv and r["kv_bytes"] == kv
            assert r["peak_gbs"] == gbs and r["bound_ts"] == pytest.approx(gbs * 1e9 / (weights + kv), rel=1e-6)
            assert r["percent"] == pytest.approx(100 * 1000.0 / (gbs * 1e9 / (weights + kv)), abs=0.01)
            assert "LPDDR5X" in r["peak_source"] and r["soc"] == soc
    # the sessions hold the repacked matmul weights; norms stay apart (Q8_0 is repacked too)
    t = roofline.model_traffic(small)
    assert t.session_bytes == int(2 * (4 * 128 * 128 + 3 * 128 * 256) * Q4_0 + 320 * 128 * Q4_0)
    assert t.other_bytes == 2 * 2 * 128 * 4 + 128 * 4


def test_experts_count_at_the_share_each_token_uses(tmp_path):
    import gguf
    import numpy as np

    path = tmp_path / "moe.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for k, v in (("block_count", 1), ("embedding_length", 64), ("feed_forward_length", 128),
                 ("attention.head_count", 4), ("attention.head_count_kv", 2), ("expert_count", 8),
                 ("expert_used_count", 2)):
        w.add_uint32(f"llama.{k}", v)
    w.add_tensor("token_embd.weight", np.zeros((100, 64), np.float32))
    w.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((8, 128, 64), np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), np.float32))
    w.add_tensor("output.weight", np.zeros((100, 64), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    t = roofline.model_traffic(path)
    assert t.weight_bytes == 8 * 128 * 64 * 4 * 2 // 8 + 64 * 64 * 4 + 100 * 64 * 4 + 64 * 4
    assert t.kv_per_position == 1 * 2 * (16 + 16)  # GQA: 2 KV heads of 64 / 4
    assert any("2 of 8 experts" in n for n in t.notes)


def test_a_soc_without_a_published_bus_width_has_no_bound_and_says_so(tmp_path):
    t = roofline.model_traffic(write_tiny_gguf(tmp_path / "m.gguf"))
    r = roofline.decode(t, roofline.lookup("SM8550"), 50.0)
    assert r["percent"] is None and "bus width is not published" in r["note"] and "--peak-bandwidth" in r["note"]
    r = roofline.decode(t, roofline.lookup("SM8550"), 50.0, peak_gbs=67.2)
    assert r["peak_source"] == "--peak-bandwidth" and r["bound_ts"] == pytest.approx(67.2e9 / t.weight_bytes)
    assert roofline.decode(t, None, 1.0, soc="SM9999")["note"].startswith("SoC SM9999 is not in")
    # every row of the table names a source for each figure it gives, or says why it has none
    for row in roofline.dram_table().values():
        assert row.source or row.note, row.soc
        if row.peak_gbs:
            assert row.bus_bits and row.bus_source and row.peak_basis in ("stated", "derived"), row.soc
            assert row.peak_gbs == pytest.approx(row.data_rate_mts * row.bus_bits / 8 / 1000, rel=0.01), row.soc
    assert roofline.lookup("SM8650-AB").soc == "SM8650" and roofline.lookup("X1E-84-100").soc == "X1E"
    pre = roofline.prefill(t, roofline.lookup("SM8650"), 100.0)
    assert pre["bound_ts"] is None and "no published compute figure" in pre["note"]
    pre = roofline.prefill(t, roofline.lookup("X1E"), 100.0)
    assert pre["bound_ts"] == pytest.approx(45e12 / (2 * t.params), rel=1e-3) and pre["source"]


def test_bench_on_a_phone_prints_the_roofline_with_its_source_and_compare_shows_it(cli, tmp_path, phones,
                                                                                   fake_llama_bench):
    model = write_tiny_gguf(tmp_path / "m q4.gguf")
    dev = phones["SM8650"]
    dest, models = "/data/local/tmp/hb-roof/llama.cpp", "/data/local/tmp/hb-roof/gguf"
    spec = f"adb:{dev.serial}"
    populate(spec, dest, {"llama-bench": fake_llama_bench})
    from hexbuild.targets import parse_target

    with parse_target(spec) as t:
        t.write_file(f"{models}/m q4.gguf", b"GGUF")
    db = tmp_path / "bench.sqlite"
    common = ("bench", "-t", spec, "--dest", dest, "--models-dir", models, "--model", "m q4.gguf", "--threads", "4",
              "--ubatch", "256", "--repeat", "3", "--gguf", str(model), "--db", str(db))
    r = cli("--json", *common, "--out", str(tmp_path / "one"))
    assert r.rc == 0, r.err
    tg = next(s for s in r.json["results"] if s["kind"] == "eval")
    roof = tg["roofline"]
    t = roofline.model_traffic(model)
    per_token = t.weight_bytes + int(t.kv_per_position * 64.5 * 2)  # tg128 at depth 0, F16 KV
    assert roof["soc"] == "SM8650" and roof["bytes_per_token"] == per_token
    assert roof["percent"] == pytest.approx(100 * tg["median_ts"] * per_token / 76.8e9, abs=0.01)
    assert "Snapdragon 8 Gen 3" in roof["peak_source"]
    pp = next(s for s in r.json["results"] if s["kind"] == "prompt")
    assert pp["roofline"]["bound_ts"] is None and "no published compute figure" in pp["roofline"]["note"]
    md = (tmp_path / "one" / "results.md").read_text()
    assert "tg128 % of DRAM bound" in md and f"{roof['percent']:.1f}%" in md
    assert "SM8650: 76.8 GB/s (Qualcomm's Snapdragon 8 Gen 3 announcement" in md
    human = cli(*common, "--out", str(tmp_path / "two"))
    assert human.rc == 0 and "% of DRAM bound" in human.out and "76.8 GB/s" in human.out
    rows = sqlite3.connect(db).execute("SELECT kind, bytes_per_token, peak_gbs, roofline_pct FROM results").fetchall()
    assert {(k, b, p) for k, b, p, _ in rows if k == "eval"} == {("eval", per_token, 76.8)}
    assert all(pct is None for k, *_, pct in rows if k == "prompt")
    ids = [b for (b,) in sqlite3.connect(db).execute("SELECT DISTINCT bench_id FROM results")]
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", ids[0], "--candidate", ids[1],
            "--out", str(tmp_path / "cmp"))
    assert r.rc == 0, r.err
    row = next(x for x in r.json["rows"] if x["test"] == "tg128")
    assert row["baseline_pct_of_bound"] == pytest.approx(roof["percent"], abs=0.01)
    assert row["candidate_pct_of_bound"] is not None
    assert "% of DRAM bound (baseline → candidate)" in (tmp_path / "cmp" / "compare.md").read_text()


def test_run_reports_decode_against_the_bound(cli, tmp_path):
    model = write_tiny_gguf(tmp_path / "m.gguf")
    dest = tmp_path / "dev" / "llama.cpp"
    (tmp_path / "perf.sh").write_text(PERF_LOG)
    populate(f"local:{dest}", str(dest), {"llama-completion": tmp_path / "perf.sh"})
    r = cli("--json", "run", "completion", "-t", f"local:{dest}", "--model", str(model), "--soc", "SM8750",
            "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0, r.err
    roof = r.json["roofline"]["decode"]
    t = roofline.model_traffic(model)
    per_token = t.weight_bytes + int(t.kv_per_position * (197 + 16) * 2)  # 197 prompt tokens, 31 runs
    assert roof["bytes_per_token"] == per_token and roof["peak_gbs"] == 84.8
    assert roof["percent"] == pytest.approx(100 * 18.39 * per_token / 84.8e9, abs=0.01)
    assert "% of the SM8750 DRAM bound" in r.err and "Snapdragon 8 Elite" in r.err
    saved = json.loads(r.out)
    assert saved["roofline"]["prefill"]["note"].startswith("no published compute figure")
    # a local: target reports no SoC: without --soc the figure says what is missing
    r = cli("--json", "run", "completion", "-t", f"local:{dest}", "--model", str(model),
            "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0 and r.json["roofline"]["decode"]["note"].startswith("the device's SoC is unknown")


def test_soc_named_on_the_command_line_keeps_the_rows_labels(cli, tmp_path, fake_llama_bench):
    from tests.infra.runner_tools import make_install

    manifest = {"schema": 1, "llama_cpp": {"revision": "b7000-abc"},
                "files": [{"path": "bin/llama-bench", "sha256": "a" * 64},
                          {"path": "lib/libggml-hexagon.so", "sha256": "c" * 64}]}
    inst = make_install(tmp_path / "device" / "llama.cpp", {"llama-bench": fake_llama_bench}, manifest=manifest)
    model = write_tiny_gguf(tmp_path / "m.gguf")
    (tmp_path / "device" / "gguf").mkdir()
    (tmp_path / "device" / "gguf" / "m.gguf").write_bytes(b"GGUF")
    db = tmp_path / "b.sqlite"
    r = cli("--json", "bench", "-t", f"local:{inst}", "--models-dir", str(tmp_path / "device" / "gguf"), "--model",
            "m.gguf", "--threads", "4", "--gguf", str(model), "--soc", "SM8750", "--db", str(db),
            "--out", str(tmp_path / "out"))
    assert r.rc == 0, r.err
    tg = next(s for s in r.json["results"] if s["kind"] == "eval")
    assert tg["roofline"]["soc"] == "SM8750" and tg["roofline"]["peak_gbs"] == 84.8
    rows = sqlite3.connect(db).execute("SELECT revision, peak_gbs FROM results WHERE kind = 'eval'").fetchall()
    assert rows and all(rev == "b7000-abc" and gbs == 84.8 for rev, gbs in rows)
