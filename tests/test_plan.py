"""hexbuild plan: GGUF layer bytes, llama.cpp's layer placement, and the balanced split.

Models are real GGUF files written with the `gguf` package. The big gpt-oss-20b-shaped one
has the real model's tensor table (24 layers, 459 tensors of F32/Q4_0/MXFP4/Q8_0) and a sparse
data section, so it reads as 11.8 GB while taking a few KB on disk.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexbuild import errors
from hexbuild.plan_rules import PlanRules
from hexbuild.plan import (DEFAULT_VMEM, balance, llama_assign, make_plan, min_max_cap, parse_size,
                           ratios_for, read_gguf_header, read_model, split_ends)

MiB = 1024 ** 2
# The rules of the trees up to 0.3.28 (the developer.md gpt-oss log is from one): the lm-head
# (201088 rows) stays on the CPU.
LIMITED = PlanRules(revision="0.3.28", repack_types=["IQ4_NL", "MXFP4", "Q4_0", "Q4_1", "Q8_0"], row_limit=16384,
                    origin="source")


# -- GGUF writers -------------------------------------------------------------------------------

def write_sparse_gguf(path: Path, arch: str, n_layer: int, tensors, split_max_tensors: int = 0) -> None:
    """A GGUF whose tensor table is real and whose data section is a hole (ftruncate)."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    w.add_block_count(n_layer)
    for name, ne, qtype in tensors:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        w.add_tensor_info(name, list(reversed(ne)), np.dtype(np.float32), int(np.prod(ne)) // block * size,
                          raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for fout, infos in zip(w.fout, w.tensors):
        start = w.ggml_pad(fout.tell(), w.data_alignment)
        fout.truncate(start + sum(w.ggml_pad(t.nbytes, w.data_alignment) for t in infos.values()))
    w.close()


def gpt_oss_20b_tensors():
    """The tensor table of gpt-oss-20b-Q4_0.gguf (developer.md: 289 f32, 96 q4_0, 2 q8_0, 72 mxfp4)."""
    from gguf import GGMLQuantizationType as T

    E, V = 2880, 201088
    t = [("token_embd.weight", [E, V], T.Q8_0)]
    for il in range(24):
        p = f"blk.{il}."
        t += [(p + "attn_norm.weight", [E], T.F32), (p + "post_attention_norm.weight", [E], T.F32),
              (p + "attn_q.weight", [E, 4096], T.Q4_0), (p + "attn_q.bias", [4096], T.F32),
              (p + "attn_k.weight", [E, 512], T.Q4_0), (p + "attn_k.bias", [512], T.F32),
              (p + "attn_v.weight", [E, 512], T.Q4_0), (p + "attn_v.bias", [512], T.F32),
              (p + "attn_output.weight", [4096, E], T.Q4_0), (p + "attn_output.bias", [E], T.F32),
              (p + "attn_sinks.weight", [64], T.F32),
              (p + "ffn_gate_inp.weight", [E, 32], T.F32), (p + "ffn_gate_inp.bias", [32], T.F32),
              (p + "ffn_gate_exps.weight", [E, E, 32], T.MXFP4), (p + "ffn_gate_exps.bias", [E, 32], T.F32),
              (p + "ffn_up_exps.weight", [E, E, 32], T.MXFP4), (p + "ffn_up_exps.bias", [E, 32], T.F32),
              (p + "ffn_down_exps.weight", [E, E, 32], T.MXFP4), (p + "ffn_down_exps.bias", [E, 32], T.F32)]
    t += [("output_norm.weight", [E], T.F32), ("output.weight", [E, V], T.Q8_0)]
    return t


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "gpt-oss-20b-Q4_0.gguf"
    write_sparse_gguf(path, "gpt-oss", 24, gpt_oss_20b_tensors())
    assert path.stat().st_size > 10 * 1024 ** 3 and path.stat().st_blocks * 512 < 1024 ** 2
    return path


def write_real_gguf(path: Path, layer_types, n_embd: int = 64, n_vocab: int = 96) -> None:
    """A small GGUF with real (quantized) data; layer i's matmul weights have type layer_types[i]."""
    import gguf
    from gguf.quants import quantize

    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(len(layer_types))

    def add(name, shape, qtype):
        data = rng.standard_normal(shape).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)

    F32 = gguf.GGMLQuantizationType.F32
    add("token_embd.weight", (n_vocab, n_embd), gguf.GGMLQuantizationType.Q8_0)
    for il, qtype in enumerate(layer_types):
        add(f"blk.{il}.attn_norm.weight", (n_embd,), F32)
        add(f"blk.{il}.attn_q.weight", (n_embd, n_embd), qtype)
        add(f"blk.{il}.ffn_up.weight", (2 * n_embd, n_embd), qtype)
    add("output_norm.weight", (n_embd,), F32)
    add("output.weight", (n_vocab, n_embd), gguf.GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run_cli(cli, *argv: str) -> tuple[int, str, str]:
    r = cli(*argv)  # tests/infra/cli.py: the real CLI in-process, UI state reset
    return r.rc, r.out, r.err


# -- sizes ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("3.5GiB", 3584 * MiB), ("3584MiB", 3584 * MiB), ("3758096384", 3758096384), ("3.5G", 3584 * MiB),
    ("2048 MiB", 2048 * MiB), ("1GB", 10 ** 9), ("512k", 512 * 1024),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "3.5XB", "0", "-1GiB", "1.5.2G"])
