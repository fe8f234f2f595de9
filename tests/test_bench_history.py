"""hexbuild/bench/history.py: every bench row in SQLite, keyed by revision, package, toolchain,
device, model and configuration; concurrent writers lose nothing. Benches run end to end on a
local: target whose llama-bench is the fake that prints genuine llama-bench JSONL."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from hexbuild.bench import history as bench_history
from hexbuild.errors import UsageError
from tests.infra.runner_tools import make_install

MANIFEST = {"schema": 1, "llama_cpp": {"revision": "b7000-abc"}, "image": {"reference": "img:1", "digest": "sha256:" + "d" * 64},
            "files": [{"path": "bin/llama-bench", "sha256": "a" * 64}, {"path": "lib/libggml.so", "sha256": "b" * 64},
                      {"path": "lib/libggml-hexagon.so", "sha256": "c" * 64}]}


@pytest.fixture
def install(tmp_path, fake_llama_bench):
    inst = make_install(tmp_path / "device" / "llama.cpp", {"llama-bench": fake_llama_bench}, manifest=MANIFEST)
    models = tmp_path / "device" / "gguf"
    models.mkdir()
    (models / "a.gguf").write_bytes(b"GGUF model a")
    return inst, models


def test_bench_fills_the_database(cli, tmp_path, install):
    import hashlib

    inst, models = install
    db = tmp_path / "h.sqlite"
    r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf", "--ndev", "1,2", "--devices", "HTP0,HTP1",
            "--threads", "4", "--ubatch", "256", "--repeat", "2", "--out", str(tmp_path / "o"),
            "--models-dir", str(models), "--db", str(db))
    assert r.rc == 0, r.err
    assert r.json["db"] == str(db) and r.json["db_rows"] == 3 * 2 * 2  # (ndev 1, ndev 2, list) × reps × (pp, tg)
    rows = bench_history.select(db)
    assert len(rows) == 12 and len({r["bench_id"] for r in rows}) == 1
    row = rows[0]
    assert row["revision"] == "b7000-abc" and row["toolchain"] == "sha256:" + "d" * 64
    assert row["package_sha256"] == bench_history.package_digest(MANIFEST) and len(row["package_sha256"]) == 64
    assert row["model"] == "a.gguf" and row["model_sha256"] == hashlib.sha256(b"GGUF model a").hexdigest()
    assert (row["threads"], row["ubatch"], row["batch"]) == (4, 256, 2048)
    assert {(r["sessions"], r["devices"]) for r in rows} == {(1, None), (2, None), (2, "HTP0,HTP1")}
    assert {r["test"] for r in rows} == {"pp512", "tg128"} and all(r["avg_ts"] > 0 for r in rows)
    assert row["target"] == f"local:{inst}" and row["time"].endswith("Z")
    # a device list is its own configuration in the summary too, shown in the ndev column
    listed = [s for s in r.json["results"] if s["select"] == "HTP0,HTP1"]
    assert len(listed) == 2 and all(s["ndev"] == 2 for s in listed)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == bench_history.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_no_database_with_an_empty_db(cli, tmp_path, install):
    inst, models = install
    r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf", "--threads", "4",
            "--out", str(tmp_path / "o"), "--models-dir", str(models), "--db", "")
    assert r.rc == 0, r.err
    assert r.json["db"] is None and r.json["db_rows"] == 0
    assert not list(tmp_path.rglob("*.sqlite"))


WRITER = textwrap.dedent("""
    import sys
    from hexbuild.bench import history as bench_history
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()  # both start together
    for i in range(n):
        rows = [{"target": who, "model": "m", "test": f"t{j}", "avg_ts": float(i), "rep": i} for j in range(5)]
        bench_history.append(path, bench_history.rows_for_db(rows, bench_id=who, when="2026-11-23T00:00:00Z"))
