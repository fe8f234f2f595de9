"""`hexbuild explain`: FastRPC/AEE codes and the ggml-hex lines quoted in llama.cpp's issue
threads (tests/data/explain/, lines only) turned into one line of cause and one of fix."""

from __future__ import annotations

import re

from pathlib import Path

import pytest

from hexbuild import data
from hexbuild.diagnose import explain_code, explain_line, explain_log, parse_code
from hexbuild.errors import UsageError

LOGS = Path(__file__).parent / "data" / "explain"


@pytest.mark.parametrize("code, name, side, words", [
    ("0x80000406", "AEE_EUNABLETOLOAD", "dsp", "could not load the skel"),
    ("0x80000414", "AEE_EUNSUPPORTED", "dsp", "HMX clock request"),
    ("0x72", "AEE_ECONNREFUSED", "cpu", "could not reach the compute DSP"),
    ("0x14", "AEE_EUNSUPPORTED", "cpu", "libcdsprpc.so is older"),
    ("0x2e", "AEE_EINTERRUPTED", "cpu", "stopped answering"),
    ("0x0000000e", "AEE_EBADPARM", "cpu", "second HTP session"),
])
def test_the_codes_users_report(code, name, side, words):
    e = explain_code(code)
    assert (e.name, e.side, e.known) == (name, side, True)
    assert words in e.cause
    assert e.fix and e.source
    assert "\n" not in e.cause and "\n" not in e.fix  # one line each


def test_code_forms_and_the_offset():
    assert parse_code("0x80000406") == parse_code("AEE_EUNABLETOLOAD") == parse_code("EUNABLETOLOAD") == 0x80000406
    assert parse_code("2147484678") == 0x80000406  # decimal, as some tools print it
    assert parse_code("AEE_ECONNREFUSED") == 0x72  # only ever seen from the CPU side
    assert parse_code("-1") == 0xFFFFFFFF
    # a code with no backend entry still gets the header's name and meaning
    e = explain_code("0x8000041d")
    assert (e.name, e.side, e.known) == ("AEE_EMEMPTR", "dsp", False)
    assert "raised by the DSP" in e.cause
    for bad in ("banana", "0x99999", ""):
        with pytest.raises(UsageError):
            explain_code(bad)


def test_every_table_entry_names_its_source_and_is_one_line():
    table = data.table("fastrpc_errors")
    for entry in table["code"] + table["line"]:
        for key in ("cause", "fix", "source"):
            assert entry[key] and "\n" not in entry[key], (entry, key)
    names = table["names"]
    for entry in table["code"]:
        assert names[entry["name"]][0] == entry["value"], entry["name"]


@pytest.mark.parametrize("log, line_no, name, kind, words", [
    ("issue-16911.log", 4, "AEE_EUNSUPPORTED", "get-uri", "older than the request"),
    ("issue-22352.log", 8, "AEE_EUNABLETOLOAD", "open-session", "could not load the skel"),
    ("issue-22204.log", 6, "AEE_ECONNREFUSED", "open-session", "NPU driver or firmware"),
    ("issue-26123.log", 1, "AEE_EINTERRUPTED", "dspqueue-read", "in the middle of a graph"),
    ("issue-28288.log", 2, "AEE_EUNABLETOLOAD", "open-session", "unsigned code refused"),
])
def test_the_quoted_logs(log, line_no, name, kind, words):
    e = explain_log((LOGS / log).read_text().splitlines())
    assert e is not None
    assert (e.line_number, e.name, e.kind) == (line_no, name, kind)
    assert words in e.cause
    assert e.line == (LOGS / log).read_text().splitlines()[line_no - 1].strip()


