"""hexbuild test kernels on real trees: the tree's own HTP sources compiled for the emulated DSP
and run on the real qemu-hexagon of the kernel check's image (built from Debian's QEMU source with
hexbuild's patches), against references that share no code with the tree.

A tree with one bug planted in DSP-only code (the kind only running the HVX code reveals) must
fail with exit 13, naming the op; the unchanged tree must pass."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hexbuild import errors

pytestmark = pytest.mark.docker

MATMUL = "ggml/src/ggml-hexagon/htp/matmul-ops.c"


def planted(tree: Path, dest: Path, edits: list[tuple[str, str, str]]) -> Path:
    """A copy of ``tree`` (hard links: seconds) whose matmul-ops.c has ``edits``: (after, old, new)
    replaces the first ``old`` that follows the text ``after``."""
    shutil.copytree(tree, dest, copy_function=os.link, symlinks=True)
    path = dest / MATMUL
    text = path.read_text()
    for after, old, new in edits:
        start = text.index(after)
        at = text.index(old, start)
        text = text[:at] + new + text[at + len(old):]
    path.unlink()  # break the hard link: the cached tree stays as it is
    path.write_text(text)
    return dest


def test_the_unchanged_tree_passes_on_v73(cli, kernel_check_env, tree_0_3_28, tmp_path):
    r = cli("--json", "test", "kernels", "--source", str(tree_0_3_28), "--htp", "v73", "--out", str(tmp_path / "out"))
    doc = r.json
    assert r.rc == 0, (r.err, doc.get("reason"))
    assert doc["ok"] and doc["emulated"] is True
    assert doc["emulator"]["qfloat_model"] == "pre-v79" and doc["emulator"]["qemu_version"] == "10.2.2"
    mm = [c for c in doc["cases"] if c["op"] == "MUL_MAT"]
    assert {c["type"] for c in mm} == {"q4_0", "q8_0", "mxfp4"}
    assert all(c["passed"] is True and c["error"] <= c["tolerance"] and c["htp"] == "v73" for c in doc["cases"])
    # a kernel that ran gets a real error, not a zero from nothing: the DSP quantizes activations
    assert all(0 < c["error"] for c in mm)
    files = doc["files"]
    assert json.loads(Path(files["json"]).read_text())["ok"] is True
    junit = Path(files["junit"]).read_text()
    assert 'failures="0"' in junit and "MUL_MAT q4_0" in junit
    assert "emulated, qfloat model pre-v79, not compared with silicon" in Path(files["markdown"]).read_text()


@pytest.mark.parametrize("bug, edits", [
    ("unpack subtracts 7 instead of 8", [("hvx_vec_load_q4x4x8_full", "Q6_Vb_vsplat_R(8)", "Q6_Vb_vsplat_R(7)")]),
    ("leftover block dropped", [("static void vec_dot_q4x4x2_q8x4x2_1x1", "if (nloe) {", "if (0) {")]),
    ("scales not shuffled", [("static void vec_dot_q4x4x2_q8x4x2_1x1",
                              "HVX_Vector r0_d = Q6_Vh_vshuff_Vh(*(const HVX_UVector *) (r0_x_d + i * x_dblk_size));",
                              "HVX_Vector r0_d = *(const HVX_UVector *) (r0_x_d + i * x_dblk_size);")]),
])
def test_a_bug_planted_in_the_dsp_code_fails_naming_the_op(cli, kernel_check_env, tree_0_3_28, tmp_path, bug, edits):
    tree = planted(tree_0_3_28, tmp_path / "tree", edits)
    r = cli("--json", "test", "kernels", "--source", str(tree), "--ops", "MUL_MAT", "--types", "q4_0",
            "--out", str(tmp_path / "out"))
    assert r.rc == errors.TESTS_FAILED, (bug, r.err)
    doc = r.json
    failed = [c for c in doc["cases"] if not c["passed"]]
    assert failed and all(c["op"] == "MUL_MAT" and c["type"] == "q4_0" for c in failed), bug
    assert all(c["error"] is not None and c["error"] > c["tolerance"] for c in failed), bug
    assert "MUL_MAT" in r.err.splitlines()[-2] or "MUL_MAT" in r.err


def test_a_tree_whose_kernels_do_not_compile_names_the_first_error(cli, kernel_check_env, tree_0_3_28, tmp_path):
    tree = planted(tree_0_3_28, tmp_path / "tree", [("hvx_vec_load_q4x4x8_full", "HVX_Vector v0_1 = vptr[0];",
                                                     "HVX_Vector v0_1 = vptr[0] +;")])
    r = cli("test", "kernels", "--source", str(tree), "--ops", "MUL_MAT", "--out", str(tmp_path / "out"))
    assert r.rc == errors.BUILD_FAILED, r.err
    line = [x for x in r.err.splitlines() if x.startswith("hexbuild: error:")][0]
    assert "matmul-ops.c" in line and "htp/matmul-ops.c:" in line and "expected expression" in line
    assert not (tmp_path / "out").exists()


def test_a_revision_it_cannot_run_says_why_per_op(cli, kernel_check_env, tree_0_3_36, tmp_path):
    """0.3.36: its matmul is HMX assembly (compiled to find out), and its op context (work queues,
    host-computed kernel parameters) is one the harness does not drive: nothing runs, each op says why."""
    r = cli("--json", "test", "kernels", "--source", str(tree_0_3_36), "--ops", "MUL_MAT,ADD",
            "--out", str(tmp_path / "out"))
    doc = r.json
    assert r.rc == errors.TESTS_FAILED and doc["reason"].startswith("nothing ran")
    assert "needs HMX" in doc["not_covered"]["MUL_MAT"]
    assert "not modelled" in doc["not_covered"]["ADD"]
    assert doc["cases"] == []
    assert any(d["unit"] == "matmul-ops.c" and "HMX" in d["reason"] for b in doc["builds"] for d in b["dropped_units"])


def test_ctrl_c_leaves_no_container_and_no_result(kernel_check_env, docker_client, tree_0_3_28, tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    p = subprocess.Popen([sys.executable, "-m", "hexbuild", "test", "kernels", "--source", str(tree_0_3_28),
                          "--ops", "MUL_MAT", "--out", str(out)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if [c for c in docker_client.containers.list() if c.name.startswith("hexbuild-kernels-")]:
                break
            time.sleep(0.2)
        else:
            pytest.fail("no kernel check container started")
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == errors.INTERRUPTED, err
    assert "Traceback" not in err
    assert not [c for c in docker_client.containers.list(all=True) if c.name.startswith("hexbuild-kernels-")]
    assert not out.exists()


def test_compare_device_shows_where_the_emulator_and_a_device_differ(cli, kernel_check_env, tree_0_3_28, tmp_path):
    import numpy as np

    first = tmp_path / "emulated"
    r = cli("--json", "test", "kernels", "--source", str(tree_0_3_28), "--ops", "MUL_MAT", "--types", "q4_0",
            "--out", str(first))
    assert r.rc == 0, r.err
    assert (first / "cases.bin").read_bytes()[:4] == b"HXK1"
    # a phone's results of the same cases, in the same format: one case's output off by 10 % (NMSE 0.01)
    device = tmp_path / "device"
    device.mkdir()
    doc = json.loads((first / "results.json").read_text())
    doc.update(emulated=False, device={"soc": "SM8650", "htp": "v75"})
    (device / "results.json").write_text(json.dumps(doc))
    with np.load(first / "outputs.npz") as z:
        outs = {k: z[k] for k in z.files}
    key = sorted(outs)[0]
    outs[key] = outs[key] * 1.1
    np.savez(device / "outputs.npz", **outs)
    r = cli("--json", "test", "kernels", "--source", str(tree_0_3_28), "--ops", "MUL_MAT", "--types", "q4_0",
            "--out", str(tmp_path / "again"), "--compare-device", str(device))
    assert r.rc == errors.TESTS_FAILED, r.err
    cmp = r.json["compare_device"]
    assert cmp["compared"] == len(outs) and cmp["differ"] == 1 and cmp["other_emulated"] is False
    assert [c["key"] for c in cmp["cases"] if c["differ"]] == [key]
    assert all(c["error"] == 0 for c in cmp["cases"] if not c["differ"])  # the same cases, bit for bit


def test_compare_device_refuses_what_is_not_a_results_directory(cli, kernel_check_env, tree_0_3_28, tmp_path):
    r = cli("test", "kernels", "--source", str(tree_0_3_28), "--compare-device", str(tmp_path))
    assert r.rc == errors.USAGE and "is not a kernel results directory" in r.err
