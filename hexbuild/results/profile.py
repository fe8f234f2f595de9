"""`hexbuild results profile`: the Hexagon backend's profile-op lines (GGML_HEXAGON_PROFILE) as a
per-op table: op, dims, types, count, total/avg/max µs and cycles, PMU counters, per session.

Line formats (ggml/src/ggml-hexagon/ggml-hexagon.cpp, printed at debug verbosity):
  0.3.20:  "ggml-hex: %s profile-op %s: %s : %s : %s : %s : %s : op-usec %u op-cycles %u op-pkts %u (%f) call-usec %llu"
           (session, op, names, dims, types, strides, buffers)
  0.3.24–0.3.28: "ggml-hex: %s profile-op %s: %s : %s : %s : %s : usec %u cycles %u"
  0.3.32+: "ggml-hex: %s profile-op %s|%s|%s|%s|%s|%s|usec %u cycles %u start %u mhz %.1f[ pmu [%u,…]]"
           (session, op, names, dims, types, strides, kernel params)
           "ggml-hex: %s profile-op OPBATCH|----|n-ops %u|%s|----|----|usec %u cycles %llu start %llu mhz %.1f"
Rows group by (op, dims, types), as the tree's own scripts/snapdragon/ggml-hexagon-profile.py
does (its totals and counts are the oracle in the tests); OPBATCH lines are summarized apart.
The lines are aggregated as they are read: a million-line log is never held in memory.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .. import fidelity
from ..errors import ParseFailed, UsageError
from .dispatch import virtual_npu

SCHEMA = "hexbuild.profile/1"
_DEVICE_NAME = re.compile(r"HTP\d+(?::\d+)?$")
_OP_NAME = re.compile(r"([A-Z_0-9+]+)")
SORT_KEYS = {"tot-usec": "total_usec", "avg-usec": "avg_usec", "max-usec": "max_usec", "count": "count",
             "tot-cycles": "total_cycles", "avg-cycles": "avg_cycles", "max-cycles": "max_cycles"}


@dataclass
class OpRecord:
    """One profile-op line."""

    device: str
    op: str
    names: str
    dims: str
    types: str
    strides: str
    kparams: str | None
    usec: int
    cycles: int
    start: int | None
    mhz: float | None
    pmu: list[int] | None
    text: str  # the line from the op name on (what --filter matches, as upstream's does)


def _timing(text: str) -> tuple[int, int, int | None, float | None, list[int] | None] | None:
    """``[op-]usec U [op-]cycles C [… start S] [mhz M] [pmu [a,b,…]]`` → its numbers."""
    words = text.replace("[", " [ ").replace("]", " ] ").split()
    try:
        i = words.index("usec") if "usec" in words else words.index("op-usec")
        usec = int(words[i + 1])
        if words[i + 2] not in ("cycles", "op-cycles"):
            return None
        cycles = int(words[i + 3])
        start = int(words[words.index("start") + 1]) if "start" in words else None
        mhz = float(words[words.index("mhz") + 1]) if "mhz" in words else None
        pmu = None
        if "pmu" in words:
            j = words.index("pmu")
            pmu = [int(x) for x in "".join(words[j + 2: words.index("]", j)]).split(",") if x]
    except (ValueError, IndexError):
        return None
    return usec, cycles, start, mhz, pmu


def parse_line(line: str) -> OpRecord | None:
    """A profile-op line of either format, or None."""
    idx = line.find("profile-op ")
    if idx < 0:
        return None
    text = line[idx + len("profile-op "):].rstrip("\r\n")
    before = line[max(0, idx - 40):idx].split()
    device = before[-1] if before and _DEVICE_NAME.match(before[-1]) else "HTP0"
    if "|" in text:
        parts = text.split("|")
        if len(parts) == 7:
            kparams = parts[5].strip()
        elif len(parts) == 6:
            kparams = None
        else:
            return None
        names, dims, types, strides, timing = parts[1], parts[2], parts[3], parts[4], parts[-1]
        op_m = _OP_NAME.match(parts[0])
    else:
        op_text, sep, rest = text.partition(": ")
        fields = rest.split(" : ") if sep else []
        if len(fields) < 5:
            return None
        names, dims, types, strides, timing = fields[0], fields[1], fields[2], fields[3], fields[-1]
        kparams = None
        op_m = _OP_NAME.fullmatch(op_text.strip())
    t = _timing(timing)
    if not op_m or t is None:
        return None
    return OpRecord(device, op_m.group(1), names.strip(), dims.strip(), types.strip(), strides.strip(), kparams,
                    *t, text)


def records(lines: Iterable[str]) -> Iterator[OpRecord]:
    for line in lines:
        if "profile-op" in line:
            rec = parse_line(line)
            if rec is not None:
                yield rec


@dataclass
class _Group:
    op: str
    dims: str
    types: str
    count: int = 0
    total_usec: int = 0
    max_usec: int = 0
    total_cycles: int = 0
    max_cycles: int = 0
    pmu_sum: list[int] | None = None
    pmu_n: int = 0
    sessions: dict[str, list[int]] = field(default_factory=dict)  # device -> [count, usec]

    def add(self, r: OpRecord) -> None:
        self.count += 1
        self.total_usec += r.usec
        self.total_cycles += r.cycles
        if r.usec > self.max_usec:
            self.max_usec = r.usec
        if r.cycles > self.max_cycles:
            self.max_cycles = r.cycles
        if r.pmu:
            if self.pmu_sum is None:
                self.pmu_sum = [0] * len(r.pmu)
            for i, v in enumerate(r.pmu[: len(self.pmu_sum)]):
                self.pmu_sum[i] += v
            self.pmu_n += 1
        s = self.sessions.setdefault(r.device, [0, 0])
        s[0] += 1
        s[1] += r.usec

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dims": self.dims, "types": self.types, "count": self.count,
                "total_usec": self.total_usec, "avg_usec": round(self.total_usec / self.count, 2),
                "max_usec": self.max_usec, "total_cycles": self.total_cycles,
                "avg_cycles": round(self.total_cycles / self.count, 2), "max_cycles": self.max_cycles,
                "pmu_avg": [round(v / self.pmu_n, 2) for v in self.pmu_sum] if self.pmu_sum else None,
                "sessions": {d: {"count": c, "total_usec": u} for d, (c, u) in sorted(self.sessions.items())}}


def device_matches(device: str, wanted: str) -> bool:
    """``--device HTP0`` takes HTP0 and its virtual sessions (HTP0:1); a list is comma-separated."""
    return any(device == w or device.startswith(w + ":") for w in (x.strip() for x in wanted.split(",")) if w)


def profile(lines: Iterable[str], *, source: str = "-", device: str | None = None, op_filter: str | None = None,
            top: int | None = None, sort: str = "tot-usec") -> dict[str, Any]:
    if sort not in SORT_KEYS:
        raise UsageError(f"--sort {sort}: valid: {', '.join(SORT_KEYS)}")
    try:
        rx = re.compile(op_filter) if op_filter else None
    except re.error as e:
        raise UsageError(f"--filter {op_filter!r} is not a regular expression: {e}") from None
    groups: dict[tuple[str, str, str], _Group] = {}
    batches: dict[str, list[int]] = {}  # device -> [count, usec, ops]
    seen = 0
    emulated: list[str] = []  # the HTP version the virtual NPU (qemu+npu:) said it emulates

    def watched(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            if not emulated and line.lstrip().startswith("hexbuild-vnpu:") and (htp := virtual_npu(line)):
                emulated.append(htp)
            yield line

    for r in records(watched(lines)):
        seen += 1
        if device and not device_matches(r.device, device):
            continue
        if rx is not None and not rx.search(r.text):
            continue
        if r.op == "OPBATCH":
            b = batches.setdefault(r.device, [0, 0, 0])
            b[0] += 1
            b[1] += r.usec
            m = re.search(r"n-ops (\d+)", r.dims)
            b[2] += int(m.group(1)) if m else 0
            continue
        key = (r.op, r.dims, r.types)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(*key)
        g.add(r)
    if not seen:
        raise ParseFailed(f"{source}: no profile-op lines (run with --hex-profile 1, which also turns on -v)")
    rows = sorted((g.to_json() for g in groups.values()), key=lambda x: x[SORT_KEYS[sort]], reverse=True)
    sessions: dict[str, dict[str, int]] = {}
    for row in rows:
        for d, s in row["sessions"].items():
            agg = sessions.setdefault(d, {"ops": 0, "total_usec": 0})
            agg["ops"] += s["count"]
            agg["total_usec"] += s["total_usec"]
    return {"schema": SCHEMA, "source": source, "ops": rows[:top] if top else rows, "op_groups": len(rows),
            "total_usec": sum(r["total_usec"] for r in rows), "sessions": dict(sorted(sessions.items())),
            "batches": {d: {"count": c, "total_usec": u, "ops": n} for d, (c, u, n) in sorted(batches.items())},
            # the emulator's wall time and cycle counts, not a phone's (hexbuild/fidelity.py)
            **(fidelity.fields(emulated[0]) if emulated else {})}


def read(path: str, **kw: Any) -> dict[str, Any]:
    """The profile of the log at ``path`` (- : stdin); a log of the virtual NPU is said to be one."""
    if path == "-":
        import sys

        doc = profile(sys.stdin, source="-", **kw)
    else:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"{path}: no such file")
        with p.open("r", encoding="utf-8", errors="replace") as f:
            doc = profile(f, source=path, **kw)
    fidelity.say(path, fidelity.carried(doc))
    return doc


COLUMNS = ("op", "dims", "types", "count", "total_usec", "avg_usec", "max_usec", "total_cycles", "avg_cycles",
           "max_cycles")


def markdown(doc: dict[str, Any]) -> str:
    pmu = any(r["pmu_avg"] for r in doc["ops"])
    head = list(COLUMNS) + (["pmu_avg"] if pmu else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if h not in ("op", "dims", "types") else "---"
                                                        for h in head) + "|"]
    for r in doc["ops"]:
        cells = [str(r[c]) for c in COLUMNS] + ([",".join(map(str, r["pmu_avg"] or []))] if pmu else [])
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    sess = ", ".join(f"{d}: {s['ops']} ops, {s['total_usec']} µs" for d, s in doc["sessions"].items())
    text = "\n".join(lines) + f"\n\n{doc['op_groups']} op groups, {doc['total_usec']} µs in ops ({sess})\n"
    if doc.get("emulated"):
        cycles = any(r.get("total_cycles") for r in doc["ops"])
        text += (f"Emulated NPU, {doc.get('npu_model')}: the µs are the emulator's wall time, "
                 + ("the cycles its count, " if cycles else "cycles are not modelled (0), ") + "not a phone's.\n")
    return text


def csv_text(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(COLUMNS) + ["pmu_avg", "sessions"])
    for r in doc["ops"]:
        w.writerow([r[c] for c in COLUMNS] + [" ".join(map(str, r["pmu_avg"] or [])),
                                              " ".join(f"{d}={s['total_usec']}" for d, s in r["sessions"].items())])
    return buf.getvalue()


def chart_png(doc: dict[str, Any], *, bars: int = 20) -> bytes:
    """Horizontal bars of total µs per op group (the top ``bars``); matplotlib is loaded only here."""
    from .chart import png, pyplot

    plt = pyplot()
    rows = doc["ops"][:bars][::-1]
    labels = [f"{r['op']} {r['dims'][:40]} {r['types'][:24]}" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(rows) + 1.2))
    ax.barh(range(len(rows)), [r["total_usec"] for r in rows], color="#3b7dd8")
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xlabel("total µs")
    ax.set_title(f"{Path(doc['source']).name}: time per op group (top {len(rows)})", fontsize=9)
    fig.tight_layout()
    return png(fig)