""")


def test_two_concurrent_writers_lose_nothing(tmp_path):
    db = tmp_path / "h.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), who, "60"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for who in ("one", "two")]
    for p in procs:
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.wait(timeout=120) == 0
    rows = bench_history.select(db)
    assert len(rows) == 2 * 60 * 5
    assert {who: sum(r["bench_id"] == who for r in rows) for who in ("one", "two")} == {"one": 300, "two": 300}


def test_a_newer_schema_or_a_foreign_file_is_refused(tmp_path):
    newer = tmp_path / "newer.sqlite"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {bench_history.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UsageError, match="upgrade hexbuild|knows up to"):
        bench_history.connect(newer)
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database at all, just text " * 100)
    with pytest.raises(UsageError, match="not a hexbuild benchmark database"):
        bench_history.connect(junk)
    with pytest.raises(UsageError, match="no benchmark database"):
        bench_history.select(tmp_path / "missing.sqlite")


def test_results_json_rows_match_the_database(cli, tmp_path, install):
    inst, models = install
    db = tmp_path / "h.sqlite"
    r = cli("--json", "bench", "-t", f"local:{inst}", "--model", "a.gguf", "--threads", "4",
            "--out", str(tmp_path / "o"), "--models-dir", str(models), "--db", str(db))
    assert r.rc == 0, r.err
    from_file = bench_history.rows_from_results_json(tmp_path / "o" / "results.json")
    from_db = bench_history.select(db)
    keys = ("revision", "package_sha256", "model_sha256", "sessions", "test", "avg_ts", "bench_id")
    assert [{k: x[k] for k in keys} for x in from_file] == [{k: x[k] for k in keys} for x in from_db]
    assert json.loads((tmp_path / "o" / "results.json").read_text())["bench_id"] == from_db[0]["bench_id"]


def test_a_models_hash_is_read_from_deploys_record_while_the_file_is_unchanged(tmp_path, install):
    """A model can be gigabytes: the hash deploy recorded (size and mtime as listed now) is used;
    a file changed since is hashed where it lives."""
    import hashlib

    from hexbuild.deploy.models import MODELS_INDEX
    from hexbuild.targets import parse_target

    _, models = install
    model = models / "a.gguf"
    planted = "f" * 64  # not the file's hash: shows that the record was read
    with parse_target(f"local:{tmp_path / 'x'}") as target:
        f = target.list_files(str(models), hashes=False)["a.gguf"]
        index = models / MODELS_INDEX
        index.parent.mkdir()
        index.write_text(json.dumps({"a.gguf": {"size": f.size, "mtime": f.mtime, "sha256": planted}}))
        assert bench_history.model_sha256(target, str(model)) == planted
        os.utime(model, (f.mtime + 10, f.mtime + 10))
        assert bench_history.model_sha256(target, str(model)) == hashlib.sha256(b"GGUF model a").hexdigest()


def test_an_older_database_gains_the_added_columns_in_place(tmp_path):
    """A database from before the roofline and the virtual NPU's mark: its rows stay, the columns
    are added (NULL in the old rows), and a new row may be marked emulated."""
    db = tmp_path / "old.sqlite"
    old = [(n, t) for n, t in bench_history.COLUMNS if (n, t) not in bench_history.ADDED_COLUMNS]
    conn = sqlite3.connect(db)
    conn.execute(f"CREATE TABLE results (id INTEGER PRIMARY KEY, {', '.join(f'{n} {t}' for n, t in old)})")
    conn.execute(f"PRAGMA user_version = {bench_history.SCHEMA_VERSION}")
    conn.execute("INSERT INTO results (time, bench_id, target, model, test, avg_ts) VALUES ('t', 'b', 'adb', 'm', 'tg128', 9.5)")
    conn.commit()
    conn.close()
    row = {"time": "t", "bench_id": "e", "target": "qemu+npu", "model": "m", "test": "tg128", "avg_ts": 1.0,
           "emulated": True, "npu_model": "v73 (emulated cDSP: qemu-hexagon with hexbuild's HVX patches)"}
    assert bench_history.append(db, [row]) == 1
    got = {r["bench_id"]: (r["emulated"], r["npu_model"], r["avg_ts"]) for r in bench_history.select(db)}
    assert got == {"b": (None, None, 9.5), "e": (1, row["npu_model"], 1.0)}
