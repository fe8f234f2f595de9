"""hexbuild inspect --addr2line: offsets → function+offset (symbol table) and source line (DWARF),
with and without -g, from arguments and from device log text on stdin; and `run` noticing a DSP
crash in a device log."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild import errors
from hexbuild.artifacts.inspect import crash_offsets, find_objdump, inspect_library
from hexbuild.artifacts.inspect.elfmeta import read_meta
from tests import inspect_kernels as ik

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return ik.build(tmp_path_factory.mktemp("a2l") / "libggml-htp-v73.so", "v73")


@pytest.fixture(scope="module")
def debug(tmp_path_factory):
    return ik.build(tmp_path_factory.mktemp("a2l-g") / "libggml-htp-v73.so", "v73", debug=True)


def symbol(lib: Path, name: str):
    return next(s for s in read_meta(lib).symbols if s.name == name)


def hexbuild(*args, stdin: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "hexbuild", "inspect", *map(str, args)], input=stdin, env=env,
                          capture_output=True, text=True, timeout=120)


def test_offset_to_function_without_debug_info(plain, cli):
    sym = symbol(plain, "div_in_loop")
    r = cli("inspect", str(plain), "--addr2line", hex(sym.addr + 0x10), hex(sym.addr), "--json")
    assert r.rc == 0, r.err
    first, second = r.json["addresses"]
    assert (first["function"], first["offset"], first["file"], first["line"]) == ("div_in_loop", 0x10, None, None)
    assert (second["function"], second["offset"]) == ("div_in_loop", 0)
    r = cli("inspect", str(plain), "--addr2line", hex(sym.addr + 0x10))
    assert "div_in_loop+0x10" in r.out and "build with -g" in r.out


def test_call_sites_map_to_source_lines_with_debug_info(debug, cli):
    rep = inspect_library(debug, find_objdump())
    (div,) = rep.function("div_in_loop").helper_calls
    (prom,) = rep.function("half_sum").helper_calls
    assert div.line.endswith(f":{ik.line_of('DIVIDE')}") and prom.line.endswith(f":{ik.line_of('PROMOTION')}")
    r = cli("inspect", str(debug), "--addr2line", hex(div.addr), hex(prom.addr), "--json")
    a, b = r.json["addresses"]
    assert (a["function"], a["line"]) == ("div_in_loop", ik.line_of("DIVIDE"))
    assert (b["function"], b["line"]) == ("half_sum", ik.line_of("PROMOTION"))
    # a second opinion: LLVM's own addr2line reads the same line programs
    if shutil.which("llvm-addr2line-19"):
        out = subprocess.run(["llvm-addr2line-19", "-e", str(debug), hex(div.addr)], capture_output=True,
                             text=True).stdout
        assert out.strip().endswith(f":{ik.line_of('DIVIDE')}") or f":{ik.line_of('DIVIDE')}:" in out
        assert out.split(":")[0] == a["file"]


def test_log_text_on_stdin(debug):
    sym = symbol(debug, "half_sum")
    log = (f"11-23 10:00:01.123  4242  4242 E adsprpc : remote_handle64_invoke failed: error 0x80000406\n"
           f"11-23 10:00:01.124  4242  4242 E ggml-hex: DSP crash in ./libggml-htp-v73.so+{sym.addr + 8:#x}\n")
    cp = hexbuild(debug, "--addr2line", "--json", stdin=log)
    assert cp.returncode == 0, cp.stderr
    import json

    (only,) = json.loads(cp.stdout)["addresses"]  # the error code is not an address in the code
    assert (only["function"], only["offset"]) == ("half_sum", 8) and only["line"]
    # QuRT's report: the load address and the faulting PC
    qurt = ("CDSP: Process \"/frpc/f05e0 llama-cli\" crashed in thread \"op_worker\" due to TLBMISS RW occurrence\n"
            "CDSP: Crashed Shared Object \"./libggml-htp-v73.so\" load address : 0xE0800000\n"
            f"CDSP: Fault PC : {0xE0800000 + sym.addr + 4:#X}\n")
    cp = hexbuild(debug, "--addr2line", "-", stdin=qurt)
    assert cp.returncode == 0 and "half_sum+0x4" in cp.stdout, cp.stderr
    cp = hexbuild(debug, "--addr2line", stdin="nothing to see here\n")
    assert cp.returncode == errors.PARSE_FAILED and "hexbuild: error:" in cp.stderr


def test_library_from_a_package(debug, tmp_path, cli):
    pkg = tmp_path / "llama.cpp"
    (pkg / "lib").mkdir(parents=True)
    shutil.copy(debug, pkg / "lib" / "libggml-htp-v73.so")
    shutil.copy(debug, pkg / "lib" / "libggml-htp-v69.so")
    sym = symbol(debug, "div_once")
    r = cli("inspect", str(pkg), "--addr2line", hex(sym.addr), "--lib", "libggml-htp-v73.so", "--json")
    assert r.rc == 0 and r.json["addresses"][0]["function"] == "div_once", r.err
    r = cli("inspect", str(pkg), "--addr2line", hex(sym.addr))
    assert r.rc == errors.USAGE and "--lib" in r.err  # two libraries: which one?
    r = cli("inspect", "--addr2line", hex(sym.addr), "--lib", str(debug), "--json")
    assert r.rc == 0 and r.json["addresses"][0]["function"] == "div_once"
    r = cli("inspect", str(debug), "--addr2line", "zzz")
    assert r.rc == errors.USAGE


def test_crash_offsets_in_logs():
    assert crash_offsets("all fine\nllama_perf_context_print: eval time\n") == []
    sites = crash_offsets("frame #01 pc libggml-htp-v79.so (offset 0x51a30)\n"
                          "at libggml-htp-v79.so+0x5ba54 and again libggml-htp-v79.so+0x5ba54\n")
    assert [(s.lib, s.offset) for s in sites] == [("libggml-htp-v79.so", 0x51A30), ("libggml-htp-v79.so", 0x5BA54)]
    qurt = crash_offsets("Crashed Shared Object ./libggml-htp-v75.so load address : 0xFE100000\n"
                         "PC : 0xFE151A30\nLR : 0xFE150010\n")
    assert [(s.offset, s.what) for s in qurt] == [(0x51A30, "pc"), (0x50010, "lr")]


def test_run_offers_addr2line_after_a_dsp_crash(tmp_path, capsys):
    from hexbuild.runner.commands import Invocation
    from hexbuild.runner.execution import execute
    from hexbuild.targets.local import LocalTarget

    target = LocalTarget(f"local:{tmp_path}", str(tmp_path))
    crash = "printf 'ggml-hex: session died\\nCDSP crash at libggml-htp-v79.so+0x51a30\\n' >&2; exit 1"
    record = execute(target, Invocation("tool", "sh", ["sh", "-c", crash], {}, str(tmp_path)),
                     results_dir=tmp_path / "results", passthrough=False)
    assert record.exit_code == 1
    assert record.dsp_crash == [{"lib": "libggml-htp-v79.so", "offset": 0x51A30, "what": "offset"}]
    err = capsys.readouterr().err
    assert "hexbuild inspect PKG --addr2line 0x51a30 --lib libggml-htp-v79.so" in err
    import json

    assert json.loads(Path(record.json_path).read_text())["dsp_crash"][0]["offset"] == 0x51A30
    clean = execute(target, Invocation("tool", "sh", ["sh", "-c", "echo fine"], {}, str(tmp_path)),
                    results_dir=tmp_path / "results", passthrough=False)
    assert clean.dsp_crash is None and "dsp_crash" not in json.loads(Path(clean.json_path).read_text())


def test_run_names_the_function_when_the_skel_is_on_this_machine(tmp_path, capsys):
    """On a target whose programs run here (qemu+npu:, local:) the skel the run loaded is the
    install's own lib/ file: the crash's offset is named with its function at once, and the
    offer names that install instead of PKG."""
    import json

    from hexbuild.artifacts.inspect.elfmeta import read_meta
    from hexbuild.runner.commands import Invocation
    from hexbuild.runner.execution import execute
    from hexbuild.targets.local import LocalTarget
    from tests import elf_factory as ef

    skel = ef.hexagon_so(tmp_path / "lib" / "libggml-htp-v73.so", "v73", exports=(ef.SKEL_SYMBOL, "op_matmul"))
    sym = next(s for s in read_meta(skel).symbols if s.name == "op_matmul")
    target = LocalTarget(f"local:{tmp_path}", str(tmp_path))
    crash = (f"printf 'hexbuild-vnpu: the DSP faulted: SIGSEGV (address 0x00000000) at pc 0x40000000, "
             f"libggml-htp-v73.so+{sym.addr + 4:#x} (thread 7)\\n' >&2; exit 134")
    record = execute(target, Invocation("tool", "sh", ["sh", "-c", crash], {"ADSP_LIBRARY_PATH": str(tmp_path / "lib")},
                                        str(tmp_path)), results_dir=tmp_path / "results", passthrough=False)
    assert record.dsp_crash == [{"lib": "libggml-htp-v73.so", "offset": sym.addr + 4, "what": "offset",
                                 "function": "op_matmul"}]
    err = capsys.readouterr().err
    assert f"the DSP crashed at libggml-htp-v73.so+{sym.addr + 4:#x} (op_matmul+0x4)" in err
    assert f"hexbuild inspect {tmp_path} --addr2line {sym.addr + 4:#x} --lib libggml-htp-v73.so" in err
    assert json.loads(Path(record.json_path).read_text())["dsp_crash"][0]["function"] == "op_matmul"
