"""hexbuild test kernels' op families (hexbuild/kernels/ops/) on real trees, on the real emulator:
every op of the 0.3.28 tree through its entry point, bugs planted in three families' DSP code,
the 0.3.20 tree (the other op-context layout) with the two bugs of its own that 0.3.28 fixed; and
the NumPy references against values worked out by hand (no emulator)."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from hexbuild import errors
from hexbuild.kernels import cases as kc
from hexbuild.kernels.ops import families
from hexbuild.kernels.ops.gated_delta_net import gdn
from hexbuild.kernels.ops.rope import NEOX, NORMAL, PLAIN, rope
from hexbuild.kernels.ops.softmax import slopes
from hexbuild.kernels.ops.tensors import grown_nb, src
from hexbuild.kernels.tree import read_tree

HTP = "ggml/src/ggml-hexagon/htp"


def planted(tree: Path, dest: Path, unit: str, after: str, old: str, new: str) -> Path:
    """A copy of ``tree`` (hard links) whose htp/``unit`` has the first ``old`` after ``after`` replaced."""
    shutil.copytree(tree, dest, copy_function=os.link, symlinks=True)
    path = dest / HTP / unit
    text = path.read_text()
    at = text.index(old, text.index(after))
    path.unlink()  # break the hard link: the cached tree stays as it is
    path.write_text(text[:at] + new + text[at + len(old):])
    return dest


@pytest.mark.docker
def test_every_op_of_the_0_3_28_tree_runs_and_passes_on_v73(cli, kernel_check_env, tree_0_3_28, tmp_path):
    r = cli("--json", "test", "kernels", "--source", str(tree_0_3_28), "--htp", "v73", "--out", str(tmp_path / "out"))
    doc = r.json
    assert r.rc == 0, (r.err, doc.get("reason"))
    tree_ops = set(read_tree(tree_0_3_28).ops)
    assert set(families()) >= tree_ops and doc["not_covered"] == {}
    assert set(doc["covered"]) == tree_ops
    ran = {c["op"] for c in doc["cases"]}
    assert ran == tree_ops and all(c["passed"] and c["error"] <= c["tolerance"] for c in doc["cases"])
    # a copy of one type is exact; argsort's indices too
    assert all(c["error"] == 0 for c in doc["cases"] if c["op"] == "ARGSORT" or c["shape"].endswith("f32->f32"))
    # 8 heads of ALiBi: the runtime's log2 of a power of two must be exact (floor(log2(8)) was 2)
    assert any("max_bias=8" in c["shape"] for c in doc["cases"] if c["op"] == "SOFTMAX")


@pytest.mark.docker
@pytest.mark.parametrize("op, unit, after, old, new", [
    # the sum of squares masks half of a row's leftover (rows not a multiple of 32)
    ("RMS_NORM", "unary-ops.c", "static void hvx_fast_rms_norm_f32", "Q6_Q_vsetq_R(nloe * 4)",
     "Q6_Q_vsetq_R(nloe * 2)"),
    # NEOX rotation with the sign of one product flipped
    ("ROPE", "rope-ops.c", "static inline void hvx_rope_neox_f32_aa",
     "HVX_Vector v5 = Q6_Vqf32_vadd_Vqf32Vqf32(vx0_s, vx1_c);",
     "HVX_Vector v5 = Q6_Vqf32_vsub_Vqf32Vqf32(vx0_s, vx1_c);"),
    # the HVX exp polynomial's x^2 coefficient 0.625 instead of 1/2 (an HVX helper header)
    ("SOFTMAX", "hvx-exp.h", "#define EXP_COEFF_1", "#define EXP_COEFF_0 (0x3F000000)",
     "#define EXP_COEFF_0 (0x3F200000)"),
])
def test_a_bug_planted_in_an_op_family_fails_naming_the_op(cli, kernel_check_env, tree_0_3_28, tmp_path, op, unit, after,
                                                          old, new):
    tree = planted(tree_0_3_28, tmp_path / "tree", unit, after, old, new)
    r = cli("--json", "test", "kernels", "--source", str(tree), "--ops", op, "--out", str(tmp_path / "out"))
    assert r.rc == errors.TESTS_FAILED, r.err
    failed = [c for c in r.json["cases"] if not c["passed"]]
    assert failed and all(c["op"] == op and c["error"] > c["tolerance"] for c in failed)
    assert op in r.json["reason"]


@pytest.mark.docker
def test_the_0_3_20_tree_runs_its_ops_and_fails_on_its_two_own_bugs(cli, kernel_check_env, tree_0_3_20, tmp_path):
    """0.3.20 (tensors inside the op context, HXK_ABI 1) runs every op its enum has; it fails on two
    bugs that 0.3.28 fixed: NEOX rope pairs element i with i + 32*floor(he/32) instead of i + he when
    n_dims/2 is not a multiple of 32, and the scalar SSM_CONV path computes nothing (its rows per
    thread are set only on the HVX path)."""
    r = cli("--json", "test", "kernels", "--source", str(tree_0_3_20), "--out", str(tmp_path / "out"))
    doc = r.json
    assert r.rc == errors.TESTS_FAILED, r.err
    tree_ops = set(read_tree(tree_0_3_20).ops)
    assert {c["op"] for c in doc["cases"]} == tree_ops and doc["not_covered"] == {}
    failed = sorted((c["op"], c["shape"]) for c in doc["cases"] if not c["passed"])
    assert [op for op, _ in failed] == ["ROPE", "SSM_CONV"], failed
    assert "neox n_dims=96" in failed[0][1] and "d_inner=16 " in failed[1][1]
    assert all(c["error"] is not None and c["error"] > 0.1 for c in doc["cases"] if not c["passed"])


# -- the references and the layouts, against values worked out by hand --------------------------

def test_a_view_is_laid_out_with_ggml_nbytes_and_read_back_through_its_strides():
    a = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)       # ne (4, 3, 2, 1)
    nb = grown_nb("f32", (4, 3, 2, 1), (2, 1, 1, 1))                   # rows of 8 floats: (4, 32, 96, 192)
    t = src("f32", a, nb)
    assert nb == (4, 32, 96, 192)
    assert t.nbytes() == 4 + 3 * 4 + 2 * 32 + 1 * 96 == len(t.data)    # ggml_nbytes, not the largest stride
    raw = np.frombuffer(t.data, dtype="<f4")
    assert raw[8] == a[0, 1, 0] and np.isnan(raw[4])                   # gaps read as NaN
    assert list(kc.decode(t, t.data)) == list(a.reshape(-1))


def test_alibi_slopes_are_ggml_s():
    # 8 heads, max_bias 8: 2^-1 ... 2^-8; 3 heads: two from m0 = 2^-4, one from m1 = 2^-2
    assert list(slopes(8, 8.0)) == [2.0 ** -k for k in range(1, 9)]
    assert list(slopes(3, 8.0)) == [2.0 ** -4, 2.0 ** -8, 2.0 ** -2]
    assert list(slopes(5, 0.0)) == [1.0] * 5


def test_rope_rotates_the_pairs_of_its_mode():
    x = np.zeros((1, 1, 1, 4))
    x[..., 0] = 1.0
    pos = np.array([1], dtype=np.int32)
    # n_dims 4, base 10000: pair 0 turns by pos * 1 = 1 radian, pair 1 by 1e-2
    normal = rope(x, pos, NORMAL, 4, None, PLAIN)[0, 0, 0]
    assert normal == pytest.approx([math.cos(1), math.sin(1), 0, 0], abs=1e-7)
    neox = rope(x, pos, NEOX, 4, None, PLAIN)[0, 0, 0]                  # element 0 pairs with element 2
    assert neox == pytest.approx([math.cos(1), 0, math.sin(1), 0], abs=1e-7)


def test_gated_delta_net_follows_the_delta_rule():
    # S_v 2, one head, one token, state 0, no decay (g = 0), beta 1: S = k (v - 0)^T, out = S^T q / sqrt 2
    q = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    k = np.array([0.0, 1.0]).reshape(1, 1, 1, 2)
    v = np.array([3.0, 5.0]).reshape(1, 1, 1, 2)
    zero = np.zeros((1, 1, 1, 1))
    out, snaps = gdn(q, k, v, zero, np.ones((1, 1, 1, 1)), np.zeros((1, 1, 1, 2, 2)), 1)
    assert list(out.reshape(-1)) == [0.0, 0.0]           # q is orthogonal to k
    assert snaps[0, 0, 0].tolist() == [[0.0, 3.0], [0.0, 5.0]]    # M[j][i] = S[i][j] = k[i] v[j]
    out, _ = gdn(k, k, v, zero, np.ones((1, 1, 1, 1)), np.zeros((1, 1, 1, 2, 2)), 1)
    assert out.reshape(-1) == pytest.approx([3 / math.sqrt(2), 5 / math.sqrt(2)])
