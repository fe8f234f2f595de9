"""inspect's one pass (scan.py, windows.py) against the model and analysis.py it replaced, field
by field, on genuine libraries: the planted kernels for v68/v69/v73 (with and without debug
info), the 0.3.20 tree's real HTP code, and odd disassembler text; and its caches: the
disassembler's probes and the reports keyed by the library's hash."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat

import pytest

from hexbuild.artifacts.inspect import find_objdump, inspect_library
from hexbuild.artifacts.inspect import cache as insp_cache
from hexbuild.artifacts.inspect.analysis import analyze
from hexbuild.artifacts.inspect.model import parse
from hexbuild.artifacts.inspect.objdump import Objdump
from hexbuild.artifacts.inspect.scan import Scanner
from tests import inspect_kernels as ik
from tests import inspect_real
from tests.inspect_reference import fields, reference_reports


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    insp_cache.tools._data = None  # tools.json is read once per process
    yield tmp_path / "xdg" / "hexbuild" / "inspect"
    insp_cache.tools._data = None


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scan")
    out = {v: ik.build(root / v / f"libggml-htp-{v}.so", v) for v in ("v68", "v69", "v73")}
    out["v73-g"] = ik.build(root / "g" / "libggml-htp-v73.so", "v73", debug=True)
    return out


@pytest.mark.parametrize("which", ["v68", "v69", "v73", "v73-g"])
def test_scanner_reports_what_the_model_reported(libs, which):
    tool = find_objdump()
    ours = inspect_library(libs[which], tool, cache=False)
    assert fields(ours.functions) == fields(reference_reports(libs[which], tool))
    assert ours.function("div_in_loop").helper_calls  # a PLT call named, so there is something to agree on


def test_scanner_on_real_kernels_whole_and_in_windows(tree_0_3_20, tmp_path, monkeypatch):
    """The 0.3.20 tree's HTP op sources (0.8 MB of real HVX code, -g): one process, and three
    windows whose calls into the PLT are named afterwards."""
    from hexbuild.artifacts.inspect import windows

    lib = inspect_real.build(tree_0_3_20, tmp_path / "libggml-htp-v73.so")
    tool = find_objdump()
    want = fields(reference_reports(lib, tool))
    assert fields(inspect_library(lib, tool, cache=False, workers=1).functions) == want
    monkeypatch.setattr(windows, "PARALLEL_MIN_BYTES", 1)
    split = inspect_library(lib, tool, cache=False, workers=3)
    assert len(windows.windows(split.meta, 3)) == 3
    assert fields(split.functions) == want
    assert sum(c.helper == "divide" for f in split.functions for c in f.calls) > 0


ODD = """
Disassembly of section .text:

