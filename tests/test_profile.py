"""`hexbuild results profile` and `results trace` on logs made from the real trees' own profile-op
and trace-evt format strings (tests/infra/hexlog.py), with the 0.3.36 tree's own
scripts/snapdragon/ggml-hexagon-profile.py as the oracle: on the same log, totals and counts per
(op, dims, types) must agree."""

import csv
import io
import json
import subprocess
import sys

import pytest

from hexbuild.results import profile as prof
from hexbuild.results.trace import trace
from tests.infra.hexlog import HexFormats, profile_log

STYLES = ["pipe", "colon-0.3.20", "colon"]


@pytest.fixture(scope="module")
def fmts(tree_0_3_20, tree_0_3_36):
    return {"pipe": HexFormats(tree_0_3_36), "colon-0.3.20": HexFormats(tree_0_3_20), "colon": None}


def make_log(fmts, style, tmp_path, **kw):
    text = profile_log(fmts[style], style=style, **kw)
    path = tmp_path / f"{style}.log"
    path.write_text(text)
    return path


def upstream_report(tree, log, *extra):
    """The tree's own profile script's markdown table, as {(op, dims, types): row}."""
    script = tree / "scripts/snapdragon/ggml-hexagon-profile.py"
    out = subprocess.run([sys.executable, str(script), str(log), "-n", "1000000", "--width", "dims:1000",
                          "--width", "dtypes:1000", "--width", "op:100", *extra],
                         capture_output=True, text=True, check=True).stdout
    table = [l for l in out.splitlines() if l.startswith("| ")]
    head = [h.strip() for h in table[0].strip("|").split("|")]
    rows = {}
    for line in table[2:]:
        cells = dict(zip(head, (c.strip() for c in line.strip("|").split(" | "))))
        rows[(cells["Op"], cells["Dims"], cells["DTypes"])] = cells
    return rows


@pytest.mark.parametrize("style", STYLES)
def test_agrees_with_upstream_script(fmts, style, tmp_path, tree_0_3_36):
    log = make_log(fmts, style, tmp_path, lines=3000, devices=("HTP0", "HTP1", "HTP0:1"),
                   prefix="0.00.449.374 D " if style == "colon" else "")
    ours = prof.read(str(log))
    theirs = upstream_report(tree_0_3_36, log)
    batches = {k: v for k, v in theirs.items() if k[0] == "OPBATCH"}
    theirs = {k: v for k, v in theirs.items() if k[0] != "OPBATCH"}
    assert len(ours["ops"]) == len(theirs) >= 10
    for row in ours["ops"]:
        up = theirs[(row["op"], row["dims"], row["types"])]
        assert int(up["Count"]) == row["count"]
        assert float(up["Tot usec"]) == pytest.approx(row["total_usec"], abs=0.01)
        assert int(up["Max usec"]) == row["max_usec"] and int(up["Max Cycles"]) == row["max_cycles"]
        assert float(up["Avg Cycles"]) == pytest.approx(row["avg_cycles"], abs=0.01)
    assert sum(r["count"] for r in ours["ops"]) + sum(b["count"] for b in ours["batches"].values()) == 3000
    assert sum(int(v["Count"]) for v in batches.values()) == sum(b["count"] for b in ours["batches"].values())
    if style == "pipe":
        assert batches and any(r["pmu_avg"] for r in ours["ops"])


def test_device_and_filter_agree_with_upstream(fmts, tmp_path, tree_0_3_36):
    log = make_log(fmts, "pipe", tmp_path, lines=2000, devices=("HTP0", "HTP1", "HTP0:1"), seed=7)
    ours = prof.read(str(log), device="HTP0", op_filter="MUL_MAT")
    theirs = upstream_report(tree_0_3_36, log, "--device", "HTP0", "--filter", "MUL_MAT")
    theirs = {k: v for k, v in theirs.items() if k[0] != "OPBATCH"}
    assert {(r["op"], r["dims"], r["types"]): r["count"] for r in ours["ops"]} == \
        {k: int(v["Count"]) for k, v in theirs.items()}
    assert set(ours["sessions"]) == {"HTP0", "HTP0:1"}  # HTP0 takes its virtual sessions
    assert {r["op"] for r in ours["ops"]} == {"MUL_MAT", "MUL_MAT_ID"}