def test_lines_that_only_point_back():
    # GGML_ASSERT(device) alone is explained, but never preferred over the failure before it
    e = explain_log(["/llama_cpp/ggml/src/ggml-backend.cpp:476: GGML_ASSERT(device) failed"])
    assert e.kind == "assert-device" and "ggml-hex line before it" in e.cause
    assert explain_line("llama_perf_context_print: load time = 1.0 ms") is None
    e = explain_line("ggml-hex: HTP0 failed to enable unsigned PD : error 0x80000406")
    assert e.kind == "unsigned-pd" and e.name == "AEE_EUNABLETOLOAD" and "fastrpc:unsigned-pd-shell" in e.checks


def test_cli_code_and_log(cli):
    r = cli("explain", "0x80000406")
    assert r.rc == 0
    lines = r.out.strip().splitlines()
    assert lines[0].startswith("cause: 0x80000406 AEE_EUNABLETOLOAD:") and lines[1].startswith("fix:")
    r = cli("explain", str(LOGS / "issue-22204.log"), "--json")
    assert r.rc == 0 and r.json["code_hex"] == "0x72" and r.json["line_number"] == 6


@pytest.mark.parametrize("line", ["ggml-hex: failed to get URI for session 0 : error 0x14",
                                  "ggml-hex: HTP1 dspqueue_read failed: 0x0000002e",
                                  "ggml-hex: HTP1 dspqueue_write failed: 0x0000000e"])
def test_a_source_the_line_and_its_code_share_is_named_once(cli, tmp_path, line):
    log = tmp_path / "run.log"
    log.write_text(line + "\n")
    r = cli("explain", str(log))
    assert r.rc == 0, r.err
    (source,) = [ln for ln in r.out.splitlines() if ln.startswith("source:")]
    refs = re.findall(r"(?:\S+)?#\d+", source)
    assert len(refs) == len(set(refs)), source
    assert r.out.count("source:") == 1


def test_cli_bad_input(cli, tmp_path):
    r = cli("explain", "not-a-code")
    assert r.rc == 2 and "not an error code" in r.err
    r = cli("explain", str(tmp_path))
    assert r.rc == 2 and "is a directory" in r.err
    quiet = tmp_path / "quiet.log"
    quiet.write_text("llama_perf_context_print: load time = 1.0 ms\n")
    r = cli("explain", str(quiet), "--json")
    assert r.rc == 9 and r.json["error"]["exit_code"] == 9


def test_cli_with_a_target_adds_the_device_facts(cli, make_fastrpc_phone, tmp_path):
    from tests.elf_factory import make_package

    dev = make_fastrpc_phone("SM8650")  # v75
    pkg = make_package(tmp_path, "android", ("v73",))
    assert cli("deploy", str(pkg), "--target", f"adb:{dev.serial}").rc == 0
    r = cli("explain", str(LOGS / "issue-22352.log"), "--target", f"adb:{dev.serial}", "--json")
    assert r.rc == 0, r.err
    first = r.json["facts"][0]
    assert first["name"] == "package:htp-lib" and first["status"] == "missing"
    assert "libggml-htp-v75.so" in first["detail"]
    human = cli("explain", "0x80000406", "--target", f"adb:{dev.serial}")
    assert "device package:htp-lib: FAILED" in human.out and "--htp v75" in human.out


def test_run_explains_a_session_that_failed(cli, tmp_path):
    """A tool whose log carries the 8s Gen 3 failure (issue #22352's lines): the run's JSON record
    gets the diagnosis and stderr one warning line with cause and fix."""
    dest = tmp_path / "board" / "llama.cpp"
    tool = dest / "bin" / "llama-cli"
    tool.parent.mkdir(parents=True)
    (dest / "lib").mkdir()
    log = (LOGS / "issue-22352.log").read_text()
    tool.write_text("#!/bin/sh\ncat >&2 <<'LOG'\n" + log + "LOG\necho 'CPU answer'\n")
    tool.chmod(0o755)
    r = cli("--json", "run", "tool", "-t", f"local:{dest}", "--results-dir", str(tmp_path / "results"),
            "--", "llama-cli", "-p", "hi")
    assert r.rc == 12 and "fell back to the CPU" in r.err  # the dispatch proof: no session opened
    r = cli("--json", "run", "tool", "-t", f"local:{dest}", "--results-dir", str(tmp_path / "results"),
            "--allow-cpu-fallback", "--", "llama-cli", "-p", "hi")
    assert r.rc == 0, r.err
    diag = r.json["diagnosis"]
    # the log's 8th line, unless the program's stdout line was read before the rest of its
    # stderr: two pipes read as data comes, so the number is checked against the saved log
    saved = Path(r.json["log"]).read_text().splitlines()
    assert diag["name"] == "AEE_EUNABLETOLOAD" and diag["line_number"] in (8, 9)
    assert saved[diag["line_number"] - 1].strip() == diag["line"] == log.splitlines()[7].strip()
    warning = [ln for ln in r.err.splitlines()  # CI's lines start with the time
               if re.match(r"(\[[\d:]+\] )?warning:", ln) and "0x80000406" in ln]
    assert len(warning) == 1 and "fix:" in warning[0]


