"""hexbuild inspect on real kernel code: the 0.3.20 tree's HTP op sources built into a v73
library with debug info (tests/inspect_real.py). The findings are the tree's own: in-loop HVX
spills in the quantized dot products, software divides reached through the PLT, source lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hexbuild import errors
from hexbuild.artifacts.inspect import find_objdump, inspect_library
from tests import inspect_real


@pytest.fixture(scope="module")
def real(tree_0_3_20, tmp_path_factory):
    lib = inspect_real.build(tree_0_3_20, tmp_path_factory.mktemp("real") / "libggml-htp-v73.so")
    return lib, inspect_library(lib, find_objdump())


def test_real_kernels(real, tree_0_3_20):
    lib, rep = real
    tot = rep.totals()
    assert tot["functions"] > 50 and tot["hardware_loops"] > 100 and tot["unknown_words"] == 0
    assert rep.warnings == [] and rep.debug_info
    q4 = [f for f in rep.functions if re.match(r"^vec_dot_q4x4x2_q8x4x2", f.name)]
    assert q4 and any(f.hvx_spills.in_loop > 0 for f in q4)  # the Q4_0 kernels spill in their loops
    start, size = rep.meta.plt
    divides = [c for f in rep.functions for c in f.helper_calls if c.helper == "divide"]
    assert divides and all(c.target.startswith("__hexagon_") for c in divides)
    htp = tree_0_3_20 / "ggml" / "src" / "ggml-hexagon" / "htp"
    for c in divides[:20]:  # every call site has a real source line of the tree
        path, line = c.line.rsplit(":", 1)
        src = htp / Path(path).name
        assert src.is_file() and 0 < int(line) <= len(src.read_text().splitlines()), c.line


def test_real_gate_and_addr2line(real, tmp_path, cli):
    lib, rep = real
    r = cli("inspect", str(lib), "--strict")
    assert r.rc == errors.VERIFY_FAILED
    base = tmp_path / "inspect.json"
    assert cli("inspect", str(lib), "--write-baseline", str(base)).rc == 0
    assert json.loads(base.read_text())["libraries"]["libggml-htp-v73.so"]
    assert cli("inspect", str(lib), "--strict", "--baseline", str(base)).rc == 0
    site = next(c for f in rep.functions for c in f.helper_calls if c.helper == "divide")
    r = cli("inspect", str(lib), "--addr2line", hex(site.addr), "--json")
    (a,) = r.json["addresses"]
    assert a["function"] and f"{a['file']}:{a['line']}" == site.line


def test_parallel_windows_give_the_same_report(real, monkeypatch):
    """A large library is cut into one window per CPU; the windows must add up to the whole."""
    from hexbuild.artifacts.inspect import windows

    lib, whole = real
    monkeypatch.setattr(windows, "PARALLEL_MIN_BYTES", 1)
    assert len(windows.windows(whole.meta, 3)) == 3
    split = inspect_library(lib, find_objdump(), workers=3, cache=False)
    assert [f.to_json() for f in split.functions] == [f.to_json() for f in whole.functions]