def test_parse_size_rejects(text):
    with pytest.raises(errors.UsageError):
        parse_size(text)


# -- llama.cpp's placement rule --------------------------------------------------------------------

def test_default_split_matches_the_real_gpt_oss_log():
    # developer.md: 24 layers + output on 4 sessions: HTP0 7 layers (2923.59 MiB = 7 x 417.66),
    # HTP1/HTP2 6 layers (2505.94), HTP3 5 layers + the output layer (2088.28)
    counts = np.bincount(llama_assign([1, 1, 1, 1], 24), minlength=4).tolist()
    assert counts == [7, 6, 6, 6]


def test_default_split_matches_the_real_olmoe_log():
    # docs/backend/snapdragon/README.md: OLMoE (16 layers) on 2 sessions: HTP0-REPACK 2025 MiB,
    # HTP1-REPACK 1575 MiB, 225 MiB per layer, so 9 layers and 7 layers + output
    assert np.bincount(llama_assign([1, 1], 16)).tolist() == [9, 8]


def test_a_layer_on_a_split_point_goes_to_the_next_device():
    # std::upper_bound: layer 2 of 4 sits exactly on the 0.5 split point, so it goes to device 1
    assert llama_assign([1, 1], 3) == [0, 0, 1, 1]
    assert llama_assign([3, 1], 3) == [0, 0, 0, 1]


def test_all_zero_ratios_mean_the_default_split():
    assert llama_assign([0, 0, 0], 10) == llama_assign([1, 1, 1], 10)


def test_a_zero_ratio_device_gets_no_layer():
    assignment = llama_assign([1, 0, 1], 9)
    assert 1 not in assignment and set(assignment) == {0, 2}


def brute_force_min_max(weights, k):
    n = len(weights)
    best = None
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0, *cuts, n)
        worst = max(sum(weights[a:b]) for a, b in zip(bounds, bounds[1:]))
        best = worst if best is None else min(best, worst)
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=10), st.data())
def test_min_max_cap_is_exact_and_the_split_reaches_it(weights, data):
    k = data.draw(st.integers(min_value=1, max_value=len(weights)))
    cap = min_max_cap(weights, k)
    assert cap == brute_force_min_max(weights, k)
    ends = split_ends(weights, k, cap)
    assert len(ends) == k and ends[-1] == len(weights)
    starts = [0] + ends[:-1]
    assert all(a < b for a, b in zip(starts, ends))  # no empty group
    assert max(sum(weights[a:b]) for a, b in zip(starts, ends)) == cap


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=300), st.data())
def test_ratios_reproduce_any_contiguous_split_exactly(n_items, data):
    k = data.draw(st.integers(min_value=1, max_value=min(15, n_items)))
    cuts = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=n_items - 1), min_size=k - 1,
                                    max_size=k - 1))) if k > 1 else []
    ends = cuts + [n_items]
    expected = [g for g, (a, b) in enumerate(zip([0] + ends[:-1], ends)) for _ in range(a, b)]
    assert llama_assign(ratios_for(ends, n_items), n_items - 1) == expected


# -- reading GGUF --------------------------------------------------------------------------------

def test_read_model_sums_layers_like_llama_cpp(gpt_oss):
    layout = read_model(gpt_oss, LIMITED)
    assert layout.arch == "gpt-oss" and layout.n_layer == 24 and len(layout.layers) == 25
    # every repeating layer: 4 Q4_0 attention weights + 3 MXFP4 expert tensors = 417.66 MiB
    assert {layer.htp_bytes for layer in layout.layers[:24]} == {437944320}
    assert round(layout.layers[0].htp_bytes / MiB, 2) == 417.66
    # token_embd is the input layer (CPU); output.weight (201088 rows) is over the HTP row limit
    assert layout.input_bytes == 615329280 and layout.input_tensors == 1
    out = layout.layers[24]
    assert out.name == "output" and out.htp_bytes == 0 and out.cpu_bytes == 615329280
    assert out.other_bytes == 2880 * 4 and out.tensors == 2  # output_norm, output.weight
    assert layout.notes and "16384" in layout.notes[0]


