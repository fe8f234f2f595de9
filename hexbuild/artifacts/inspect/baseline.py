"""The quality gate: in-loop HVX spills and compiler helpers called inside hot (innermost)
loops, per library and function, against a baseline of accepted ones.

Undecoded instruction words are a finding no baseline accepts: code the disassembler could not
read is code the gate cannot vouch for (``--strict`` fails until a disassembler decodes it all).

The baseline counts findings per function (addresses move with every build; function names do
not), so a CI gate fails on a regression, not on history: a function may keep as many in-loop
spills as the baseline accepts, and fails when it has more or when a new function has any.

    {"schema": 1, "libraries": {"libggml-htp-v73.so": {
        "op_matmul": {"hvx_spills_in_loop": 4, "helpers_in_hot_loops": {"__hexagon_udivsi3": 1}}}}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...paths import atomic_write
from .report import LibraryReport

SCHEMA = 1
SPILLS = "hvx_spills_in_loop"
HELPERS = "helpers_in_hot_loops"
UNDECODED = "undecoded_words"


@dataclass(frozen=True)
class Finding:
    library: str
    function: str
    what: str               # hvx_spills_in_loop | a helper's name (called in a hot loop)
    count: int
    accepted: int = 0       # what the baseline allows

    @property
    def regression(self) -> bool:
        return self.count > self.accepted

    def describe(self) -> str:
        if self.what == UNDECODED:
            return (f"{self.function}: {self.count} instruction words the disassembler did not decode "
                    "(its code is not analysed: use llvm-objdump 21, which knows v68-v79 and their float HVX)")
        what = "in-loop HVX spills" if self.what == SPILLS else f"calls to {self.what} in a hot loop"
        base = f" (baseline {self.accepted})" if self.accepted else ""
        return f"{self.function}: {self.count} {what}{base}"

    def to_json(self) -> dict[str, Any]:
        return {"library": self.library, "function": self.function, "what": self.what, "count": self.count,
                "accepted": self.accepted, "regression": self.regression}


def findings(report: LibraryReport) -> dict[str, dict[str, Any]]:
    """Function → {hvx_spills_in_loop: n, helpers_in_hot_loops: {helper: n}} for the functions
    that have any: the baseline's shape."""
    out: dict[str, dict[str, Any]] = {}
    for f in report.functions:
        entry: dict[str, Any] = {}
        if f.hvx_spills.in_loop:
            entry[SPILLS] = f.hvx_spills.in_loop
        hot = f.hot_helpers()
        if hot:
            entry[HELPERS] = dict(sorted(hot.items()))
        if entry:
            out[f.name] = entry
    return out


def baseline_document(reports: list[LibraryReport]) -> dict[str, Any]:
    return {"schema": SCHEMA, "libraries": {r.name: findings(r) for r in reports}}


def write_baseline(path: Path, reports: list[LibraryReport]) -> None:
    atomic_write(path, json.dumps(baseline_document(reports), indent=2, sort_keys=True) + "\n", mode=0o644)


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"baseline not found: {path}",
                         hint="write one with: hexbuild inspect PKG --write-baseline FILE") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read the baseline {path}: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("libraries"), dict):
        raise UsageError(f"{path} is not an inspect baseline (schema {SCHEMA}, a 'libraries' object)",
                         hint="write one with: hexbuild inspect PKG --write-baseline FILE")
    return data


def compare(report: LibraryReport, baseline: dict[str, Any] | None) -> list[Finding]:
    """Every gate finding of ``report`` with what the baseline accepts for it."""
    accepted = ((baseline or {}).get("libraries") or {}).get(report.name) or {}
    out: list[Finding] = []
    for fn, entry in findings(report).items():
        known = accepted.get(fn) or {}
        if SPILLS in entry:
            out.append(Finding(report.name, fn, SPILLS, entry[SPILLS], int(known.get(SPILLS, 0))))
        for helper, n in entry.get(HELPERS, {}).items():
            out.append(Finding(report.name, fn, helper, n, int((known.get(HELPERS) or {}).get(helper, 0))))
    out += [Finding(report.name, f.name, UNDECODED, f.unknown) for f in report.functions if f.unknown]
    return out
