"""A second opinion: llama.cpp's own scripts/snapdragon/ggml-hexagon-inspect.py (0.3.36 tree) on
the same libraries, its SDK tools stood in for by wrappers around open LLVM (written here into a
temporary PATH directory, passing --mcpu/--mattr for the library's version). The newest open LLVM
installed is used (scripts/setup-test-env.sh installs llvm-objdump-21, which names PLT calls). A
second opinion that cannot run is a failure, never a skip: a comparison that silently does not
happen is no comparison."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild.artifacts.inspect import find_objdump, inspect_library
from tests import inspect_kernels as ik

SCRIPT = Path("scripts/snapdragon/ggml-hexagon-inspect.py")


@pytest.fixture(scope="module")
def upstream(tree_0_3_36, tmp_path_factory):
    script = tree_0_3_36 / SCRIPT
    objdump = next(filter(None, map(shutil.which, ("llvm-objdump-21", "llvm-objdump-19", "llvm-objdump"))), None)
    addr2line = next(filter(None, map(shutil.which, ("llvm-addr2line-21", "llvm-addr2line-19", "llvm-addr2line"))),
                     None)
    if not script.is_file():
        pytest.fail(f"the 0.3.36 tree has no {SCRIPT}: is the cached tree complete? (scripts/setup-test-env.sh)")
    if not objdump or not addr2line:
        pytest.fail("llvm-objdump/llvm-addr2line are not installed: run scripts/setup-test-env.sh")
    bin_dir = tmp_path_factory.mktemp("sdk-bin")
    for name, tool, extra in (("hexagon-llvm-objdump", objdump, "--mcpu=hexagonv73 --mattr=+hvxv73,+hvx-length128b"),
                              ("hexagon-llvm-addr2line", addr2line, "")):
        (bin_dir / name).write_text(f"#!/bin/sh\nexec {tool} {extra} \"$@\"\n")
        (bin_dir / name).chmod(0o755)

    def run(*args: str) -> str:
        env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        cp = subprocess.run([sys.executable, str(script), "--no-docker", "--no-color", *args], env=env,
                            capture_output=True, text=True, timeout=300)
        if cp.returncode != 0:
            pytest.fail(f"the upstream script did not run (exit {cp.returncode}): "
                        f"{(cp.stderr or cp.stdout).strip()[-500:]}", pytrace=False)
        return cp.stdout

    run.objdump = objdump  # type: ignore[attr-defined]
    return run


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return ik.build(tmp_path_factory.mktemp("upstream") / "libggml-htp-v73.so", "v73")


def _rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 5 and cells[0].startswith("0x"):
            rows[cells[1]] = cells
    return rows


def _count(cell: str) -> int:
    return int(cell.split()[0])


def test_spill_counts_agree_with_upstream(upstream, lib):
    theirs = _rows(upstream("--lib", str(lib), "--spills", "--all"))
    ours = inspect_library(lib, find_objdump())
    assert theirs, "the upstream table had no rows"
    assert theirs["spill_accumulators"] and _count(theirs["spill_accumulators"][5]) > 0
    for f in ours.functions:
        row = theirs[f.name]
        # columns: address, function, packets, insns, HVX ops, V-loop, V-tot, S-loop, S-tot, notes
        assert int(row[2]) == f.packets, f.name
        assert int(row[6]) == f.hvx_spills.total, f.name
        assert int(row[8]) == f.scalar_spills.total, f.name
        # upstream counts a spill as in-loop only inside hardware loops (loopN to the next
        # :endloopN): hexbuild's hw_loop_spills is that view, for every function
        assert _count(row[5]) == sum(f.hw_loop_hvx), f.name
        assert _count(row[7]) == sum(f.hw_loop_scalar), f.name
        if not any(lp.kind == "branch" for lp in f.loops):
            assert _count(row[5]) == f.hvx_spills.in_loop, f.name
            assert _count(row[7]) == f.scalar_spills.in_loop, f.name
        else:
            assert f.hvx_spills.in_loop >= _count(row[5]), f.name


def test_divide_counts_agree_with_upstream(upstream, lib):
    text = subprocess.run([upstream.objdump, "-d", str(lib)], capture_output=True, text=True).stdout
    if "@plt>" not in text:
        if find_objdump().version[0] >= 21:
            pytest.fail(f"{Path(upstream.objdump).name} printed no names for PLT calls although LLVM 21 is here")
        pytest.skip(f"{Path(upstream.objdump).name} prints no names for PLT calls on Hexagon (LLVM 21 does; "
                    "scripts/setup-test-env.sh installs llvm-objdump-21); the upstream script finds divides by "
                    "those names only")
    theirs = _rows(upstream("--lib", str(lib), "--swdiv", "--all"))
    ours = inspect_library(lib, find_objdump())
    for f in ours.functions:
        assert int(theirs[f.name][3]) == f.count("divide"), f.name
