"""Disassembling a library and scanning it as the text arrives, in address windows run at once.

The disassembler's output is read from its pipe in large chunks and handed to the scanner
(scan.py) while it writes the rest, so its time and the scanner's overlap on two CPUs. A library
with more code than PARALLEL_MIN_BYTES is cut at function starts into windows (report.py: one per
two CPUs), each
disassembled and scanned in a process of its own (forked: it inherits the ELF metadata); the
.plt section, whose slots name the helpers that calls reach, is disassembled in the parent
meanwhile, and the call sites the windows could not name yet are named from it at the end.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import gc
import os
import subprocess
import tempfile
from pathlib import Path

from ...errors import EnvironmentMissing, UsageError
from ...ui import ui
from .analysis import FunctionReport, helper_kind
from .elfmeta import ElfMeta, plt_names_from
from .objdump import OBJDUMP_TIMEOUT, Objdump
from .scan import Scanner

PARALLEL_MIN_BYTES = 128 << 10  # below this one process is faster than starting workers
CHUNK = 1 << 18
_WORK: dict = {}                 # what forked workers inherit: the library, its metadata


@contextlib.contextmanager
def _gc_paused():
    """The scanner makes a few hundred thousand small tuples and no cycles: the collector's
    passes over them were a fifth of its time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def scan_window(objdump: Objdump, lib: Path, flags: list[str], window: tuple[int, int] | None = None) -> Scanner:
    """The scanner fed with ``objdump -d`` of ``lib`` (or of one [start, stop) window) as it runs."""
    start, stop = window if window is not None else (None, None)
    argv = objdump.argv(lib, flags, start=start, stop=stop)
    ui.command(argv)
    sc = Scanner()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    with tempfile.TemporaryFile() as err:  # a file: a pipe the disassembler fills would stall it
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise EnvironmentMissing(f"cannot run {objdump.name}: {e.strerror or e}") from None
        partial = ""
        try:
            fd = proc.stdout.fileno()
            with contextlib.suppress(OSError, AttributeError):  # fewer, larger hand-overs (Linux)
                import fcntl

                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, CHUNK)
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                lines = (partial + decoder.decode(data)).split("\n")
                partial = lines.pop()
                sc.feed(lines)
            rc = proc.wait(timeout=OBJDUMP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise EnvironmentMissing(f"{objdump.name} did not finish within {OBJDUMP_TIMEOUT:g}s on {lib}") from None
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        sc.feed([partial + decoder.decode(b"", final=True)])
        if rc != 0:
            err.seek(0)
            lines = err.read().decode("utf-8", "replace").strip().splitlines()
            raise UsageError(f"{objdump.name} cannot disassemble {lib}: {lines[-1] if lines else 'exit ' + str(rc)}")
    return sc


def windows(meta: ElfMeta, n: int) -> list[tuple[int, int]]:
    """[start, stop) windows over the code, cut at function starts, about equal in size; empty
    when one process should do it all."""
    code = [(s, e) for s, e, name in meta.exec_ranges if name != ".plt"]
    if n < 2 or len(code) != 1 or code[0][1] - code[0][0] < PARALLEL_MIN_BYTES:
        return []
    lo, hi = code[0]
    starts = sorted({s.addr for s in meta.symbols if lo < s.addr < hi})
    cuts = [lo]
    for k in range(1, n):
        i = bisect.bisect_left(starts, lo + (hi - lo) * k // n)
        if i < len(starts) and starts[i] > cuts[-1]:
            cuts.append(starts[i])
    cuts.append(hi)
    return list(zip(cuts, cuts[1:]))


def reports(objdump: Objdump, lib: Path, flags: list[str], meta: ElfMeta, cuts: list[tuple[int, int]]) -> list[FunctionReport]:
    """Every function's report (outside .plt), in address order: the whole library in this
    process when ``cuts`` is empty, else one forked process per window."""
    if not cuts:
        with _gc_paused():
            sc = scan_window(objdump, lib, flags)
            return sc.finish(meta, plt_names_from(meta, sc.plt_pairs()))
    import concurrent.futures
    import multiprocessing

    _WORK.update(objdump=objdump, lib=lib, flags=flags, meta=meta)
    try:
        ctx = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(len(cuts), mp_context=ctx) as pool:
            parts = [pool.submit(_window, w) for w in cuts]
            plt: dict[int, str] = {}
            if meta.plt:
                start, size = meta.plt
                plt = plt_names_from(meta, scan_window(objdump, lib, flags, (start, start + size)).plt_pairs())
            out = [rep for part in parts for rep in part.result()]
    finally:
        _WORK.clear()
    for rep in out:  # the windows named calls into the PLT by the disassembler's words only
        for c in rep.calls:
            if c.dest in plt:
                c.target = plt[c.dest]
                c.helper = helper_kind(c.target)
    return out


def _window(window: tuple[int, int]) -> list[FunctionReport]:
    w = _WORK
    with _gc_paused():
        return scan_window(w["objdump"], w["lib"], w["flags"], window).finish(w["meta"], {})