def test_cli_outputs(cli, fmts, tmp_path):
    import os
    import stat

    log = make_log(fmts, "pipe", tmp_path, lines=500, devices=("HTP0", "HTP1"))
    old = os.umask(0o022)
    try:
        r = cli("--json", "results", "profile", str(log), "--top", "3", "--csv", str(tmp_path / "p.csv"),
                "--md", str(tmp_path / "p.md"), "--chart", str(tmp_path / "p.png"))
    finally:
        os.umask(old)
    assert r.rc == 0, r.err
    # the user's files, as their shell would write them (they were 0600)
    assert {n: oct(stat.S_IMODE((tmp_path / n).stat().st_mode)) for n in ("p.csv", "p.md", "p.png")} == \
        {n: "0o644" for n in ("p.csv", "p.md", "p.png")}
    doc = r.json
    assert doc["schema"] == "hexbuild.profile/1" and len(doc["ops"]) == 3 and doc["op_groups"] > 3
    assert [o["total_usec"] for o in doc["ops"]] == sorted((o["total_usec"] for o in doc["ops"]), reverse=True)
    assert set(doc["sessions"]) == {"HTP0", "HTP1"}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "p.csv").read_text())))
    assert [int(x["count"]) for x in rows] == [o["count"] for o in doc["ops"]]
    assert (tmp_path / "p.md").read_text().startswith("| op | dims | types | count |")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = cli("results", "profile", str(log), "--sort", "count", "--device", "HTP1")
    assert r.rc == 0 and r.out.startswith("| op | dims |") and "HTP0:" not in r.out.split("op groups")[-1]


def test_no_profile_lines_and_bad_input(cli, tmp_path):
    empty = tmp_path / "e.log"
    empty.write_text("llama_perf_context_print: load time = 1.0 ms\n")
    r = cli("results", "profile", str(empty))
    assert r.rc == 9 and "no profile-op lines" in r.err and "--hex-profile" in r.err
    r = cli("results", "profile", str(empty), "--filter", "(")
    assert r.rc == 2 and "not a regular expression" in r.err
    r = cli("results", "trace", str(empty), "-o", str(tmp_path / "t.json"))
    assert r.rc == 9 and not (tmp_path / "t.json").exists()


# -- the trace ----------------------------------------------------------------------------------
PHASES = {"X", "M", "B", "E", "i", "C"}


def check_trace_events(doc):
    """The Chrome trace-event format: a traceEvents list; each event has name, ph, pid, tid; every
    non-metadata event a numeric ts, X events a non-negative dur; ts never goes back on a track."""
    assert isinstance(doc["traceEvents"], list)
    last = {}
    for e in doc["traceEvents"]:
        assert {"name", "ph", "pid", "tid"} <= set(e) and e["ph"] in PHASES
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and "name" in e["args"]
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        track = (e["pid"], e["tid"])
        assert e["ts"] >= last.get(track, 0), f"ts goes back on track {track}"
        last[track] = e["ts"]
    return last


def test_trace_json_is_valid_trace_event_format(cli, fmts, tmp_path):
    log = make_log(fmts, "pipe", tmp_path, lines=1500, devices=("HTP0", "HTP1", "HTP0:1"), trace_events=True)
    out = tmp_path / "run.json"
    r = cli("--json", "results", "trace", str(log), "-o", str(out))
    assert r.rc == 0, r.err
    doc = json.loads(out.read_text())
    tracks = check_trace_events(doc)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == set(r.json["sessions"]) and len(names) >= 2
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"ops", "op batches", "HVX thread 0", "HVX thread 1"} <= threads
    assert len({t for _, t in tracks}) >= 4  # ops, batches and per-thread event tracks
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "op"]
    assert sum(1 for e in ops) + sum(1 for e in doc["traceEvents"] if e.get("cat") == "batch") == 1500 - \
        sum(1 for line in log.read_text().splitlines() if "trace-evt" in line)
    assert all(e["dur"] > 0 for e in doc["traceEvents"] if e.get("cat") == "trace")