def test_without_the_row_limit_the_lm_head_counts_on_the_last_session(gpt_oss):
    layout = read_model(gpt_oss, dataclasses.replace(LIMITED, row_limit=0))
    assert layout.layers[24].htp_bytes == 615329280 and layout.layers[24].cpu_bytes == 0
    plan = make_plan(layout, ndev=4)
    default = plan["default_split"]["per_session_bytes"]
    assert round(default[3] / MiB, 2) == round(2088.28 + 586.82, 2)
    assert plan["balance"] <= balance(default)


def test_header_reader_agrees_with_gguf_reader(gpt_oss, tmp_path):
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFReader

    small = tmp_path / "small.gguf"
    write_real_gguf(small, [T.Q4_0, T.Q8_0, T.F16])
    for path in (gpt_oss, small):
        header = read_gguf_header(path)
        reader = GGUFReader(str(path))
        assert header.data_offset == reader.data_offset
        assert header.tensors == [(t.name, t.tensor_type.name, [int(d) for d in t.shape], int(t.n_bytes),
                                   t.data_offset - reader.data_offset) for t in reader.tensors]
        arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")
        assert header.fields["general.architecture"] == arch
        assert header.fields[f"{arch}.block_count"] == int(reader.fields[f"{arch}.block_count"].parts[-1][0])


