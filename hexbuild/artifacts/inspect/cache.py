"""What inspect learnt once and need not learn again, in ``<cache>/inspect/`` (hexbuild's cache
directory, ``$XDG_CACHE_HOME/hexbuild``):

- ``tools.json``: each disassembler's version and the --mcpu/--mattr it takes for an arch, keyed
  by the program's path and its file's identity (size, mtime, inode), so a new LLVM is probed
  again (asking each llvm-objdump on PATH its version and probing the features is a dozen
  processes: a quarter of a cold inspect);
- ``reports/<key>.json``: a library's function reports, keyed by the sha256 of the library, the
  disassembler, its flags and the analysis code itself, so a second ``inspect``, ``verify
  --strict`` or ``release`` of the same skel reads them instead of disassembling. The newest
  REPORTS_KEPT are kept.

A cache entry that cannot be read is a miss: the work is done again and the entry rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from ...paths import atomic_write, cache_root
from .analysis import CallSite, FunctionReport, Loop, Spills

SCHEMA = 2  # 2: reports as lists by position
REPORTS_KEPT = 64


def inspect_dir() -> Path:
    return cache_root() / "inspect"


def file_identity(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


class ToolCache:
    """tools.json, read once per process; ``get``/``put`` by (kind, program path, extra key)."""

    def __init__(self) -> None:
        self._data: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            try:
                data = json.loads((inspect_dir() / "tools.json").read_text())
                self._data = data if isinstance(data, dict) and data.get("schema") == SCHEMA else {}
            except (OSError, ValueError):
                self._data = {}
            self._data.setdefault("schema", SCHEMA)
        return self._data

    def get(self, kind: str, program: str, key: str = "") -> Any:
        entry = self._load().get(kind, {}).get(f"{program}|{key}")
        ident = file_identity(program)
        if not isinstance(entry, dict) or ident is None or entry.get("identity") != ident:
            return None
        return entry.get("value")

    def put(self, kind: str, program: str, value: Any, key: str = "") -> None:
        ident = file_identity(program)
        if ident is None:
            return
        data = self._load()
        data.setdefault(kind, {})[f"{program}|{key}"] = {"identity": ident, "value": value}
        try:
            atomic_write(inspect_dir() / "tools.json", json.dumps(data), mode=0o644)
        except OSError:  # a read-only cache: probing again next time is all it costs
            pass


tools = ToolCache()


@functools.lru_cache(maxsize=1)
def code_id() -> str:
    """The analysis code's own hash: a report made by other code is not this code's report."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in ("scan.py", "analysis.py", "model.py", "elfmeta.py", "windows.py", "cache.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def report_key(lib: Path, disassembler: str, flags: list[str], with_lines: bool) -> str:
    h = hashlib.sha256()
    with open(lib, "rb") as f:
        h.update(hashlib.file_digest(f, "sha256").digest() if hasattr(hashlib, "file_digest")
                 else hashlib.sha256(f.read()).digest())
    h.update(json.dumps([SCHEMA, code_id(), disassembler, flags, with_lines]).encode())
    return h.hexdigest()[:32]


def load_reports(key: str) -> list[FunctionReport] | None:
    path = inspect_dir() / "reports" / f"{key}.json"
    try:
        doc = json.loads(path.read_text())
        out = [_report(d) for d in doc["functions"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.utime(path)  # the newest are kept
    except OSError:
        pass
    return out


def save_reports(key: str, reports: list[FunctionReport]) -> None:
    d = inspect_dir() / "reports"
    doc = {"schema": SCHEMA, "functions": [_plain(r) for r in reports]}
    try:
        atomic_write(d / f"{key}.json", json.dumps(doc, separators=(",", ":")), mode=0o644)
        entries = sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[REPORTS_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:  # a read-only or full cache: the next inspect does the work again
        pass


# Every field of a report, by position (dataclasses.asdict took a third of a cold inspect's
# time on a skel's 150 reports): written and read back in this order.
_LOOP = [f.name for f in fields(Loop)]
_SPILLS = [f.name for f in fields(Spills)]
_CALL = [f.name for f in fields(CallSite)]
_REPORT = [f.name for f in fields(FunctionReport) if f.name != "spill_tags"]  # only --disasm shows them


def _plain(rep: FunctionReport) -> list[Any]:
    out = []
    for name in _REPORT:
        v = getattr(rep, name)
        if name == "loops":
            v = [[getattr(lp, n) for n in _LOOP] for lp in v]
        elif name == "calls":
            v = [[getattr(c, n) for n in _CALL] for c in v]
        elif isinstance(v, Spills):
            v = [getattr(v, n) for n in _SPILLS]
        out.append(v)
    return out


def _report(row: list[Any]) -> FunctionReport:
    d = dict(zip(_REPORT, row, strict=True))
    d["loops"] = [Loop(*lp) for lp in d["loops"]]
    d["hvx_spills"] = Spills(*d["hvx_spills"])
    d["scalar_spills"] = Spills(*d["scalar_spills"])
    d["calls"] = [CallSite(*c) for c in d["calls"]]
    return FunctionReport(**d)
