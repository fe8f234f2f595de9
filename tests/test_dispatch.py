"""The dispatch proof: the Hexagon backend's session lines (made from each real tree's own format
strings, and the real transcripts in its docs) read into a verdict, and `hexbuild run`/`bench`
failing with exit 12 when a run fell back to the CPU. The NPU itself is stood in for at the lowest
layer: a device program on a local: target that prints the backend's lines and exits 0, as
llama.cpp does when it carries on without the NPU."""

import json
from pathlib import Path

import pytest

from hexbuild import errors
from hexbuild.results import dispatch, parse_text
from hexbuild.source import read_source
from tests.infra.hexlog import HexFormats
from tests.test_results import block_with, parse_block
from tests.test_run_device import populate

SKEL_URI = "file:///libggml-htp-v79.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session={}"
EUNABLETOLOAD = 0x80000406


@pytest.fixture(scope="module")
def new_fmt(tree_0_3_36):
    return HexFormats(tree_0_3_36)


@pytest.fixture(scope="module")
def old_fmt(tree_0_3_20):
    return HexFormats(tree_0_3_20)


def first_json(out: str) -> dict:
    return json.JSONDecoder().raw_decode(out)[0]  # the run's record; the error document follows


def judge(lines, requested, **kw):
    log = parse_text(lines, "t")
    return log, dispatch.verdict(log, requested, **kw)


# -- the parser and the verdict -------------------------------------------------------------------
def test_new_tree_open_failure_names_session_and_code(new_fmt):
    lines = [new_fmt.line("allocating new registry", 2), new_fmt.line("Arch version", 79, "disabled"),
             new_fmt.line("device %zu: %s (phys=%d, virt=%d, domain=%s:%d)\n", 0, "HTP0", 0, 0, "cdsp", 3),
             new_fmt.line("device %zu: %s (phys=%d, virt=%d, domain=%s:%d)\n", 1, "HTP1", 0, 1, "cdsp", 3),
             new_fmt.line("new session : session-id", "HTP0", 0, 3, SKEL_URI.format(0), 0xb400007d4b231090),
             new_fmt.line("failed to open session :", "HTP1", SKEL_URI.format(1), EUNABLETOLOAD)]
    log, v = judge(lines, ["HTP0", "HTP1"])
    s = {x["name"]: x for x in log["hexagon"]["sessions"]}
    assert (s["HTP0"]["status"], s["HTP0"]["virt"], s["HTP0"]["domain"]) == ("opened", 0, "cdsp:3")
    assert s["HTP1"]["status"] == "failed" and s["HTP1"]["code"] == EUNABLETOLOAD
    assert v["requested"] == 2 and v["opened"] == 1 and v["failed_session"] == "HTP1"
    assert v["fallback_reason"].startswith("HTP1 did not open: ggml-hex: HTP1 failed to open session : uri ")
    assert v["fallback_reason"].endswith("error 0x80000406") and "\n" not in v["fallback_reason"]
    hint = dispatch.hint_for(v["code"], v["arch"])
    assert "ADSP_LIBRARY_PATH" in hint and "hexbuild verify PKG --htp v79" in hint


def test_old_tree_failures_by_index(old_fmt):
    lines = [old_fmt.line("allocating new registry", 1), old_fmt.line("Arch version", 75),
             old_fmt.line("allocating new session: %s", "HTP0"),
             old_fmt.line("failed to enable unsigned PD for session", 0, 0x80000413)]
    log, v = judge(lines, ["HTP0"])
    assert v["failed_session"] == "HTP0" and v["code"] == 0x80000413 and v["opened"] == 0
    assert "unsigned PD" in v["fallback_reason"]
    assert dispatch.hint_for(v["code"]) is None  # not in the minimal table: the line is the message


def test_physical_virtual_devices_and_peers(new_fmt):
    line = new_fmt.line("[mdev peers", 0, "HTP0", 0, 0, "cdsp", 3, "HTP1 (phys=1), HTP2 (phys=2)")
    log, v = judge([line, new_fmt.line("failed to reserve new session", "HTP2", 2, 0, 0x8000040d)], ["HTP0"])
    s = {x["name"]: x for x in log["hexagon"]["sessions"]}
    assert s["HTP0"]["peers"] == ["HTP1", "HTP2"] and s["HTP0"]["phys"] == 0
    assert v["failed_session"] == "HTP2"  # a peer of the requested device failing is a fallback too