def test_a_big_vocabulary_is_read_quickly(tmp_path):
    import time

    import gguf

    path = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    w.add_block_count(1)
    w.add_token_list([f"token{i}" for i in range(201088)])  # gpt-oss-20b's vocabulary size
    w.add_token_types([1] * 201088)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((32, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    start = time.perf_counter()
    header = read_gguf_header(path)
    assert time.perf_counter() - start < 1.0  # GGUFReader needs about 13 s for this header
    assert [t[0] for t in header.tensors] == ["blk.0.attn_q.weight"]


def test_real_gguf_bytes_are_the_tensor_sizes(tmp_path):
    from gguf import GGMLQuantizationType as T

    path = tmp_path / "mixed.gguf"
    write_real_gguf(path, [T.Q4_0, T.Q8_0, T.Q5_0, T.F16, T.MXFP4])
    layout = read_model(path)
    per_layer = 64 * 64 + 128 * 64  # attn_q + ffn_up elements
    assert [layer.htp_bytes for layer in layout.layers] == [
        per_layer // 32 * 18, per_layer // 32 * 34, 0, 0, per_layer // 32 * 17, 96 * 64 // 32 * 18]
    assert layout.layers[2].other_bytes == per_layer // 32 * 22 + 64 * 4  # Q5_0 is not repacked
    assert layout.layers[3].other_bytes == per_layer * 2 + 64 * 4
    assert layout.input_bytes == 96 * 64 // 32 * 34


def test_split_gguf_reads_every_shard(tmp_path):
    tensors = gpt_oss_20b_tensors()
    write_sparse_gguf(tmp_path / "whole.gguf", "gpt-oss", 24, tensors)
    write_sparse_gguf(tmp_path / "split.gguf", "gpt-oss", 24, tensors, split_max_tensors=200)
    shards = sorted(p.name for p in tmp_path.glob("split-*.gguf"))
    assert shards == ["split-00001-of-00003.gguf", "split-00002-of-00003.gguf", "split-00003-of-00003.gguf"]
    whole = read_model(tmp_path / "whole.gguf", LIMITED)
    split = read_model(tmp_path / shards[0], LIMITED)
    assert [(x.htp_bytes, x.other_bytes, x.cpu_bytes) for x in split.layers] == \
           [(x.htp_bytes, x.other_bytes, x.cpu_bytes) for x in whole.layers]
    with pytest.raises(errors.UsageError, match="pass the first one"):
        read_model(tmp_path / shards[1])
    (tmp_path / shards[2]).unlink()
    with pytest.raises(errors.UsageError, match="missing shard"):
        read_model(tmp_path / shards[0])


# -- the plan ------------------------------------------------------------------------------------

def best_contiguous_balance(weights, k):
    return brute_force_min_max(weights, k) * k / sum(weights)


def test_gpt_oss_plan_on_four_sessions_improves_the_default_split(gpt_oss):
    plan = make_plan(read_model(gpt_oss, LIMITED), ndev=4)
    default = plan["default_split"]
    # llama.cpp's own split of this model (developer.md): 2923/2505/2505/2088 MiB, max/mean 1.17
    assert [round(b / MiB, 2) for b in default["per_session_bytes"]] == [2923.59, 2505.94, 2505.94, 2088.28]
    assert round(default["balance"], 2) == 1.17
    assert plan["balance"] == 1.0 and plan["balance"] < default["balance"]
    assert [round(b / MiB, 2) for b in plan["per_session_bytes"]] == [2505.94] * 4
    # the ratios make llama.cpp place the layers exactly as planned
    assert llama_assign(plan["tensor_split"], 24) == plan["assignment"]
    weights = [layer["htp_bytes"] for layer in plan["layers"]]
    assert plan["balance"] <= best_contiguous_balance(weights, 4) + 0.01
    assert plan["command"] == ("GGML_HEXAGON_NDEV=4 llama-cli -m gpt-oss-20b-Q4_0.gguf -ngl 99 "
                               "--device HTP0,HTP1,HTP2,HTP3 --tensor-split 11,12,12,15")
    assert plan["bench_args"] == ["-ngl", "99", "-dev", "HTP0/HTP1/HTP2/HTP3", "-ts", "11/12/12/15"]
    assert [(s["first_layer"], s["last_layer"]) for s in plan["sessions"]] == [(0, 5), (6, 11), (12, 17), (18, 24)]


def test_plan_picks_the_fewest_sessions_that_fit(gpt_oss):
    layout = read_model(gpt_oss, LIMITED)
    # 8 layers of 417.66 MiB = 3341 MiB fit in 3.5 GiB: three sessions are enough
    assert make_plan(layout)["ndev"] == 3
    # with 3 GiB per session: 7 layers = 2923.59 MiB fit, 25 layers need 4 sessions
    plan = make_plan(layout, vmem=3 * 1024 ** 3)
    assert plan["ndev"] == 4 and max(plan["per_session_bytes"]) <= 3 * 1024 ** 3
    assert llama_assign(plan["tensor_split"], 24) == plan["assignment"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=50 * MiB), min_size=2, max_size=9),
       st.integers(min_value=60, max_value=400))
def test_plan_reaches_the_best_balance_for_any_layer_sizes(sizes, budget_mib):
    from hexbuild.plan import Layer, ModelLayout

    if sum(sizes) == 0:
        return
    layers = [Layer(i, f"blk.{i}", htp_bytes=s) for i, s in enumerate(sizes[:-1])]
    layers.append(Layer(len(sizes) - 1, "output", htp_bytes=sizes[-1]))
    layout = ModelLayout("m.gguf", "llama", len(sizes) - 1, layers)
    try:
        plan = make_plan(layout, vmem=budget_mib * MiB, max_ndev=8)
    except errors.UsageError:
        assert brute_force_min_max(sizes, min(8, len(sizes))) > budget_mib * MiB
        return
    k = plan["ndev"]
    assert max(plan["per_session_bytes"]) <= budget_mib * MiB
    assert k == 1 or brute_force_min_max(sizes, k - 1) > budget_mib * MiB  # fewest sessions
    assert plan["balance"] <= best_contiguous_balance(sizes, k) + 0.01
    assert llama_assign(plan["tensor_split"], len(sizes) - 1) == plan["assignment"]


def test_sixteen_sessions_use_the_default_split(gpt_oss):
    plan = make_plan(read_model(gpt_oss, LIMITED), ndev=16)
    assert plan["tensor_split"] is None and "--tensor-split" not in plan["args"]
    assert plan["assignment"] == plan["default_split"]["assignment"]
    assert any("at most 15" in n for n in plan["notes"])


def test_cli_json(gpt_oss, cli, tree_0_3_28):
    rc, out, err = run_cli(cli, "plan", "--model", str(gpt_oss), "--vmem", "3072MiB", "--json",
                           "--source", str(tree_0_3_28))
    assert rc == 0, err
    data = json.loads(out)
    for key in ("ndev", "per_session_bytes", "balance", "tensor_split", "command", "layers", "assignment",
                "default_split", "env", "args", "sessions", "cpu"):
        assert key in data
    # 3072 MiB is not 0.3.28's default (3200): the command gives the sessions that budget
    assert data["ndev"] == 4 and data["env"] == {"GGML_HEXAGON_NDEV": "4", "GGML_HEXAGON_VMEM": "3072"}
    assert len(data["layers"]) == 25 and len(data["assignment"]) == 25
    assert data["default_split"]["tensor_split"] == [1, 1, 1, 1]


def test_cli_human(gpt_oss, cli):
    rc, out, err = run_cli(cli, "plan", "-m", str(gpt_oss), "--ndev", "4", "--htp-row-limit", "16384")
    assert rc == 0, err
    assert "GGML_HEXAGON_DEVICES=4 llama-cli -m gpt-oss-20b-Q4_0.gguf" in out  # the newest rules name them so
    assert "--tensor-split 11,12,12,15" in out  # on one line: the command is never wrapped
    assert "2505.94" in out and "2923.59" in out


def test_model_that_does_not_fit(gpt_oss, cli):
    rc, out, err = run_cli(cli, "plan", "--model", str(gpt_oss), "--vmem", "300MiB")
    assert rc == errors.USAGE
    assert "does not fit in 16 HTP sessions of 300.00 MiB" in err and "largest layer" in err
    assert len([ln for ln in err.splitlines() if ln.startswith("hexbuild: error")]) == 1
    rc, out, err = run_cli(cli, "plan", "--model", str(gpt_oss), "--max-ndev", "2")
    assert rc == errors.USAGE and "does not fit in 2 HTP sessions" in err and "Traceback" not in err


def test_truncated_gguf(gpt_oss, tmp_path, cli):
    short = tmp_path / "short.gguf"
    with gpt_oss.open("rb") as src, short.open("wb") as dst:
        dst.write(src.read(20000))  # inside the tensor table
    rc, out, err = run_cli(cli, "plan", "--model", str(short))
    assert rc == errors.PARSE_FAILED and "truncated GGUF file: the header needs" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    # the whole tensor table but only part of the data
    cut = tmp_path / "cut.gguf"
    with gpt_oss.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(1 << 20))
    rc, out, err = run_cli(cli, "plan", "--model", str(cut))
    assert rc == errors.PARSE_FAILED and "truncated GGUF file: tensor data ends at byte" in err


