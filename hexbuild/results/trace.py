"""`hexbuild results trace`: profile-op timings and trace-evt events (GGML_HEXAGON_PROFILE=3 in the
0.3.36 tree) as Chrome trace-event JSON, which Perfetto and chrome://tracing open. One process per
session (HTP0, HTP0:1, ...), one thread track for its ops, one for its op batches and one per
hardware thread of trace events. No dependency beyond the standard library.

trace-evt lines (ggml-hexagon.cpp): "ggml-hex: %s trace-evt %s: thread %u info %u %s %u\n"
(session, event, thread, info, start|stop, 32-bit cycle counter). Times: an op batch's start
cycles and MHz place it and the events inside it; ops without start cycles (older trees) are laid
end to end.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ..errors import ParseFailed
from .profile import parse_line

_TRACE = re.compile(r"\b(?:(HTP\d+(?::\d+)?)\s+)?trace-evt\s+([A-Z_0-9\-]+):\s+thread\s+(\d+)\s+info\s+(\d+)\s+"
                    r"(start|stop)\s+(\d+)")
OPS_TID, BATCH_TID, THREAD_TID = 1, 2, 100


class _Clock:
    """A session's 32-bit cycle counter unwrapped and turned into µs from its first batch."""

    def __init__(self) -> None:
        self.base: int | None = None
        self.last: int | None = None
        self.high = 0
        self.mhz = 1000.0
        self.cursor_us = 0.0  # where the next op without start cycles goes

    def unwrap(self, raw: int) -> int:
        if self.last is not None:
            diff = raw - self.last
            if diff < -0x80000000:
                self.high += 0x100000000
            elif diff > 0x80000000:
                self.high -= 0x100000000
        self.last = raw
        return raw + self.high

    def us(self, raw: int) -> float:
        cyc = self.unwrap(raw)
        if self.base is None:
            self.base = cyc
        return (cyc - self.base) / self.mhz


def trace(lines: Iterable[str], *, source: str = "-") -> dict[str, Any]:
    clocks: dict[str, _Clock] = {}
    events: list[dict[str, Any]] = []
    open_evts: dict[tuple, float] = {}
    threads: dict[str, set[int]] = {}

    def clock(dev: str) -> _Clock:
        return clocks.setdefault(dev, _Clock())

    for line in lines:
        if "profile-op" in line:
            r = parse_line(line)
            if r is None:
                continue
            c = clock(r.device)
            if r.mhz:
                c.mhz = r.mhz
            if r.start is not None:
                ts = c.us(r.start)
            else:
                ts = c.cursor_us
            c.cursor_us = max(c.cursor_us, ts + r.usec)
            args = {"dims": r.dims, "types": r.types, "names": r.names, "cycles": r.cycles}
            if r.kparams:
                args["kparams"] = r.kparams
            if r.pmu:
                args["pmu"] = r.pmu
            events.append({"name": r.op, "cat": "batch" if r.op == "OPBATCH" else "op", "ph": "X",
                           "ts": round(ts, 3), "dur": r.usec, "pid": r.device,
                           "tid": BATCH_TID if r.op == "OPBATCH" else OPS_TID, "args": args})
        elif "trace-evt" in line:
            m = _TRACE.search(line)
            if not m:
                continue
            dev = m.group(1) or "HTP0"
            name, thread, info, state, raw = m.group(2), int(m.group(3)), int(m.group(4)), m.group(5), int(m.group(6))
            ts = clock(dev).us(raw)
            threads.setdefault(dev, set()).add(thread)
            key = (dev, thread, name, info)
            if state == "start":
                open_evts[key] = ts
            elif key in open_evts:
                start = open_evts.pop(key)
                events.append({"name": name, "cat": "trace", "ph": "X", "ts": round(start, 3),
                               "dur": round(max(0.0, ts - start), 3), "pid": dev, "tid": THREAD_TID + thread,
                               "args": {"info": info}})
    if not events:
        raise ParseFailed(f"{source}: no profile-op or trace-evt lines (run with --hex-profile 1, or 3 for events)")
    return _document(events, sorted(clocks, key=_device_order), threads)


def _device_order(name: str) -> tuple[int, int]:
    m = re.match(r"HTP(\d+)(?::(\d+))?", name)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (1 << 30, 0)


def _document(events: list[dict[str, Any]], devices: list[str], threads: dict[str, set[int]]) -> dict[str, Any]:
    pids = {d: i + 1 for i, d in enumerate(devices)}
    meta: list[dict[str, Any]] = []
    for dev in devices:
        pid = pids[dev]
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": dev}})
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": OPS_TID, "args": {"name": "ops"}})
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": BATCH_TID, "args": {"name": "op batches"}})
        for t in sorted(threads.get(dev, ())):
            label = "HMX" if t == 10 else f"HVX thread {t}"
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": THREAD_TID + t, "args": {"name": label}})
    for e in events:
        e["pid"] = pids[e["pid"]]
    # Perfetto wants each track's events in time order.
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"]))
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"generator": "hexbuild results trace", "sessions": devices}}