# What the virtual NPU (qemu+npu:) prints when its DSP process goes wrong: the runtime's fault line,
# the emulator's own stop, the host library's line about the process, then the backend's.
VNPU_FAULT = """\
hexbuild-vnpu: HTP0: session opened on the virtual NPU (libggml-htp-v73.so on an emulated v73 cDSP, pid 4242)
hexbuild-vnpu: the DSP faulted: SIGSEGV (address 0x00000000) at pc 0x40d40448, libggml-htp-v73.so+0x10448 (thread 4245)
hexbuild-vnpu: the DSP process of session 0 (pid 4242) died: Segmentation fault (signal 11)
ggml-hex: dspqueue_read failed: 0x0000002e
"""
VNPU_EMULATOR = """\
hexbuild-vnpu: HTP0: session opened on the virtual NPU (libggml-htp-v73.so on an emulated v73 cDSP, pid 4242)

qemu: unhandled CPU exception 0x15 - aborting
General Purpose Registers = {
  pc = 0x40d40448
hexbuild-vnpu: the DSP process of session 0 (pid 4242) ended unexpectedly (exit status 1)
ggml-hex: dspqueue_read failed: 0x0000002e
"""


@pytest.mark.parametrize("log, line_no, kind, words, checks", [
    (VNPU_FAULT, 2, "vnpu-dsp-fault", "the skel faulted on the virtual NPU's emulated DSP", []),
    (VNPU_EMULATOR, 3, "vnpu-emulator-stopped", "an instruction it does not model", ["vnpu:hmx"]),
])
def test_the_virtual_npus_faults_are_explained_before_what_follows_them(log, line_no, kind, words, checks):
    """The first line of a DSP fault on qemu+npu: is the cause, as a phone's crash report would be:
    not the process's end, nor the backend's 0x2e that follows it."""
    e = explain_log(log.splitlines())
    assert (e.line_number, e.kind, e.code, e.checks) == (line_no, kind, None, checks)
    assert words in e.cause and "AEE_EINTERRUPTED" in e.cause
    assert explain_line("hexbuild-vnpu: HTP0: 65536 bytes on HTP buffers (mapped to the DSP)") is None


def test_on_qemu_npu_a_session_failure_keeps_its_fastrpc_fix():
    """qemu: has no NPU, so a FastRPC diagnosis there says so; qemu+npu: has one (virtual): its
    diagnosis keeps the FastRPC fix and the checks its doctor runs under the same names."""
    from hexbuild.runner.proof import fit_diagnosis

    found = explain_line("ggml-hex: failed to open session 0 : error 0x80000406").to_json()
    plain = fit_diagnosis("qemu:/tmp/x", found)
    assert plain["checks"] == ["npu"] and "has no NPU" in plain["fix"]
    npu = fit_diagnosis("qemu+npu:/tmp/x", found)
    assert npu["checks"] == found["checks"] and "package:htp-lib" in npu["checks"]
    assert "--target qemu+npu:/tmp/x" in npu["fix"] and "has no NPU" not in npu["fix"]