def test_not_a_gguf(tmp_path, cli):
    bogus = tmp_path / "model.gguf"
    bogus.write_text("this is not a model\n")
    rc, out, err = run_cli(cli, "plan", "--model", str(bogus), "--json")
    assert rc == errors.USAGE  # docs/bad-input.md's row model-not-gguf
    assert json.loads(out)["error"]["message"].endswith("is not a GGUF file (it starts with b'this', not b'GGUF')")
    rc, out, err = run_cli(cli, "plan", "--model", str(tmp_path / "missing.gguf"))
    assert rc == errors.USAGE and "model file not found" in err


def test_model_without_repackable_weights(tmp_path, cli):
    from gguf import GGMLQuantizationType as T

    path = tmp_path / "f16.gguf"
    write_real_gguf(path, [T.F16, T.F16])
    rc, out, err = run_cli(cli, "plan", "--model", str(path), "--htp-row-limit", "1")
    assert rc == errors.USAGE and "nothing to place on the NPU" in err


def test_bad_flags(gpt_oss, cli):
    rc, out, err = run_cli(cli, "plan", "--model", str(gpt_oss), "--vmem", "lots")
    assert rc == errors.USAGE and "bad size 'lots'" in err
    rc, out, err = run_cli(cli, "plan", "--model", str(gpt_oss), "--max-ndev", "17")
    assert rc == errors.USAGE and "--max-ndev" in err
    rc, out, err = run_cli(cli, "plan", "--model", str(gpt_oss), "--ndev", "26")
    assert rc == errors.USAGE and "--ndev 26" in err


def test_default_vmem_is_three_and_a_half_gib():
    assert DEFAULT_VMEM == 3584 * MiB


def test_random_uneven_model_round_trip(tmp_path):
    from gguf import GGMLQuantizationType as T

    rnd = random.Random(7)
    types = [rnd.choice([T.Q4_0, T.Q8_0, T.MXFP4, T.Q4_1]) for _ in range(12)]
    path = tmp_path / "uneven.gguf"
    write_real_gguf(path, types)
    layout = read_model(path)
    weights = [layer.htp_bytes for layer in layout.layers]
    for k in range(1, 6):
        plan = make_plan(layout, ndev=k)
        assert llama_assign(plan["tensor_split"], layout.n_layer) == plan["assignment"]
        assert plan["balance"] <= best_contiguous_balance(weights, k) + 0.01


# -- the revision's rules --------------------------------------------------------------------------

def k_quant_tensors():
    """A llama-shaped model: Q4_K attention/FFN weights, Q6_K ffn_down, and a Q8_0 lm-head of
    32768 rows (over the old 16384-row limit)."""
    from gguf import GGMLQuantizationType as T

    E, F, V = 2048, 8192, 32768
    t = [("token_embd.weight", [E, V], T.Q4_K)]
    for il in range(8):
        p = f"blk.{il}."
        t += [(p + "attn_norm.weight", [E], T.F32), (p + "attn_q.weight", [E, E], T.Q4_K),
              (p + "attn_k.weight", [E, 512], T.Q4_K), (p + "attn_v.weight", [E, 512], T.Q4_0),
              (p + "attn_output.weight", [E, E], T.Q4_K), (p + "ffn_norm.weight", [E], T.F32),
              (p + "ffn_gate.weight", [E, F], T.Q4_K), (p + "ffn_up.weight", [E, F], T.Q4_K),
              (p + "ffn_down.weight", [F, E], T.Q6_K)]
    t += [("output_norm.weight", [E], T.F32), ("output.weight", [E, V], T.Q8_0)]
    return t


