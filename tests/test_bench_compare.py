"""hexbuild bench compare: two builds benchmarked for real (the fake llama-bench on a local:
target, its repeats scattering by a few percent), stored in the history database, compared
by revision, by results.json and by database file."""

import json
import re
import shutil

import pytest

from hexbuild import errors
from hexbuild.bench import compare as bench_compare, history
from tests.infra.runner_tools import make_install


def build(tmp_path, fake_llama_bench, name: str, revision: str, speed: float):
    """An install whose llama-bench runs at ``speed`` × the baseline's, repeats within ±1.5 %."""
    script = tmp_path / f"llama-bench-{name}"
    text = fake_llama_bench.read_text()
    assert 'split("1.0 1.1 1.5", f, " ")' in text
    factors = " ".join(f"{speed * f:.4f}" for f in (1.0, 1.02, 0.99))
    script.write_text(text.replace('split("1.0 1.1 1.5", f, " ")', f'split("{factors}", f, " ")'))
    manifest = {"schema": 1, "llama_cpp": {"revision": revision},
                "files": [{"path": "bin/llama-bench", "sha256": name * 32}]}
    return make_install(tmp_path / name / "llama.cpp", {"llama-bench": script}, manifest=manifest)


@pytest.fixture
def builds(tmp_path, fake_llama_bench):
    models = tmp_path / "gguf"
    models.mkdir()
    for m in ("a.gguf", "b.gguf"):
        (models / m).write_bytes(b"GGUF " + m.encode())
    return {"base": build(tmp_path, fake_llama_bench, "ba", "b7000-base", 1.0),
            "slow": build(tmp_path, fake_llama_bench, "cc", "b7001-slow", 0.9),
            "models": models}


def bench(cli, tmp_path, inst, models, db, out):
    r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf,b.gguf", "--ndev", "1,2", "--threads", "4",
            "--repeat", "3", "--out", str(tmp_path / out), "--models-dir", str(models), "--db", str(db))
    assert r.rc == 0, r.err
    return r.json


def test_a_planted_ten_percent_regression_is_found(cli, tmp_path, builds, monkeypatch):
    db = tmp_path / "h.sqlite"
    bench(cli, tmp_path, builds["base"], builds["models"], db, "base")
    bench(cli, tmp_path, builds["slow"], builds["models"], db, "slow")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = tmp_path / "cmp"
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7001",
            "--fail-below", "0.95", "--out", str(out))
    assert r.rc == errors.REGRESSION == 11, r.err
    result = r.json["error"]["details"]["result"]
    assert result["baseline"] == "revision b7000-base" and result["candidate"] == "revision b7001-slow"
    assert len(result["rows"]) == 2 * 2 * 2  # model × sessions × test
    assert all(row["status"] == "regression" for row in result["rows"])
    assert all(row["ratio"] == pytest.approx(0.9, abs=1e-3) for row in result["rows"])
    assert all(0 < row["noise"] < 0.05 for row in result["rows"])
    assert result["regressions"] == 8 and result["geomean_ratio"] == pytest.approx(0.9, abs=1e-3)
    assert "regression(s): worst 0.900×" in r.err
    saved = json.loads((out / "compare.json").read_text())
    assert saved["rows"] == result["rows"]
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "compare.md").read_text()
    assert md.count("**regression**") == 8 and "### hexbuild bench compare" in summary.read_text()
    # the human form is the table, and still exits 11
    r = cli("bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7001-slow",
            "--by", "model,test", "--fail-below", "0.95", "--out", str(tmp_path / "cmp2"))
    assert r.rc == 11 and "| model | test | baseline t/s |" in r.out
    assert len(re.findall(r"\| \*\*regression\*\* \|", r.out)) == 4  # sessions pooled by --by
    # without --fail-below the comparison reports and succeeds
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7001-slow",
            "--out", str(tmp_path / "cmp3"))
    assert r.rc == 0 and r.json["regressions"] == 8


def test_two_runs_of_the_same_build_pass(cli, tmp_path, builds):
    db = tmp_path / "h.sqlite"
    first = bench(cli, tmp_path, builds["base"], builds["models"], db, "one")
    second = bench(cli, tmp_path, builds["base"], builds["models"], db, "two")
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", first["bench_id"],
            "--candidate", second["bench_id"], "--fail-below", "0.95", "--out", str(tmp_path / "cmp"))
    assert r.rc == 0, r.err
    assert r.json["regressions"] == 0 and all(row["status"] == "same" for row in r.json["rows"])
    assert all(row["ratio"] == pytest.approx(1.0, abs=0.03) for row in r.json["rows"])
    first_rows = r.json["rows"]
    assert first_rows
    # the same comparison from the two results.json files, and the database as a FILE
    r = cli("--json", "bench", "compare", "--baseline", str(tmp_path / "one"), "--candidate",
            str(tmp_path / "two" / "results.json"), "--fail-below", "0.95", "--out", str(tmp_path / "cmp2"))
    assert r.rc == 0, r.err
    rows = r.json["rows"]
    assert len(rows) == len(first_rows) and all(row["status"] == "same" for row in rows), rows
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(db, copy)
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", str(copy), "--candidate", "b7000-base",
            "--out", str(tmp_path / "cmp3"))
    assert r.rc == 0 and all(row["ratio"] == 1.0 for row in r.json["rows"])


