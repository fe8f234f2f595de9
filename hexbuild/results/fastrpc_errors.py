"""Decode FastRPC/AEE error codes and ggml-hex failure lines into one line of cause and one of
fix, from the table in hexbuild/data/fastrpc_errors.toml (each entry names its source).

``explain_code(0x80000406)`` and ``explain_line(line)`` are what other commands call (``run``
when a session fails); ``explain_log(text)`` finds the first ggml-hex failure in a log.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from .. import data
from ..errors import UsageError

DSP_AEE_EOFFSET = 0x80000400


@dataclass
class Explanation:
    """What a code or line means for the Hexagon backend. ``checks`` are the names of the
    ``hexbuild doctor --target`` checks that can confirm or rule out the cause."""

    cause: str
    fix: str
    source: str
    code: int | None = None  # as printed (0x80000406), None for lines without one
    name: str | None = None  # AEE_EUNABLETOLOAD
    side: str | None = None  # dsp | cpu: who raised it
    meaning: str | None = None  # the header's own words
    line: str | None = None  # the log line explained
    line_number: int | None = None
    kind: str | None = None  # the [[line]] id that matched
    known: bool = True  # False: only the header's name is known, no backend-specific cause
    checks: list[str] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)  # device checks, with --target

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["code_hex"] = None if self.code is None else f"0x{self.code:x}"
        return out

    def summary(self) -> str:
        """One line: what the code is and why it happened."""
        head = f"0x{self.code:x}" if self.code is not None else (self.kind or "line")
        if self.name:
            head += f" {self.name}"
        return f"{head}: {self.cause}"


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return data.table("fastrpc_errors")


def _names() -> dict[str, tuple[int, str]]:
    return {k: (int(v[0]), str(v[1])) for k, v in _table().get("names", {}).items()}


def parse_code(text: str | int) -> int:
    """0x80000406, 80000406h-less hex with 0x, decimal, negative decimal (as the 32-bit value),
    or an AEE name (AEE_EUNABLETOLOAD, meaning the DSP's code). UsageError otherwise."""
    if isinstance(text, int):
        return text & 0xFFFFFFFF
    s = str(text).strip()
    names = _names()
    key = s.upper()
    if key in names or "AEE_" + key in names:
        name = key if key in names else "AEE_" + key
        value = names[name][0]
        sides = {e.get("side") for e in _table().get("code", []) if e["name"] == name}
        if value >= 0x200 or value in (39, 46, 104) or (sides and sides <= {"cpu"}):
            return value  # codes the header leaves without the offset, or only ever seen bare
        return DSP_AEE_EOFFSET + value
    try:
        if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", s):
            return int(s, 16) & 0xFFFFFFFF
        if re.fullmatch(r"[-+]?\d+", s):
            return int(s, 10) & 0xFFFFFFFF
    except ValueError:
        pass
    raise UsageError(f"not an error code: {s!r}", hint="give a code as printed (0x80000406, 0x72, 46), a name (AEE_EUNABLETOLOAD) or an existing log file")


def _split(code: int) -> tuple[int, str]:
    """(bare AEE code, side) for a 32-bit code as printed."""
    if DSP_AEE_EOFFSET <= code < DSP_AEE_EOFFSET + 0x400:
        return code - DSP_AEE_EOFFSET, "dsp"
    return code, "cpu"


def explain_code(code: str | int) -> Explanation:
    """The backend's reading of ``code``: its specific entry when the table has one, else the
    header's name and meaning with a generic fix."""
    value = parse_code(code)
    bare, side = _split(value)
    entries = [e for e in _table().get("code", []) if int(e["value"]) == bare]
    entry = next((e for e in entries if e.get("side") == side), None) or \
        next((e for e in entries if e.get("side") == "any"), None)
    if entry is not None:
        return Explanation(cause=entry["cause"], fix=entry["fix"], source=entry["source"], code=value,
                           name=entry["name"], side=side, meaning=entry.get("meaning"),
                           checks=list(entry.get("checks", [])))
    by_value = {v[0]: (n, v[1]) for n, v in _names().items()}
    if value == 0xFFFFFFFF:
        return Explanation(cause="an unknown FastRPC failure (AEE_EUNKNOWN, -1): usually no connection to the DSP at all",
                           fix="run hexbuild doctor --target T for the FastRPC runtime and device node",
                           source=_table()["header_source"], code=value, name="AEE_EUNKNOWN", side="cpu",
                           checks=["fastrpc:library", "fastrpc:device-node"], known=False)
    if bare in by_value:
        name, meaning = by_value[bare]
        where = "the DSP" if side == "dsp" else "the host FastRPC library"
        return Explanation(cause=f"{meaning} (raised by {where})",
                           fix="no backend-specific cause is recorded for this code: read the FastRPC lines around it "
                               "(Android: adb logcat -s adsprpc; Linux: journalctl) and run hexbuild doctor --target T",
                           source=_table()["header_source"], code=value, name=name, side=side, meaning=meaning,
                           known=False)
    raise UsageError(f"0x{value:x} is not a FastRPC/AEE error code hexbuild knows",
                     hint="codes look like 0x80000406 (raised on the DSP) or 0x72 (raised on the CPU side)")


_REFS = re.compile(r"^(?P<project>[\w./-]+) (?P<refs>#\d+(?:, #\d+)*)$")


def merge_sources(*sources: str) -> str:
    """The sources of a code and of the line that printed it, each reference named once
    ("llama.cpp #16911" from both is one; "llama.cpp #16911, #22204" after "llama.cpp #22204"
    adds "llama.cpp #16911")."""
    parts: list[str] = []
    seen: set[str] = set()
    for source in sources:
        for part in (p.strip() for p in source.split(";")):
            m = _REFS.match(part)
            if m:
                new = [r for r in m["refs"].split(", ") if f"{m['project']} {r}" not in seen]
                seen.update(f"{m['project']} {r}" for r in new)
                part = f"{m['project']} {', '.join(new)}" if new else ""
            if part and part not in parts:
                parts.append(part)
    return "; ".join(parts)


def explain_line(line: str, number: int | None = None) -> Explanation | None:
    """The explanation of one log line, or None when it is not a failure the table knows."""
    for entry in _table().get("line", []):
        m = re.search(entry["pattern"], line)
        if not m:
            continue
        code = None
        if m.groups() and m.group(1) and m.group(1).lower().startswith("0x"):
            code = m.group(1)
        out = Explanation(cause=entry["cause"], fix=entry["fix"], source=entry["source"], line=line.strip(),
                          line_number=number, kind=entry["id"], checks=list(entry.get("checks", [])))
        if code is not None:
            try:
                by_code = explain_code(code)
            except UsageError:
                return out
            # The code's cause is the more specific one; the line says where it happened.
            out.code, out.name, out.side, out.meaning = by_code.code, by_code.name, by_code.side, by_code.meaning
            if by_code.known:
                out.cause = f"{entry['cause']}: {by_code.cause}"
                out.fix = by_code.fix
                out.source = merge_sources(by_code.source, entry["source"])
                out.checks = list(dict.fromkeys([*by_code.checks, *out.checks]))
            else:
                out.cause = f"{entry['cause']} ({by_code.name}: {by_code.meaning})"
        return out
    return None


def explain_log(lines: Iterable[str]) -> Explanation | None:
    """The first ggml-hex failure in a log. Lines that only point back at an earlier failure
    (GGML_ASSERT(device), failed to create device/session) count only when nothing precedes them."""
    fallback = None
    for i, line in enumerate(lines, 1):
        found = explain_line(line, i)
        if found is None:
            continue
        if found.kind in ("assert-device", "create-session", "query-arch"):
            fallback = fallback or found
            continue
        return found
    return fallback


def related_facts(expl: Explanation, checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The device checks that bear on ``expl``: its own checks first (failed ones before the
    others), then any other failed check."""
    wanted = set(expl.checks)
    mine = [c for c in checks if c["name"] in wanted]
    mine.sort(key=lambda c: c["status"] == "ok")
    others = [c for c in checks if c["name"] not in wanted and c["status"] == "missing"]
    return mine + others