@pytest.fixture(scope="module")
def k_quant_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "llama-8l-Q4_K_M.gguf"
    write_sparse_gguf(path, "llama", 8, k_quant_tensors())
    return path


def test_rules_are_read_from_each_tree(tree_0_3_20, tree_0_3_28, tree_0_3_36):
    from hexbuild.plan_rules import read_rules

    old, mid, new = read_rules(tree_0_3_20), read_rules(tree_0_3_28), read_rules(tree_0_3_36)
    assert old.repack_types == ["IQ4_NL", "MXFP4", "Q4_0", "Q8_0"] and old.row_limit == 16384 and old.vmem is None
    assert mid.repack_types == ["IQ4_NL", "MXFP4", "Q4_0", "Q4_1", "Q8_0"] and mid.row_limit == 16384
    assert new.repack_types == ["IQ4_NL", "MXFP4", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q8_0"]
    assert new.row_limit == 0
    for rules in (mid, new):
        assert rules.vmem == {"env": "GGML_HEXAGON_VMEM", "unit": "MiB", "default_bytes": 3355443200}
    assert all(r.origin == "source" and r.revision for r in (old, mid, new))


def test_rules_of_a_tree_follow_its_source(tmp_path, tree_0_3_28):
    """The rules come from the code, not the version: lifting the limit in a copy lifts it."""
    import shutil

    from hexbuild.plan_rules import BACKEND_FILE, read_rules

    copy = tmp_path / "llama.cpp"
    shutil.copytree(tree_0_3_28 / "ggml" / "src" / "ggml-hexagon", copy / "ggml" / "src" / "ggml-hexagon")
    cpp = copy / BACKEND_FILE
    cpp.write_text(cpp.read_text().replace("ggml_nrows(src0) > 16 * 1024", "ggml_nrows(src0) > 32 * 1024"))
    assert read_rules(copy).row_limit == 32768
    cpp.write_text(cpp.read_text().replace("ggml_nrows(src0) > 32 * 1024", "false"))
    assert read_rules(copy).row_limit == 0
    assert read_rules(tmp_path) is None  # no Hexagon backend


def test_same_model_two_revisions_two_plans(k_quant_model, cli, tree_0_3_28, tree_0_3_36):
    """Under 0.3.28 the Q4_K/Q6_K weights are not repacked and the 32768-row lm-head stays on
    the CPU; under 0.3.36 all of them go to the session: more HTP bytes, more sessions."""
    import gguf

    from hexbuild.plan import read_gguf_header

    sizes = {name: n for name, _, _, n, _ in read_gguf_header(k_quant_model).tensors}
    q8_0_block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_0]
    assert sizes["output.weight"] == 2048 * 32768 // q8_0_block[0] * q8_0_block[1]
    layer = [sizes[f"blk.0.{n}.weight"] for n in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                                  "ffn_down")]
    q4_0_only = sizes["blk.0.attn_v.weight"]

    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_28), "--json")
    assert rc == 0, err
    old = json.loads(out)
    assert old["rules"]["row_limit"] == 16384 and "Q4_K" not in old["rules"]["repack_types"]
    assert old["rules"]["origin"] == "source" and old["rules"]["vmem"]["env"] == "GGML_HEXAGON_VMEM"
    assert [x["htp_bytes"] for x in old["layers"]] == [q4_0_only] * 8 + [0]
    assert old["layers"][8]["cpu_bytes"] == sizes["output.weight"]
    assert old["cpu"]["row_limited_bytes"] == sizes["output.weight"] and old["ndev"] == 1
    assert any("32768" not in n and "16384 rows" in n for n in old["notes"])

    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36), "--json",
                           "--vmem", "256MiB")
    assert rc == 0, err
    new = json.loads(out)
    assert new["rules"]["row_limit"] == 0 and {"Q4_K", "Q6_K"} <= set(new["rules"]["repack_types"])
    assert [x["htp_bytes"] for x in new["layers"]] == [sum(layer)] * 8 + [sizes["output.weight"]]
    assert new["cpu"]["row_limited_bytes"] == 0
    total = sum(layer) * 8 + sizes["output.weight"]
    assert sum(new["per_session_bytes"]) == total and new["ndev"] == 2
    assert max(new["per_session_bytes"]) <= 256 * MiB

    # the same budget under the old rules: one session is plenty
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_28), "--json",
                           "--vmem", "256MiB")
    assert rc == 0 and json.loads(out)["ndev"] == 1