def test_trace_of_older_format_lays_ops_end_to_end(fmts, tmp_path):
    log = make_log(fmts, "colon-0.3.20", tmp_path, lines=200)
    doc = trace(log.read_text().splitlines())
    check_trace_events(doc)
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for a, b in zip(ops, ops[1:]):
        if a["pid"] == b["pid"]:
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"])


def test_run_hex_profile_in_the_revisions_vocabulary(cli, tmp_path, argv_echo, tree_0_3_20, tree_0_3_36):
    from hexbuild.source import read_source
    from tests.infra.runner_tools import decode_echo
    from tests.test_run_device import populate

    for tree, knobs, refused in ((tree_0_3_36, ["--hex-profile", "2", "--hex-opfilter", "MUL_MAT"], None),
                                 (tree_0_3_20, ["--hex-profile", "1"], ["--hex-optrace", "1"])):
        dest = str(tmp_path / tree.parent.parent.name)
        populate(f"local:{dest}", dest, {"llama-completion": argv_echo},
                 manifest={"llama_cpp": read_source(tree).to_json()})
        r = cli("run", "completion", "-t", f"local:{dest}", *knobs, "--results-dir", str(tmp_path / "res"))
        assert r.rc == 0, r.err
        got = decode_echo(r.out)
        assert got["env"]["GGML_HEXAGON_PROFILE"] == knobs[1] and "-v" in got["argv"]  # profile lines are debug
        if knobs[2:]:
            assert got["env"]["GGML_HEXAGON_OPFILTER"] == "MUL_MAT"
        if refused:
            r = cli("run", "completion", "-t", f"local:{dest}", *refused, "--results-dir", str(tmp_path / "res"))
            assert r.rc == 2 and "does not read GGML_HEXAGON_OPTRACE" in r.err


def test_a_profile_of_the_virtual_npu_says_its_timings_are_the_emulators(cli, fmts, tmp_path):
    """A run on qemu+npu: logs the line the stand-in libcdsprpc.so prints for each session it opens
    (hexbuild/dsp/host/remote.c's format); its profile is labelled emulated, a phone's is not."""
    from hexbuild.fidelity import VIRTUAL_DSP

    phone = make_log(fmts, "pipe", tmp_path, lines=200)
    emulated = tmp_path / "vnpu.log"
    emulated.write_text("hexbuild-vnpu: HTP0: session opened on the virtual NPU (libggml-htp-v75.so on an emulated "
                        "v75 cDSP, pid 4242)\n" + phone.read_text())
    r = cli("--json", "results", "profile", str(emulated))
    assert r.rc == 0, r.err
    assert r.json["emulated"] is True and r.json["npu_model"] == f"v75 ({VIRTUAL_DSP})"
    assert r.json["ops"] == prof.read(str(phone))["ops"]  # the same figures, labelled
    assert [ln for ln in r.err.splitlines() if "emulated NPU" in ln][0].endswith(
        f"note: emulated NPU ({emulated}, v75): results are the emulator's, timings are not a phone's")
    r = cli("results", "profile", str(emulated), "--md", str(tmp_path / "p.md"))
    assert r.rc == 0 and "the µs are the emulator's wall time" in r.out
    assert "emulator's wall time" in (tmp_path / "p.md").read_text()
    r = cli("--json", "results", "profile", str(phone))
    assert "emulated" not in r.json and "emulated NPU" not in r.err