def test_noise_hides_a_small_difference_but_not_a_large_one():
    def side(label, values):
        return bench_compare.Side(label, label, [{"target": "t", "model": "m", "test": "tg128", "avg_ts": v}
                                                 for v in values])
    noisy = bench_compare.compare(side("a", [100, 80, 120]), side("b", [90, 70, 110]), by=("model", "test"))
    assert noisy["rows"][0]["status"] == "same" and noisy["rows"][0]["noise"] > 0.3
    quiet = bench_compare.compare(side("a", [100, 100.5, 99.5]), side("b", [93, 93.5, 92.5]), by=("model", "test"))
    assert quiet["rows"][0]["status"] == "regression"
    faster = bench_compare.compare(side("a", [100]), side("b", [120]), by=("model", "test"))
    assert faster["rows"][0]["status"] == "faster"


def test_bad_comparisons(cli, tmp_path, builds):
    db = tmp_path / "h.sqlite"
    r = cli("bench", "compare", "--db", str(db), "--baseline", "x", "--candidate", "y")
    assert r.rc == 2 and "no benchmark database" in r.err
    bench(cli, tmp_path, builds["base"], builds["models"], db, "one")
    r = cli("bench", "compare", "--db", str(db), "--baseline", "nope", "--candidate", "b7000-base")
    assert r.rc == 2 and "no results for 'nope'" in r.err and "b7000-base" in r.err
    r = cli("bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7000-base",
            "--by", "colour")
    assert r.rc == 2 and "--by: unknown key 'colour'" in r.err
    r = cli("bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7000-base",
            "--fail-below", "1.5")
    assert r.rc == 2 and "--fail-below" in r.err
    bogus = tmp_path / "results.json"
    bogus.write_text("{}")
    r = cli("bench", "compare", "--db", str(db), "--baseline", str(bogus), "--candidate", "b7000-base")
    assert r.rc == 2 and "not a hexbuild bench results.json" in r.err and "Traceback" not in r.err


def test_the_gate_holds_without_the_chart_extra(cli, tmp_path, builds, monkeypatch):
    """matplotlib is an optional extra: without it the comparison skips its chart with a warning
    and the --fail-below gate still decides the exit code."""
    import sys

    db = tmp_path / "h.sqlite"
    bench(cli, tmp_path, builds["base"], builds["models"], db, "base")
    bench(cli, tmp_path, builds["slow"], builds["models"], db, "slow")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    out = tmp_path / "cmp"
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7001",
            "--fail-below", "0.95", "--out", str(out))
    assert r.rc == 11, r.err
    assert "no chart: charts need matplotlib" in r.err and "hexbuild[chart]" in r.err
    assert not (out / "compare.png").exists() and (out / "compare.json").is_file()
    assert "chart" not in r.json["error"]["details"]["result"]["files"]


def test_by_decides_the_pairing(cli, tmp_path, builds):
    """Two runs that share their tests and differ only in threads (what --by leaves out) are
    compared by --by's keys: each side's configurations averaged. They were refused ('share no
    test'), and the hint to narrow --by could not help: pairing used the whole configuration."""
    db = tmp_path / "h.sqlite"
    for inst, threads, out in ((builds["base"], "2", "base"), (builds["slow"], "4", "slow")):
        r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf", "--threads", threads, "--repeat", "3",
                "--out", str(tmp_path / out), "--models-dir", str(builds["models"]), "--db", str(db))
        assert r.rc == 0, r.err
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", str(tmp_path / "base"),
            "--candidate", str(tmp_path / "slow"), "--by", "model,test", "--out", str(tmp_path / "cmp"))
    assert r.rc == 0, r.err
    rows = {row["test"]: row for row in r.json["rows"]}
    assert set(rows) == {"pp512", "tg128"}
    # the fake's t/s grow with threads (+2) and the candidate runs at 0.9x: the ratio says both
    from tests.test_bench import expected_ts

    for test, kind in (("pp512", "prompt"), ("tg128", "eval")):
        want = 0.9 * expected_ts(kind, 1, 1024, 4, 1.0) / expected_ts(kind, 1, 1024, 2, 1.0)
        assert rows[test]["ratio"] == pytest.approx(want, rel=0.03), (test, rows[test])
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", str(tmp_path / "base"),
            "--candidate", str(tmp_path / "slow"), "--out", str(tmp_path / "cmp2"))
    assert r.rc == errors.USAGE and "share no" in r.json["error"]["message"]  # every key: still nothing in common


# -- the virtual NPU's timings (hexbuild/fidelity.py) --------------------------------------------
@pytest.fixture
def npu_env(qemu_npu_env, monkeypatch):
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", "/usr/aarch64-linux-gnu")
    return qemu_npu_env