def test_forced_single_session(old_fmt):
    lines = [old_fmt.line("allocating new registry", 1), old_fmt.line("forcing ndev to 1")]
    _, v = judge(lines, ["HTP0", "HTP1"])
    assert v["fallback_reason"] and "2 sessions were asked for" in v["fallback_reason"]


def test_weights_on_cpu_only_is_a_fallback():
    lines = ["load_tensors: offloaded 0/27 layers to GPU\n",
             "load_tensors:          CPU model buffer size =   300.00 MiB\n"]
    _, v = judge(lines, ["HTP0"])
    assert v["htp_bytes"] == 0 and v["fallback_reason"].startswith("no weights landed on an HTP buffer (CPU 300.00")


def test_bench_backend_column():
    row = ("| llama 1B Q4_0  | 729.75 MiB | 1.24 B | CPU        |  99 |       4 |     128 |    0 | pp128 |"
           " 169.42 ± 1.75 |\n")
    head = ["| model          |       size | params | backend    | ngl | threads | n_batch | mmap |  test |"
            "           t/s |\n",
            "| ---------------| ---------: | -----: | ---------- | --: | ------: | ------: | ---: | ----: |"
            " ------------: |\n"]
    _, v = judge(head + [row], ["HTP0"])
    assert v["fallback_reason"] == "llama-bench ran on CPU, not HTP"
    _, ok = judge(head + [row.replace("CPU       ", "HTP       ")], ["HTP0"])
    assert ok["fallback_reason"] is None and ok["unconfirmed"] == ["HTP0"]


def test_real_transcripts_pass(tree_0_3_20, tree_0_3_36):
    old = parse_block(block_with(tree_0_3_20 / "docs/backend/snapdragon/README.md", "Llama-3.2-1B-Instruct-Q4_0.gguf D=HTP0"))
    v = dispatch.verdict(old, ["HTP0"])
    assert v["opened"] == 1 and v["fallback_reason"] is None and v["htp_bytes"] == round(504.26 * 2 ** 20)
    new = parse_block(block_with(tree_0_3_36 / "docs/backend/snapdragon/README.md", "gemma-2-2b-it-Q4_0.gguf"))
    v = dispatch.verdict(new, ["HTP0:0"])  # allocating only, but the weights are on HTP0:0
    assert v["opened"] == 1 and v["fallback_reason"] is None
    four = parse_block(block_with(tree_0_3_20 / "docs/backend/snapdragon/developer.md", "gpt-oss-20b"))
    v = dispatch.verdict(four, ["HTP0", "HTP1", "HTP2", "HTP3"])
    assert v["fallback_reason"] is None and v["opened"] == 4  # every session holds REPACK weights


def test_cpu_only_package_requests_nothing():
    _, v = judge(["load_tensors:          CPU model buffer size =   300.00 MiB\n"], ["HTP0"], cpu_only=True)
    assert v["cpu_only"] and v["requested"] == 0 and v["fallback_reason"] is None


@pytest.mark.parametrize("argv,env,want", [
    (["./bin/llama-cli", "--device", "HTP0,HTP1"], {}, ["HTP0", "HTP1"]),
    (["./bin/llama-bench", "--device", "HTP0/HTP1,HTP0"], {}, ["HTP0", "HTP1"]),
    (["./bin/llama-cli", "-dev", "none", "-m", "x"], {}, []),
    (["./bin/test-backend-ops", "-b", "HTP0:1", "-o", "MUL_MAT"], {}, ["HTP0:1"]),
    (["./bin/llama-perplexity", "-m", "x.gguf"], {"GGML_HEXAGON_NDEV": "2"}, ["HTP0", "HTP1"]),
    (["./bin/llama-perplexity", "-m", "x.gguf"], {"GGML_HEXAGON_NDEV": "0"}, []),
    (["./bin/llama-perplexity", "-m", "x.gguf", "-ngl", "0"], {}, []),
    (["./bin/llama-cli", "--version"], {}, []),
])
def test_requested_devices(argv, env, want):
    assert dispatch.requested_devices(argv, env) == want


# -- hexbuild run / bench on a device whose NPU does not answer ---------------------------------
def npu_program(tmp_path: Path, lines: list[str], name: str = "npu.sh") -> Path:
    """A device program printing the backend's own lines to stderr (as llama.cpp's log does),
    a CPU result on stdout, and exiting 0: what a run that fell back looks like from outside."""
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + "".join(f"cat >&2 <<'EOF'\n{line.rstrip()}\nEOF\n" for line in lines)
                      + "echo 'once upon a time'\nexit 0\n")
    script.chmod(0o755)
    return script