def test_the_budget_is_the_revisions_own_figure(k_quant_model, cli, tree_0_3_20, tree_0_3_36):
    """One figure: a revision with GGML_HEXAGON_VMEM (0.3.36: 3200 MiB) is planned with its
    default, not 3.5 GiB beside it; --vmem overrides it, and the printed command then sets the
    knob so the sessions get the budget the plan counted on. Without the knob: 3.5 GiB."""
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36), "--json")
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["vmem"] == plan["rules"]["vmem"]["default_bytes"] == 3200 * MiB
    assert "GGML_HEXAGON_VMEM" not in plan["env"]
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36))
    assert "session(s) of 3200.00 MiB" in out and "3584" not in out, out
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36), "--json",
                           "--vmem", "3.5GiB")
    plan = json.loads(out)
    assert plan["vmem"] == 3584 * MiB and plan["env"]["GGML_HEXAGON_VMEM"] == "3584"
    assert plan["command"].startswith("GGML_HEXAGON_VMEM=3584 ") or " GGML_HEXAGON_VMEM=3584 " in plan["command"]
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_20), "--json")
    plan = json.loads(out)
    assert plan["rules"]["vmem"] is None and plan["vmem"] == DEFAULT_VMEM and "GGML_HEXAGON_VMEM" not in plan["env"]


def test_without_a_revision_the_plan_is_the_newest_trees(gpt_oss, k_quant_model, cli, tree_0_3_36):
    """No --source/--package/--target: every rule of the newest tree hexbuild knows, as that tree
    itself gives them, and the plan names that revision. The gpt-oss-20b plan was 3 sessions of
    3.5 GiB opened with GGML_HEXAGON_NDEV, where the 0.3.36 tree gives 4 of 3200 MiB, opened with
    GGML_HEXAGON_DEVICES."""
    from hexbuild.plan_rules import ASSUMED, rules_from_manifest
    from hexbuild.source import read_source

    newest = rules_from_manifest(read_source(tree_0_3_36).to_json(), "assumed")
    assert ASSUMED == newest  # the tree itself, not a table beside it
    for model in (gpt_oss, k_quant_model):
        rc, out, err = run_cli(cli, "plan", "-m", str(model), "--json")
        assert rc == 0, err
        assumed = json.loads(out)
        rc, out, err = run_cli(cli, "plan", "-m", str(model), "--source", str(tree_0_3_36), "--json")
        source = json.loads(out)
        for key in ("ndev", "devices", "vmem", "per_session_bytes", "tensor_split", "env", "command"):
            assert assumed[key] == source[key], key
        assert assumed["rules"] == {**source["rules"], "origin": "assumed"}
    assert (assumed["ndev"], assumed["vmem"]) == (source["ndev"], 3200 * MiB)
    rc, out, err = run_cli(cli, "plan", "-m", str(gpt_oss), "--json")
    plan = json.loads(out)
    assert plan["ndev"] == 4 and plan["vmem"] == 3200 * MiB and list(plan["env"]) == ["GGML_HEXAGON_DEVICES"]
    assert any(n.startswith("no revision given: used the rules of the newest revision hexbuild knows, 0c1e570 "
                            "(llama-cpp-python 0.3.36)") for n in plan["notes"])
    rc, out, err = run_cli(cli, "plan", "-m", str(gpt_oss))
    assert rc == 0 and "rules (assumed 0c1e570, the newest revision hexbuild knows" in out and "3200.00 MiB" in out


