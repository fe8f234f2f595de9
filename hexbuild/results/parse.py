"""One log in, one document out: each line goes to the first family of llama.cpp lines that
recognizes it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable

from ..errors import ParseFailed, UsageError
from .backend_ops import BackendOpsLines
from .bench import BenchLines
from .buffers import BufferLines
from .hexagon import HexagonLines
from .lines import clean
from .memory_breakdown import MemoryBreakdownLines
from .perf import PerfLines

SCHEMA = "hexbuild.results/1"


def new_log(source: str) -> dict[str, Any]:
    return {"source": source, "perf": None, "sampler": None, "offload": None, "model_buffers": [],
            "output_buffers": [], "compute_buffers": [], "kv_cache": None, "memory_breakdown": [],
            "devices": [], "hexagon": None, "bench": [], "backend_ops": None}


class LogParser:
    def __init__(self, source: str) -> None:
        self.out = new_log(source)
        self.perf = PerfLines(self.out)
        self.buffers = BufferLines(self.out)
        self.breakdown = MemoryBreakdownLines(self.out)
        self.hexagon = HexagonLines(self.out)
        self.bench = BenchLines(self.out)
        self.backend_ops = BackendOpsLines(self.out)

    @property
    def matched(self) -> int:
        return sum(f.matched for f in (self.perf, self.buffers, self.breakdown, self.hexagon, self.bench,
                                       self.backend_ops))

    def feed(self, raw: str) -> None:
        line = clean(raw)
        # an open llama-bench JSON array takes its lines before anything else can misread them
        if self.bench.json_array_line(line):
            return
        # the cheap substring tests keep the regexes off the lines that cannot match
        if "perf" in line and self.perf.feed(line):
            return
        if "load_tensors:" in line and self.buffers.load_tensors_line(line):
            return
        if "llama_kv_cache" in line and self.buffers.kv_line(line):
            return
        if "buffer size" in line and self.buffers.context_line(line):
            return
        if "memory_breakdown_print:" in line and self.breakdown.feed(line):
            return
        if ("ggml-hex" in line or line.startswith("hexbuild-vnpu: ")) and self.hexagon.feed(line):
            return
        if self.bench.feed(line):
            return
        self.backend_ops.feed(line)

    def finish(self) -> dict[str, Any]:
        self.bench.finish()
        self.buffers.finish()
        return self.out


def parse_text(lines: Iterable[str], source: str) -> dict[str, Any]:
    """Parse one log; raise ParseFailed if nothing in it is recognizable."""
    p = LogParser(source)
    for line in lines:
        p.feed(line)
    out = p.finish()
    if p.matched == 0 and not out["bench"]:
        raise ParseFailed(f"{source}: no llama.cpp output recognized (perf, buffers, llama-bench or "
                          f"test-backend-ops lines)")
    return out


def parse_logs(paths: list[str]) -> dict[str, Any]:
    """Parse each log (``-`` reads stdin) into the documented JSON document."""
    if not paths:
        raise UsageError("no log given (pass files, or - for stdin)")
    logs = []
    for path in paths:
        if path == "-":
            logs.append(parse_text(sys.stdin, "-"))
            continue
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"{path}: no such file")
        with p.open("r", encoding="utf-8", errors="replace", newline="") as f:
            logs.append(parse_text(f, path))
    return {"schema": SCHEMA, "logs": logs}