@pytest.fixture
def failing_npu(tmp_path, new_fmt):
    return [new_fmt.line("allocating new registry", 1), new_fmt.line("Arch version", 79, "disabled"),
            new_fmt.line("failed to open session :", "HTP0", SKEL_URI.format(0), EUNABLETOLOAD)]


def install(tmp_path, program, *, manifest=None, tools=("llama-completion",)):
    dest = str(tmp_path / "dev" / "llama.cpp")
    populate(f"local:{dest}", dest, {t: program for t in tools}, manifest=manifest)
    return f"local:{dest}", dest


def test_run_fails_with_the_backends_reason(cli, tmp_path, failing_npu):
    spec, _ = install(tmp_path, npu_program(tmp_path, failing_npu))
    r = cli("--json", "run", "completion", "-t", spec, "--model", "m.gguf", "--results-dir", str(tmp_path / "res"))
    assert r.rc == errors.CPU_FALLBACK == 12, r.err
    lines = [l for l in r.err.splitlines() if l.startswith("hexbuild: error:")]
    assert len(lines) == 1 and "HTP0 did not open" in lines[0] and "error 0x80000406" in lines[0]
    assert "hint: 0x80000406 is AEE_EUNABLETOLOAD" in r.err and "hexbuild verify PKG --htp v79" in r.err
    doc = first_json(r.out)
    d = doc["dispatch"]
    assert (d["requested"], d["opened"], d["failed_session"], d["code"]) == (1, 0, "HTP0", EUNABLETOLOAD)
    assert d["sessions"][0]["status"] == "failed" and d["htp_bytes"] is None
    saved = json.loads(Path(doc["log"]).with_suffix(".json").read_text())
    assert saved["dispatch"]["fallback_reason"] == d["fallback_reason"]