def test_rules_travel_in_the_package_manifest(k_quant_model, cli, tmp_path, tree_0_3_28):
    """A package records its revision's rules at build time (build.py's revision facts);
    plan --package reads them from the directory or the tarball, with no checkout."""
    import tarfile

    from hexbuild.build import revision_facts
    from hexbuild.source import read_source

    pkg = tmp_path / "pkg" / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    facts = revision_facts(read_source(tree_0_3_28))
    assert facts["plan_rules"]["row_limit"] == 16384
    (pkg / "manifest.json").write_text(json.dumps({"schema": 1, "os": "android", "llama_cpp": facts}))
    tarball = tmp_path / "pkg.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(pkg, arcname="llama.cpp")
    for where in (pkg, tarball):
        rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--package", str(where), "--json")
        assert rc == 0, err
        rules = json.loads(out)["rules"]
        assert rules["origin"] == "package" and rules["row_limit"] == 16384 and "Q4_K" not in rules["repack_types"]
    # deployed: the device manifest carries them, and plan --target reads them there
    (pkg / "bin" / "llama-cli").write_text("#!/bin/sh\n")
    install = tmp_path / "install"
    rc, out, err = run_cli(cli, "deploy", str(pkg), "-t", f"local:{install}")
    assert rc == 0, err
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "-t", f"local:{install}", "--json")
    assert rc == 0, err
    rules = json.loads(out)["rules"]
    assert rules["origin"] == "target" and rules["row_limit"] == 16384
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "-t", f"local:{tmp_path / 'nothing'}")
    assert rc == errors.USAGE and "nothing deployed" in err
    (pkg / "manifest.json").write_text(json.dumps({"schema": 1, "llama_cpp": {"revision": "x"}}))
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--package", str(pkg))
    assert rc == errors.USAGE and "carries no plan rules" in err and "Traceback" not in err


def test_rules_flags_conflict_and_bad_source(k_quant_model, cli, tmp_path, tree_0_3_28):
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_28), "--package", "x")
    assert rc == errors.USAGE and "give one place" in err
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tmp_path))
    assert rc == errors.USAGE and "not a llama.cpp checkout" in err
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--htp-row-limit", "-1")
    assert rc == errors.USAGE and "--htp-row-limit" in err


def test_devices_name_virtual_sessions_in_the_revisions_vocabulary(k_quant_model, cli, tree_0_3_28, tree_0_3_36):
    """From the 0.3.32 tree sessions can be virtual (HTP0:1: a second session on physical HTP0),
    opened by GGML_HEXAGON_DEVICES; plan --devices names them in its table, env, --device and
    command. A revision without that variable refuses such names in one line."""
    devices = "HTP0:0,HTP0:1,HTP0:2"
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36), "--json",
                           "--devices", devices)
    assert rc == 0, err
    data = json.loads(out)
    assert data["ndev"] == 3 and data["devices"] == devices.split(",")
    assert [s["device"] for s in data["sessions"]] == devices.split(",")
    assert data["env"] == {"GGML_HEXAGON_DEVICES": devices}
    assert data["args"][data["args"].index("--device") + 1] == devices
    assert data["bench_args"][data["bench_args"].index("-dev") + 1] == "HTP0:0/HTP0:1/HTP0:2"
    assert data["command"].startswith(f"GGML_HEXAGON_DEVICES={devices} llama-cli ")
    assert data["rules"]["device_selection"] == {"ndev_var": "GGML_HEXAGON_NDEV",
                                                 "devices_var": "GGML_HEXAGON_DEVICES"}
    assert len(data["tensor_split"]) == 3 and sum(data["per_session_bytes"]) > 0
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36), "--devices", devices)
    assert rc == 0 and "HTP0:1" in out and f"GGML_HEXAGON_DEVICES={devices} " in out

    # a count under the newer tree: its own variable (NDEV is deprecated there); the older tree: NDEV
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_36), "--json", "--ndev", "2")
    assert rc == 0 and json.loads(out)["env"] == {"GGML_HEXAGON_DEVICES": "2"}
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_28), "--json", "--ndev", "2")
    assert rc == 0 and json.loads(out)["env"] == {"GGML_HEXAGON_NDEV": "2"}

    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--source", str(tree_0_3_28), "--devices", "HTP0:1")
    assert rc == errors.USAGE and "GGML_HEXAGON_DEVICES" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2  # the line and its hint
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--devices", "HTP0,HTP0")
    assert rc == errors.USAGE and "listed twice" in err
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--devices", "HTP0", "--ndev", "2")
    assert rc == errors.USAGE and "not both" in err
    rc, out, err = run_cli(cli, "plan", "-m", str(k_quant_model), "--devices", ",".join(f"HTP{i}" for i in range(10)))
    assert rc == errors.USAGE and "10 sessions for 9 layers" in err


def test_the_device_selection_travels_in_the_manifest(tree_0_3_36):
    """A package or device manifest keeps the selection beside the plan rules (llama_cpp.device_selection)."""
    from hexbuild.build import revision_facts
    from hexbuild.plan_rules import rules_from_manifest
    from hexbuild.source import read_source

    facts = revision_facts(read_source(tree_0_3_36))
    assert "device_selection" not in facts["plan_rules"]
    rules = rules_from_manifest(json.loads(json.dumps(facts)), "package")
    assert rules.device_selection == {"ndev_var": "GGML_HEXAGON_NDEV", "devices_var": "GGML_HEXAGON_DEVICES"}
    assert rules_from_manifest({"plan_rules": facts["plan_rules"]}, "package").device_selection is None