def bench_on(cli, tmp_path, spec, models, db, out):
    r = cli("--json", "bench", "-t", spec, "--model", "a.gguf", "--ndev", "1", "--threads", "4", "--repeat", "2",
            "--out", str(tmp_path / out), "--models-dir", str(models), "--db", str(db))
    assert r.rc == 0, r.err
    return r


def test_an_emulator_is_not_compared_with_a_device(cli, tmp_path, builds, npu_env):
    """The same build benched on the qemu+npu: board (the fake llama-bench, a shell script, runs there
    as it is) and on a device (local:): the emulated rows say so in results.json and the history,
    and no comparison sets them against the device's, whichever way they are named."""
    db = tmp_path / "h.sqlite"
    emulated = bench_on(cli, tmp_path, f"qemu+npu:{builds['base']}", builds["models"], db, "emu")
    assert emulated.json["emulated"] is True and [ln for ln in emulated.err.splitlines() if "emulated NPU (" in ln]
    saved = json.loads((tmp_path / "emu" / "results.json").read_text())
    assert saved["emulated"] is True and all(r["emulated"] is True and r["npu_model"].startswith("v73 (emulated")
                                             for r in saved["records"] + saved["results"])
    bench_on(cli, tmp_path, f"local:{builds['slow']}", builds["models"], db, "dev")
    assert "emulated" not in json.loads((tmp_path / "dev" / "results.json").read_text())["records"][0]
    rows = {r["revision"]: r["emulated"] for r in history.select(db)}
    assert rows == {"b7000-base": 1, "b7001-slow": None}
    for base, cand in ((str(tmp_path / "emu"), str(tmp_path / "dev" / "results.json")),  # results.json files
                       ("b7001-slow", "b7000-base")):  # database rows, the device's as the baseline
        r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", base, "--candidate", cand,
                "--out", str(tmp_path / "cmp"))
        assert r.rc == errors.USAGE, r.err
        assert "measured on an emulated NPU (v73 (emulated cDSP" in r.json["error"]["message"]
        assert "an emulator's timings are not compared with a phone's" in r.json["error"]["message"]
        assert not (tmp_path / "cmp").exists()


def test_two_emulated_benches_compare_and_say_so(cli, tmp_path, builds, npu_env):
    db = tmp_path / "h.sqlite"
    bench_on(cli, tmp_path, f"qemu+npu:{builds['base']}", builds["models"], db, "one")
    bench_on(cli, tmp_path, f"qemu+npu:{builds['slow']}", builds["models"], db, "two")
    r = cli("--json", "bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7001-slow",
            "--out", str(tmp_path / "cmp"))
    assert r.rc == 0, r.err
    assert r.json["emulated"] is True and r.json["npu_model"].startswith("v73 (emulated cDSP")
    assert all(row["emulated"] is True for row in r.json["rows"])
    r = cli("bench", "compare", "--db", str(db), "--baseline", "b7000-base", "--candidate", "b7001-slow",
            "--out", str(tmp_path / "cmp2"))
    assert r.rc == 0 and "Both sides were measured on an emulated NPU (v73" in r.out
    assert "(emulated) |" in r.out


def test_rows_of_both_kinds_pair_only_with_their_own_kind(tmp_path):
    """A revision benched on a phone and on the emulator, against another benched on both: real
    SQLite rows; each group compares like with like, and the emulated ones are marked."""
    db = tmp_path / "h.sqlite"
    mark = {"emulated": True, "npu_model": "v73 (emulated cDSP: qemu-hexagon with hexbuild's HVX patches)"}

    def rows(revision, device, ts, **extra):
        return [{"time": "t", "bench_id": revision, "revision": revision, "target": device, "device_serial": device,
                 "model": "m.gguf", "test": "tg128", "kind": "eval", "rep": rep, "avg_ts": ts, **extra}
                for rep in (1, 2)]

    history.append(db, rows("r1", "phone", 10.0) + rows("r1", "qemu+npu:/x", 1.0, **mark)
                   + rows("r2", "phone", 9.0) + rows("r2", "qemu+npu:/x", 1.0, **mark))
    side = lambda rev: bench_compare.Side(rev, rev, history.select(db, "WHERE revision = ?", (rev,)))  # noqa: E731
    for by in (bench_compare.DEFAULT_BY, ("model", "test")):
        result = bench_compare.compare(side("r1"), side("r2"), by=by)
        ratios = sorted((bool(r.get("emulated")), r["ratio"]) for r in result["rows"])
        assert ratios == [(False, 0.9), (True, 1.0)] and "emulated" not in result
    assert "1 of 2 groups were measured on an emulated NPU" in bench_compare.markdown(result)
    history.append(db, rows("r3", "qemu+npu:/x", 1.0, **mark))
    with pytest.raises(errors.UsageError, match="revision r3 was measured on an emulated NPU"):
        bench_compare.compare(bench_compare.Side("r3", "revision r3", history.select(db, "WHERE revision = 'r3'")),
                              bench_compare.Side("p", "revision r2 (phone)",
                                                 history.select(db, "WHERE revision = 'r2' AND emulated IS NULL")))
