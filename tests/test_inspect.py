"""hexbuild inspect on genuine Hexagon libraries (clang-19, v68/v69/v73) with planted problems:
every finding and every non-finding, the PLT names, the --strict gate and its baseline,
--disasm, a missing disassembler, and v75+ objects decoded with --mcpu/--mattr."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess

import pytest

from hexbuild import errors
from hexbuild.artifacts.inspect import find_objdump, inspect_library
from hexbuild.artifacts.inspect.analysis import helper_kind
from tests import inspect_kernels as ik

pytestmark = pytest.mark.skipif(shutil.which("llvm-objdump-19") is None and shutil.which("llvm-objdump") is None,
                                reason="llvm-objdump is installed by scripts/setup-test-env.sh (llvm-19)")


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect")
    return {v: ik.build(root / v / f"libggml-htp-{v}.so", v) for v in ("v68", "v69", "v73")}


@pytest.fixture(scope="module")
def reports(libs):
    tool = find_objdump()
    return {v: inspect_library(p, tool) for v, p in libs.items()}


def fn(report, name):
    f = report.function(name)
    assert f is not None, [g.name for g in report.functions]
    return f.to_json()


# -- findings and non-findings, per version -------------------------------------------------------
@pytest.mark.parametrize("version", ["v68", "v69", "v73"])
def test_planted_spill(reports, version):
    f = fn(reports[version], "spill_accumulators")
    # 40 live accumulators in 32 registers: some are stored and reloaded every iteration
    assert f["hvx_spills"]["in_loop_stores"] > 0 and f["hvx_spills"]["in_loop_loads"] > 0
    assert f["hvx_spills"]["frame"] > 0  # the initial and final copies outside the loop
    assert f["hardware_loops"] == 1
    (loop,) = f["loops"]
    assert loop["kind"] == "loop0" and loop["innermost"]
    assert loop["hvx_spills"]["stores"] + loop["hvx_spills"]["loads"] == f["hvx_spills"]["in_loop"]
    assert f["helper_calls"] == [] and f["calls"]["total"] == 0


@pytest.mark.parametrize("version", ["v68", "v69", "v73"])
def test_software_divide_in_and_out_of_loop(reports, version):
    f = fn(reports[version], "div_in_loop")
    (site,) = f["helper_calls"]
    assert site["target"] == "__hexagon_udivsi3" and site["helper"] == "divide"
    assert site["in_loop"] and site["hot"] and site["loop"] == "branch"  # no hardware loop around a call
    assert f["divides"] == {"total": 1, "in_loop": 1}
    assert f["hvx_spills"]["total"] == 0 and f["promotions"]["total"] == 0
    once = fn(reports[version], "div_once")
    (site,) = once["helper_calls"]
    assert site["target"] == "__hexagon_udivsi3" and not site["in_loop"] and not site["hot"]
    assert once["loops"] == []


@pytest.mark.parametrize("version", ["v68", "v69", "v73"])
def test_float_promotion(reports, version):
    f = fn(reports[version], "half_sum")
    (site,) = f["helper_calls"]
    assert site["target"] == "__extendhfsf2" and site["helper"] == "promotion" and site["hot"]
    assert f["promotions"] == {"total": 1, "in_loop": 1} and f["divides"]["total"] == 0


@pytest.mark.parametrize("version", ["v68", "v69", "v73"])
def test_clean_kernels_report_nothing(reports, version):
    for name in ik.CLEAN + ("htp_iface_skel_handle_invoke", "op_matmul"):
        f = fn(reports[version], name)
        assert f["hvx_spills"]["total"] == 0 and f["scalar_spills"]["in_loop"] == 0, name
        assert f["helper_calls"] == [] and f["calls"]["total"] == 0, name
        assert f["unknown_words"] == 0, name
    add = fn(reports[version], "clean_hvx_add")
    assert add["hardware_loops"] >= 1 and add["branch_loops"] == 0 and add["hvx_insns"] > 0
    scale = fn(reports[version], "clean_scale")  # hardware float: no helper
    assert scale["hardware_loops"] >= 1 and scale["hvx_insns"] == 0
    assert fn(reports[version], "clean_scalar")["loops"] == []
    assert reports[version].warnings == []


def test_plt_slots_named_from_rela_plt(libs, reports):
    """The calls go to PLT slots (no name in llvm-objdump 19's text); the names come from
    .rela.plt, which llvm-readelf lists independently."""
    rel = subprocess.run(["llvm-readelf-19", "-r", str(libs["v73"])], capture_output=True, text=True).stdout
    assert "__hexagon_udivsi3" in rel and "__extendhfsf2" in rel
    meta = reports["v73"].meta
    start, size = meta.plt
    for name in ("div_in_loop", "half_sum"):
        (site,) = reports["v73"].function(name).helper_calls
        text = subprocess.run(["llvm-objdump-19", "-d", "--no-show-raw-insn", f"--start-address={site.addr:#x}",
                               f"--stop-address={site.addr + 4:#x}", str(libs["v73"])],
                              capture_output=True, text=True).stdout
        target = int(text.split("call ")[1].split()[0], 16)
        assert start <= target < start + size and "<" not in text.split("call ")[1].split("\n")[0]


def test_parse_the_shapes_objdump_prints():
    """One parser for every shape: duplex words, predicated stores, compound and pair writes,
    loop set-ups and ends, PLT loads, undecoded words (counted only when code follows)."""
    from hexbuild.artifacts.inspect.model import ENDLOOP0, parse

    text = """
lib.so:	file format elf32-hexagon

Disassembly of section .text:

00010000 <f>:
   10000: { 	r3 = add(r29,#0x800); 	allocframe(#0x8) }
   10004: { 	loop0(0x10010,r2)
   10008:   	if (!p0.new) vmem(r3+#-0x2) = v0.new
   1000c:   	r17:16 = combine(r0,r1) }
   10010: { 	v1.cur = vmem(r3+#0x1)
   10014:   	<unknown>
   10018:   	r3 -= mpyi(r0,r16); 	call 0x10100 <__hexagon_udivsi3@plt> }  :endloop0
   1001c: { 	jumpr r31 }
   10020: <unknown>

Disassembly of section .plt:

00010100 <.plt>:
   10100: { 	immext(#0x20080)
   10104:   	r14 = add(pc,##0x20088) }
"""
    f, plt = parse(text)
    assert (f.name, f.section, len(f.packets), f.unknown) == ("f", ".text", 4, 1)  # the trailing word is padding
    first = f.packets[0].insns
    assert [i.text for i in first] == ["r3 = add(r29,#0x800)", "allocframe(#0x8)"]
    assert (first[0].dest, first[0].sources) == ("r3", ("r29",))
    setup = f.packets[1].insns
    assert (setup[0].loop, setup[0].loop_start) == (0, 0x10010)
    assert (setup[1].mem_base, setup[1].mem_store, setup[1].mem_vector, setup[1].vector) == ("r3", True, True, True)
    assert (setup[2].dest, setup[2].dest_pair, setup[2].sources) == ("r17", "r16", ())
    body = f.packets[2]
    assert body.endloop == ENDLOOP0 and body.insns[0].mem_store is False and body.insns[0].mem_base == "r3"
    assert (body.insns[1].dest, body.insns[1].sources) == ("r3", ())  # r3 -= …: no longer the stack's
    assert (body.insns[2].call, body.insns[2].target_name) == (0x10100, "__hexagon_udivsi3@plt")
    assert f.packets[3].insns[0].jump is None and f.packets[3].insns[0].call is None
    assert plt.section == ".plt" and plt.packets[0].insns[0].pc_rel == 0x20088  # immext is dropped


def test_helper_names():
    assert helper_kind("__hexagon_udivdi3") == "divide" and helper_kind("__hexagon_umodsi3") == "divide"
    assert helper_kind("__hexagon_divsf3") == "divide" and helper_kind("__udivsi3@plt") == "divide"
    assert helper_kind("__truncsfhf2") == "promotion" and helper_kind("__extendhfsf2") == "promotion"
    assert helper_kind("__hexagon_adddf3") == "soft_float" and helper_kind("__floatsisf") == "soft_float"
    assert helper_kind("op_matmul") is None and helper_kind("__hexagon_memcpy") is None


# -- the command ------------------------------------------------------------------------------------
def test_cli_json_and_table(libs, cli):
    r = cli("inspect", str(libs["v73"]), "--json")
    assert r.rc == 0, r.err
    (lib,) = r.json["libraries"]
    assert lib["arch"] == "v73" and "--mcpu=hexagonv73" in lib["disassembler_flags"]
    assert lib["totals"]["divides"] == 2 and lib["totals"]["promotions"] == 1
    assert lib["totals"]["helpers_in_hot_loops"] == 2 and lib["totals"]["hvx_spills_in_loop"] > 0
    assert {f["what"] for f in r.json["gate"]["findings"]} == {"hvx_spills_in_loop", "__hexagon_udivsi3",
                                                               "__extendhfsf2"}
    r = cli("inspect", str(libs["v73"]))
    assert r.rc == 0
    lines = r.out.splitlines()
    shown = {line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("  (")
             and not line.strip().startswith("!")}
    assert {"spill_accumulators", "div_in_loop", "half_sum", "div_once"} <= shown
    assert not shown & set(ik.CLEAN)
    assert any("1x __hexagon_udivsi3 in a hot loop" in line for line in lines)
    r = cli("inspect", str(libs["v73"]), "--func", "^clean_", "--json")
    assert [f["name"] for f in r.json["libraries"][0]["functions"]] == list(ik.CLEAN)
    assert r.json["gate"]["findings"] == []


def test_package_and_htp_selection(libs, tmp_path, cli):
    pkg = tmp_path / "llama.cpp"
    (pkg / "lib").mkdir(parents=True)
    for v in ("v68", "v73"):
        shutil.copy(libs[v], pkg / "lib" / libs[v].name)
    r = cli("inspect", str(pkg), "--json")
    assert [lib["name"] for lib in r.json["libraries"]] == ["libggml-htp-v68.so", "libggml-htp-v73.so"]
    r = cli("inspect", str(pkg), "--htp", "v73", "--json")
    assert [lib["name"] for lib in r.json["libraries"]] == ["libggml-htp-v73.so"]
    r = cli("inspect", str(pkg), "--htp", "v79")
    assert r.rc == errors.USAGE and "libggml-htp-v79.so" in r.err
    r = cli("inspect", str(tmp_path / "nope"))
    assert r.rc == errors.USAGE and r.err.count("\n") <= 2


def test_strict_fails_on_regression_and_passes_with_baseline(libs, tmp_path, cli):
    lib = str(libs["v73"])
    r = cli("inspect", lib, "--strict")
    assert r.rc == errors.VERIFY_FAILED and ("in a hot loop" in r.err or "in-loop HVX spills" in r.err)
    base = tmp_path / "inspect.json"
    assert cli("inspect", lib, "--write-baseline", str(base)).rc == 0
    doc = json.loads(base.read_text())
    funcs = doc["libraries"]["libggml-htp-v73.so"]
    assert set(funcs) == {"spill_accumulators", "div_in_loop", "half_sum"}  # div_once is not in a loop
    assert funcs["div_in_loop"] == {"helpers_in_hot_loops": {"__hexagon_udivsi3": 1}}
    r = cli("inspect", lib, "--strict", "--baseline", str(base), "--json")
    assert r.rc == 0, r.err
    assert r.json["gate"]["ok"] and r.json["gate"]["regressions"] == 0
    # a baseline from the clean kernels only: everything planted is a regression
    clean = ik.build(tmp_path / "clean" / "libggml-htp-v73.so", "v73", kernels=ik.CLEAN)
    r = cli("inspect", str(clean), "--strict")
    assert r.rc == 0, r.err
    clean_base = tmp_path / "clean.json"
    assert cli("inspect", str(clean), "--write-baseline", str(clean_base)).rc == 0
    r = cli("inspect", lib, "--strict", "--baseline", str(clean_base), "--json")
    assert r.rc == errors.VERIFY_FAILED and r.json["gate"]["regressions"] == 3
    # one more spill than accepted is a regression too
    doc["libraries"]["libggml-htp-v73.so"]["spill_accumulators"]["hvx_spills_in_loop"] -= 1
    base.write_text(json.dumps(doc))
    r = cli("inspect", lib, "--strict", "--baseline", str(base))
    assert r.rc == errors.VERIFY_FAILED and "spill_accumulators" in r.err and "baseline" in r.err
    base.write_text("{}")
    assert cli("inspect", lib, "--strict", "--baseline", str(base)).rc == errors.USAGE


def test_disasm_marks_packets_loops_and_spills(libs, cli):
    r = cli("inspect", str(libs["v73"]), "--disasm", "spill_accumulators")
    assert r.rc == 0, r.err
    assert "LOOP0-START" in r.out and "LOOP0-END" in r.out
    assert "[V-SPILL:STORE:IN-LOOP]" in r.out and "[V-SPILL:LOAD:IN-LOOP]" in r.out
    assert "[V-SPILL:STORE]" in r.out  # frame set-up, outside the loop
    assert r.out.count("{") == r.out.count("}")  # every packet opened is closed
    r = cli("inspect", str(libs["v73"]), "--disasm", "div_in_loop")
    assert "[DIVIDE:__hexagon_udivsi3:HOT-LOOP]" in r.out and "BRANCH-START" in r.out
    r = cli("inspect", str(libs["v73"]), "--disasm", "no_such_function")
    assert r.rc == errors.USAGE


def test_missing_disassembler_is_exit_3(libs, cli, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HEXAGON_SDK_ROOT", raising=False)
    monkeypatch.delenv("HEXAGON_TOOLS_ROOT", raising=False)
    r = cli("inspect", str(libs["v73"]))
    assert r.rc == errors.ENVIRONMENT and "llvm-19" in r.err
    r = cli("inspect", str(libs["v73"]), "--objdump", "/usr/bin/true")
    assert r.rc == errors.ENVIRONMENT


def test_wrapper_named_like_the_sdk_tool_is_found(libs, cli, monkeypatch, tmp_path):
    """The SDK's name on PATH is found by the real search (the only disassembler on PATH, no SDK)."""
    wrapper = tmp_path / "hexagon-llvm-objdump"
    wrapper.write_text(f"#!/bin/sh\nexec {shutil.which('llvm-objdump-19')} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HEXAGON_SDK_ROOT", raising=False)
    monkeypatch.delenv("HEXAGON_TOOLS_ROOT", raising=False)
    r = cli("inspect", str(libs["v73"]), "--json")
    assert r.rc == 0 and r.json["libraries"][0]["disassembler"].startswith("hexagon-llvm-objdump 19")


def test_v79_object_gets_a_known_cpu_and_a_warning(libs, tmp_path, cli):
    """A v79 object (e_flags 0x79; clang 19 cannot build one, so the flags of a v73 library are
    rewritten) is disassembled with the newest version llvm-objdump 19 knows, and says so."""
    data = bytearray(libs["v73"].read_bytes())
    flags = struct.unpack_from("<I", data, 0x24)[0]
    struct.pack_into("<I", data, 0x24, (flags & ~0xFFF) | 0x79)
    lib = tmp_path / "libggml-htp-v79.so"
    lib.write_bytes(bytes(data))
    tool = find_objdump()
    rep = inspect_library(lib, tool)
    assert rep.arch == "v79"
    if tool.version[0] < 20:
        assert rep.flags == ["--mcpu=hexagonv73", "--mattr=+hvxv73,+hvx-length128b"]
        assert any("does not know Hexagon v79" in w for w in rep.warnings)
    assert rep.function("spill_accumulators").hvx_spills.in_loop > 0
    r = cli("inspect", str(lib), "--strict", "--baseline", str(_baseline_for(cli, lib, tmp_path)))
    assert r.rc == (errors.WARNINGS_FATAL if tool.version[0] < 20 else 0)


def _baseline_for(cli, lib, tmp_path):
    out = tmp_path / f"{lib.stem}.json"
    assert cli("inspect", str(lib), "--write-baseline", str(out)).rc == 0
    return out