00001000 <first>:
    1000: { 	r19 = add(r29,#0x40)
    1004:   	r0 = #0x0 }
    1008: { 	vmem(r19+#0x0) = v1 }
    100c: { 	r19:18 = combine(r0,r1)
    1010:   	loop0(0x1018,#0x4) }
    1014: { 	r20 = add(r29,#0x10)
Disassembly of section .text.more:
    1018: { 	memw(r19+#0x0) = r0; 	vhist }  :endloop0
    101a: { 	memw(r20+#0x4) = r0 }
    101c: { 	if (p0) jump:nt 0x1018 <first+0x18> }
    1020: { 	call 0x2000 <second>; 	r1 = memw(r29+#0x8) }
    1024:   	<unknown>

00002000 <second>:
00002000 <second_alias>:
    2000:   	<unknown>
    2004: { 	r30 = r29
    2008:   	p3 = sp1loop0(0x200c,#0x2) }
    200c: { 	v0 = vmem(r30+#-0x1); 	immext(#0x40) }  :endloop0
    2010:   	r2 = add(r30,#0x8)
    2014: { 	memw(r2+#0x0) = r0 }
    2018: { 	jumpr r31 }
    201c:   	<unknown>
"""


def test_scanner_on_odd_text_chunked_anyhow():
    """Packets that never close, a section change inside a packet, aliases, undecoded words
    inside and after code, duplex words: the model's rules, whatever the chunking."""
    lines = ODD.splitlines()
    fns = parse(ODD)
    want = fields([analyze(f, None, {}) for f in fns if f.section != ".plt"])
    for step in (1, 3, len(lines)):
        sc = Scanner()
        for i in range(0, len(lines), step):
            sc.feed(lines[i:i + step])
        assert fields(sc.finish(None, {})) == want, step
    assert [(r["name"], r["unknown"]) for r in want] == [("first", 0), (".text.more", 0), ("second", 1)]


def test_a_second_inspect_reads_the_cached_report(libs, tmp_path, own_cache):
    """The second inspect of a library runs no disassembler; another library, a changed one or
    a damaged entry does; lines from DWARF are cached with the report they belong to."""
    real = find_objdump()
    log = tmp_path / "objdump.log"
    wrapper = tmp_path / "llvm-objdump"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {real.path} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    tool = Objdump(str(wrapper), real.version)
    lib = tmp_path / "libggml-htp-v73.so"
    shutil.copy(libs["v73-g"], lib)

    def runs() -> int:
        return sum(" -d " in f" {line} " and "--start-address" not in line for line in log.read_text().splitlines()) \
            if log.exists() else 0

    first = inspect_library(lib, tool)
    assert runs() == 1 and any(c.line for f in first.functions for c in f.calls)
    (entry,) = (own_cache / "reports").iterdir()
    again = inspect_library(lib, tool)
    assert runs() == 1 and fields(again.functions) == fields(first.functions)
    div = inspect_library(lib, tool, func=re.compile("^div_"))
    assert runs() == 1 and fields(div.functions) == fields([f for f in first.functions if f.name.startswith("div_")])
    no_lines = inspect_library(lib, tool, with_lines=False)  # the gate's: a report of its own
    assert runs() == 2 and not any(c.line for f in no_lines.functions for c in f.calls)

    entry.write_text("{damaged")
    assert fields(inspect_library(lib, tool).functions) == fields(first.functions) and runs() == 3
    assert json.loads(entry.read_text())["schema"] == insp_cache.SCHEMA  # written again

    lib.write_bytes(lib.read_bytes() + b"\0")  # another file: another sha256
    inspect_library(lib, tool)
    assert runs() == 4


def test_probes_are_asked_once_per_disassembler_file(libs, tmp_path):
    """--version and the --mcpu/--mattr probes run once; a new file at the same path is asked again."""
    from hexbuild.artifacts.inspect import objdump as od

    real = find_objdump()
    log = tmp_path / "calls.log"
    wrapper = tmp_path / "llvm-objdump-99"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {real.path} \"$@\"\n")
    wrapper.chmod(0o755)
    for fn in (od._version, od._accepts):
        fn.cache_clear()
    tool = find_objdump(str(wrapper))
    flags, _ = tool.flags("v73", libs["v73"])
    asked = len(log.read_text().splitlines())
    assert asked >= 3 and flags[0] == "--mcpu=hexagonv73"
    for fn in (od._version, od._accepts):
        fn.cache_clear()
    insp_cache.tools._data = None  # another process: only the file remembers
    assert find_objdump(str(wrapper)).flags("v73", libs["v73"]) == (flags, None)
    assert len(log.read_text().splitlines()) == asked
    wrapper.write_text(wrapper.read_text() + "\n")  # the program changed
    os.utime(wrapper, ns=(0, wrapper.stat().st_mtime_ns + 10**9))
    for fn in (od._version, od._accepts):
        fn.cache_clear()
    assert find_objdump(str(wrapper)).flags("v73", libs["v73"])[0] == flags
    assert len(log.read_text().splitlines()) > asked