@pytest.mark.parametrize("kind, check", [("qemu", "npu"), ("local", "fastrpc:library")])
def test_no_fastrpc_says_cause_and_fix_and_a_check_the_target_has(cli, tmp_path, monkeypatch, kind, check):
    """Without FastRPC the real backend cannot load libcdsprpc.so (its line, recorded from the
    real 0.3.28 build on qemu:) and llama.cpp refuses --device: exit 12 with the cause and the fix
    on stderr (they were only in the JSON), pointing to a `doctor` check that target has: on qemu:
    its npu check (doctor runs no FastRPC check there), elsewhere fastrpc:library."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", "/usr/aarch64-linux-gnu")
    recorded = (Path(__file__).parent / "data" / "explain" / "real-board-0.3.28.log").read_text().strip()
    program = tmp_path / "no-fastrpc.sh"
    program.write_text(f"#!/bin/sh\necho '{recorded}' >&2\necho 'error: invalid device: HTP0' >&2\nexit 1\n")
    program.chmod(0o755)
    dest = str(tmp_path / "inst")
    spec = f"{kind}:{dest}"
    populate(spec, dest, {"llama-completion": program},
             manifest={"os": "linux", "files": [{"path": "lib/libggml-hexagon.so"}, {"path": "bin/llama-completion"}]})
    r = cli("--json", "run", "completion", "-t", spec, "--model", "m.gguf", "--results-dir", str(tmp_path / "res"))
    assert r.rc == errors.CPU_FALLBACK, r.err
    error = [l for l in r.err.splitlines() if l.startswith("hexbuild: error:")]
    hint = [l for l in r.err.splitlines() if l.startswith("hint:")]
    assert len(error) == len(hint) == 1 and "failed to load libcdsprpc.so" in error[0]
    assert "the FastRPC library the backend dlopens" in hint[0]  # the cause
    assert "; fix: " in hint[0] and f"hexbuild doctor --target {spec} ({check})" in hint[0]
    diagnosis = first_json(r.out)["diagnosis"]
    assert diagnosis["checks"] == [check] and diagnosis["fix"] in hint[0]
    doctor = cli("--json", "doctor", "--target", spec)
    names = [c["name"] for c in doctor.json["checks"]]
    assert f"device:{check}" in names, names  # the check named is one doctor runs there
    explained = cli("--json", "explain", first_json(r.out)["log"], "--target", spec)
    assert explained.rc == 0 and explained.json["checks"] == [check] and explained.json["facts"], explained.err


def test_allow_cpu_fallback_warns(cli, tmp_path, failing_npu):
    spec, _ = install(tmp_path, npu_program(tmp_path, failing_npu))
    r = cli("run", "completion", "-t", spec, "--allow-cpu-fallback", "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0 and "fell back to the CPU" in r.err and "once upon a time" in r.out


def test_run_that_opened_passes(cli, tmp_path, new_fmt):
    ok = [new_fmt.line("allocating new registry", 2),
          new_fmt.line("new session : session-id", "HTP0", 0, 3, SKEL_URI.format(0), 0xb400),
          new_fmt.line("new session : session-id", "HTP1", 1, 3, SKEL_URI.format(1), 0xb401)]
    spec, _ = install(tmp_path, npu_program(tmp_path, ok))
    r = cli("--json", "run", "completion", "-t", spec, "--ndev", "2", "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0, r.err
    d = r.json["dispatch"]
    assert (d["requested"], d["opened"], d["fallback_reason"]) == (2, 2, None)
    assert [s["skel"] for s in d["sessions"]] == ["libggml-htp-v79.so"] * 2


def test_virtual_devices_named_and_checked(cli, tmp_path, tree_0_3_36, new_fmt):
    facts = read_source(tree_0_3_36).to_json()
    lines = [new_fmt.line("allocating new registry", 2),
             new_fmt.line("device %zu: %s (phys=%d, virt=%d, domain=%s:%d)\n", 0, "HTP0:0", 0, 0, "cdsp", 3),
             new_fmt.line("device %zu: %s (phys=%d, virt=%d, domain=%s:%d)\n", 1, "HTP0:1", 0, 1, "cdsp", 3),
             new_fmt.line("new session : session-id", "HTP0:0", 0, 3, SKEL_URI.format(0), 0xb400),
             new_fmt.line("failed to reserve new session", "HTP0:1", 0, 1, 0x8000040d)]
    spec, _ = install(tmp_path, npu_program(tmp_path, lines), manifest={"llama_cpp": facts})
    r = cli("--json", "run", "completion", "-t", spec, "--devices", "HTP0:0,HTP0:1", "--results-dir",
            str(tmp_path / "res"))
    assert r.rc == 12
    d = first_json(r.out)["dispatch"]
    assert d["requested_devices"] == ["HTP0:0", "HTP0:1"] and d["opened"] == 1
    assert {s["name"]: s["virt"] for s in d["sessions"]} == {"HTP0:0": 0, "HTP0:1": 1}
    assert "HTP0:1 did not open" in r.err and "(physical 0, virtual 1) : error 0x8000040d" in r.err


def test_cpu_only_package_runs_without_devices(cli, tmp_path, argv_echo):
    manifest = {"htp_versions": [], "files": [{"path": "bin/llama-completion"}]}
    spec, _ = install(tmp_path, argv_echo, manifest=manifest)
    r = cli("--json", "run", "completion", "-t", spec, "--model", "m.gguf", "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0, r.err
    d = r.json["dispatch"]
    assert d["cpu_only"] and d["requested"] == 0 and "--device" not in r.json["argv"]
    assert "CPU only" in r.err


def test_bench_exits_12_when_every_run_fell_back(cli, tmp_path, failing_npu, fake_llama_bench):
    # llama-bench prints its JSONL rows (backend "CPU" when it fell back) after the backend's lines
    script = tmp_path / "bench.sh"
    rows = (fake_llama_bench.read_text().replace('\\"backends\\": \\"HTP\\"', '\\"backends\\": \\"CPU\\"')
            .replace('echo "ggml-hex: allocating new session: HTP0 (fake, $ndev sessions)" >&2',
                     "".join(f"echo '{l.strip()}' >&2\n" for l in failing_npu)))
    assert rows != fake_llama_bench.read_text()
    script.write_text(rows)
    script.chmod(0o755)
    spec, dest = install(tmp_path, script, tools=("llama-bench",))
    models = tmp_path / "models"
    models.mkdir()
    (models / "a.gguf").write_bytes(b"GGUF")
    r = cli("--json", "bench", "-t", spec, "--model", "a.gguf", "--models-dir", str(models),
            "--out", str(tmp_path / "out"))
    assert r.rc == 12, r.err
    assert "fell back to the CPU: HTP0 did not open" in r.err
    r = cli("--json", "bench", "-t", spec, "--model", "a.gguf", "--models-dir", str(models),
            "--out", str(tmp_path / "out2"), "--allow-cpu-fallback")
    assert r.rc == 0, r.err
