"""llama-bench output: its markdown table (with the build footer), JSON array and JSONL."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .lines import NUM, LineFamily, finite

# llama-bench markdown printer: "| %*s |" cells, "\nbuild: %s (%d)\n" footer.
_BENCH_BUILD = re.compile(r"^build: (\S+) \((\d+)\)\s*$")
_BENCH_TEST = re.compile(r"^(?:pp(\d+))?(?:\+?tg(\d+))?(?: @ d(\d+))?$")
_SIZE = re.compile(r"^([\d.]+) (KiB|MiB|GiB|TiB)$")
_PARAMS = re.compile(r"^([\d.]+) ([KMBT])$")


class BenchLines(LineFamily):
    """Fills ``bench``: rows accumulate across tables and runs."""

    def __init__(self, out: dict[str, Any]) -> None:
        super().__init__(out)
        self._md_header: list[str] | None = None
        self._md_rows: list[dict[str, Any]] = []
        self._json_lines: list[str] | None = None

    def json_array_line(self, line: str) -> bool:
        """Collect the lines of a JSON array opened by a lone "["; False when the line is not
        part of one, so that the other families read it."""
        if self._json_lines is None:
            return False
        self._json_lines.append(line)
        if line.strip() == "]":
            self._finish_json()
            return True
        if not line or line[0] in " \t{}":
            return True
        # not JSON: the "[" was something else (or stderr interleaved); parse it normally too
        return False

    def feed(self, line: str) -> bool:
        if line.lstrip().startswith("|") and self._markdown_line(line):
            return True
        if self._md_header is not None and not line.lstrip().startswith("|"):
            if self._end_markdown(line):
                return True
        if line.startswith("{") and '"build_commit"' in line and self._jsonl_line(line):
            return True
        if line.strip() == "[":
            self._json_lines = [line]
            return True
        return False

    def finish(self) -> None:
        if self._json_lines is not None:
            self._finish_json()
        if self._md_header is not None:
            self._end_markdown("(end of log)")

    def _markdown_line(self, line: str) -> bool:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if self._md_header is None:
            if "model" in cells and "t/s" in cells and "test" in cells:
                self._md_header = cells
                return self.hit()
            return False
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            return True
        if len(cells) != len(self._md_header):
            return False
        self._md_rows.append(dict(zip(self._md_header, cells)))
        return self.hit()

    def _end_markdown(self, line: str) -> bool:
        """Close the table at its "build: <commit> (<number>)" footer or at any other line."""
        text = line.strip()
        if not text:
            return False  # the blank line before the footer
        m = _BENCH_BUILD.match(text)
        for row in self._md_rows:
            self.out["bench"].append(_bench_from_markdown(row, m[1] if m else None))
        self._md_header, self._md_rows = None, []
        return m is not None

    def _jsonl_line(self, line: str) -> bool:
        try:
            obj = _json_loads(line)
        except ValueError:
            return False
        self.out["bench"].append(_bench_from_json(obj, "jsonl"))
        return self.hit()

    def _finish_json(self) -> None:
        lines, self._json_lines = self._json_lines or [], None
        text = "\n".join(lines)
        try:
            objs = _json_loads(text)
        except ValueError:
            # interleaved stderr: take each "  {" ... "  }" object on its own
            objs, chunk = [], None
            for ln in lines:
                if ln.rstrip() == "  {":
                    chunk = ["{"]
                elif chunk is not None:
                    if ln.rstrip() in ("  }", "  },"):
                        chunk.append("}")
                        try:
                            objs.append(_json_loads("\n".join(chunk)))
                        except ValueError:
                            pass
                        chunk = None
                    elif ln.startswith("    "):
                        chunk.append(ln)
        if not isinstance(objs, list):
            return
        for obj in objs:
            if isinstance(obj, dict) and "avg_ts" in obj:
                self.out["bench"].append(_bench_from_json(obj, "json"))
                self.matched += 1


def _json_loads(text: str) -> Any:
    # llama-bench prints C++ to_string of nan/inf unquoted, which is not JSON
    text = re.sub(r"(?<=[:\[,\s])-?(?:nan|inf)\b", "null", text)
    return json.loads(text)


def _bench_from_json(obj: dict[str, Any], fmt: str) -> dict[str, Any]:
    n_prompt, n_gen, n_depth = int(obj.get("n_prompt") or 0), int(obj.get("n_gen") or 0), int(obj.get("n_depth") or 0)
    known = {"model_type", "model_size", "model_n_params", "backends", "n_prompt", "n_gen", "n_depth",
             "avg_ts", "stddev_ts", "build_commit"}
    return {"format": fmt, "model": obj.get("model_type"), "size_bytes": obj.get("model_size"),
            "params": obj.get("model_n_params"), "backend": obj.get("backends"),
            "test": _test_name(n_prompt, n_gen, n_depth), "n_prompt": n_prompt, "n_gen": n_gen,
            "n_depth": n_depth, "avg_ts": _num(obj.get("avg_ts")), "stddev_ts": _num(obj.get("stddev_ts")),
            "build": obj.get("build_commit"), "fields": {k: v for k, v in obj.items() if k not in known}}


def _num(v: Any) -> float | None:
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def _test_name(n_prompt: int, n_gen: int, n_depth: int) -> str:
    # llama-bench markdown_printer::print_test
    if n_prompt > 0 and n_gen == 0:
        name = f"pp{n_prompt}"
    elif n_gen > 0 and n_prompt == 0:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    return name + (f" @ d{n_depth}" if n_depth > 0 else "")


def _bench_from_markdown(row: dict[str, str], build: str | None) -> dict[str, Any]:
    test = row.get("test", "")
    n_prompt = n_gen = n_depth = 0
    if m := _BENCH_TEST.match(test):
        n_prompt, n_gen, n_depth = int(m[1] or 0), int(m[2] or 0), int(m[3] or 0)
    avg = std = None
    if m := re.match(r"^" + NUM + r" ± " + NUM + r"$", row.get("t/s", "")):
        avg, std = finite(m[1]), finite(m[2])
    size = None
    if m := _SIZE.match(row.get("size", "")):
        size = round(float(m[1]) * 1024 ** ("KiB MiB GiB TiB".split().index(m[2]) + 1))
    params = None
    if m := _PARAMS.match(row.get("params", "")):
        params = round(float(m[1]) * {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m[2]])
    known = {"model", "size", "params", "backend", "test", "t/s"}
    return {"format": "markdown", "model": row.get("model"), "size_bytes": size, "params": params,
            "backend": row.get("backend"), "test": test, "n_prompt": n_prompt, "n_gen": n_gen,
            "n_depth": n_depth, "avg_ts": avg, "stddev_ts": std, "build": build,
            "fields": {k: v for k, v in row.items() if k not in known}}
