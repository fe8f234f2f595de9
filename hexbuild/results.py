"""Parse llama.cpp console output into one stable JSON document (`hexbuild results parse`).

Every pattern below follows a printf format string in llama.cpp (cited next to it), matched
anywhere in a line so that log prefixes, timestamps and `adb logcat` decorations don't matter.
ANSI colour codes are stripped first. Lines nothing matches are ignored. A log in which nothing
at all matches is a ParseFailed (exit 9).

JSON schema (``--json``), version ``hexbuild.results/1``. Every key is always present; a section
the log does not contain is ``null`` (objects) or ``[]`` (lists). Sizes are MiB as printed.
Non-finite numbers (llama.cpp prints ``nan``/``inf`` for 0 tokens) become ``null``.
When a log repeats a section (two model loads), the last one wins, except bench rows and
backend-ops cases, which accumulate.

    {"schema": "hexbuild.results/1",
     "logs": [{
       "source": str,                                  # path, or "-" for stdin
       "perf": null | {                                # llama_perf_context_print / common_perf_print
          "load_ms": float|null,
          "prompt_eval": null | {"ms", "tokens", "ms_per_token", "tokens_per_second"},
          "eval":        null | {"ms", "runs", "ms_per_token", "tokens_per_second"},
          "total":       null | {"ms", "tokens"},
          "unaccounted_ms": float|null, "graphs_reused": int|null},
       "sampler": null | {"sampling_ms", "samplers_ms", "runs", "ms_per_token", "tokens_per_second"},
       "offload": null | {"offloaded": int, "total": int},           # "offloaded 25/25 layers to GPU"
       "model_buffers": [{"buffer": "HTP0-REPACK", "device": "HTP0", "kind": "repack"|"model", "mib"}],
       "output_buffers": [{"buffer", "mib"}],
       "compute_buffers": [{"buffer", "mib"}],
       "kv_cache": null | {
          "caches": [{"kind": "non-SWA"|"SWA"|...|null, "buffers": [{"buffer", "mib"}],
                      "size_mib", "cells", "layers", "seqs", "streams",
                      "k_type", "k_mib", "v_type", "v_mib"}],
          "total_mib": float},
       "memory_breakdown": [{"name", "description"|null, "kind": "device"|"host"|"buffer_type",
                             "total", "free", "self", "model", "context", "compute", "unaccounted"}],
                                                       # MiB integers; total/free/unaccounted null
                                                       # for host and buffer-type rows
       "devices": [{"device", "model_mib", "repack_mib", "kv_mib", "compute_mib", "output_mib"}],
                                                       # the buffers above summed per device
       "hexagon": null | {"arch": int|null, "dma64": bool|null,
                          "ndev": int|null,           # as the registry line prints it
                          "sessions": [{"name", "session_id", "domain_id", "uri", "skel"}],
                                                       # every session named; the last four null
                                                       # until its "new session" line
                          "errors": [str]},           # ggml-hex lines that report a failure
       "bench": [{"format": "json"|"jsonl"|"markdown", "model", "size_bytes", "params", "backend",
                  "test", "n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts",
                  "build": str|null, "fields": {...}}], # fields: every other column / key
       "backend_ops": null | {
          "passed": int, "failed": int, "not_supported": int, "skipped": int,   # per-case lines
          "backends": [{"name", "tests_passed", "tests_total", "status": "OK"|"FAIL"|"SKIPPED"|null}],
          "backends_passed": int|null, "backends_total": int|null,
          "failures": [{"backend", "op", "params", "case", "detail"}]}
     }]}

`size_bytes`/`params` from a markdown table are rounded as printed ("1.24 B"); from JSON exact.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from .errors import ParseFailed, UsageError

SCHEMA = "hexbuild.results/1"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NUM = r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan))"

# llama-context.cpp llama_perf_context_print (and common/sampling.cpp common_perf_print):
#   "%s:        load time = %10.2f ms\n"
#   "%s: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n"
#   "%s:        eval time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n"
#   "%s:       total time = %10.2f ms / %5d tokens\n"
#   "%s: unaccounted time = %10.2f ms / %5.1f %%      (total - sampling - prompt eval - eval) / (total)\n"
#   "%s:    graphs reused = %10d\n"
_PERF_FN = r"(?:llama_perf_context_print|common_perf_print):"
_LOAD = re.compile(_PERF_FN + r"\s+load time =\s*" + _NUM + r" ms")
_PROMPT = re.compile(_PERF_FN + r"\s+prompt eval time =\s*" + _NUM + r" ms /\s*(\d+) tokens \(\s*" + _NUM
                     + r" ms per token,\s*" + _NUM + r" tokens per second\)")
_EVAL = re.compile(_PERF_FN + r"\s+eval time =\s*" + _NUM + r" ms /\s*(\d+) runs\s+\(\s*" + _NUM
                   + r" ms per token,\s*" + _NUM + r" tokens per second\)")
_TOTAL = re.compile(_PERF_FN + r"\s+total time =\s*" + _NUM + r" ms /\s*(\d+) tokens")
_UNACC = re.compile(_PERF_FN + r"\s+unaccounted time =\s*" + _NUM + r" ms")
_REUSED = re.compile(_PERF_FN + r"\s+graphs reused =\s*(\d+)")
# llama-sampler.cpp llama_perf_sampler_print: "%s:    samplers time = %10.2f ms / %5d runs\n";
# common_perf_print: "%s:    sampling time = %10.2f ms\n", "%s:    samplers time = %10.2f ms / %5d tokens\n";
# older llama_perf_sampler_print (docs/backend/snapdragon/README.md transcript):
#   "sampling time = 30.08 ms / 487 runs   (    0.06 ms per token, 16191.77 tokens per second)"
_SAMPLING = re.compile(r"(?:llama_perf_sampler_print|common_perf_print):\s+sampling time =\s*" + _NUM
                       + r" ms(?: /\s*(\d+) runs\s+\(\s*" + _NUM + r" ms per token,\s*" + _NUM
                       + r" tokens per second\))?")
_SAMPLERS = re.compile(r"(?:llama_perf_sampler_print|common_perf_print):\s+samplers time =\s*" + _NUM
                       + r" ms /\s*(\d+) (?:runs|tokens)")

# llama-model.cpp load_tensors: "%s: %12s model buffer size = %8.2f MiB\n",
#                               "%s: offloaded %d/%d layers to GPU\n"
_MODEL_BUF = re.compile(r"load_tensors:\s+(\S+) model buffer size\s*=\s*" + _NUM + r" MiB")
_OFFLOADED = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")
# llama-context.cpp: "%s: %10s  output buffer size = %8.2f MiB\n", "%s: %10s compute buffer size = %8.2f MiB\n"
# (llama_context: in older trees, sched_reserve: in 0.3.20)
_OUTPUT_BUF = re.compile(r"llama_context:\s+(\S+)\s+output buffer size\s*=\s*" + _NUM + r" MiB")
_COMPUTE_BUF = re.compile(r"\w+:\s+(\S+) compute buffer size\s*=\s*" + _NUM + r" MiB")
# llama-kv-cache.cpp: "%s: %10s KV buffer size = %8.2f MiB\n",
#   "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB\n"
# llama-kv-cache-iswa.cpp: "%s: creating non-SWA KV cache, size = %u cells\n" / "creating     SWA KV cache"
_KV_BUF = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size\s*=\s*" + _NUM + r" MiB")
_KV_SIZE = re.compile(r"llama_kv_cache: size =\s*" + _NUM + r" MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\),"
                      r" K \((\w+)\):\s*" + _NUM + r" MiB, V \((\w+)\):\s*" + _NUM + r" MiB")
_KV_KIND = re.compile(r"llama_kv_cache\w*: creating\s+(.+?) KV cache")
# llama-context.cpp / common/fit.cpp memory breakdown templates:
#   header "%s: | %s | %s   %s    %s   %s   %s   %s    %s |"
#   device "%s: | %s | %s = %s + (%s = %s + %s + %s) + %s |"
#   other  "%s: | %s | %s   %s    %s = %s + %s + %s    %s |"
_MB_FN = r"_memory_breakdown_print: "
_MB_HEADER = re.compile(_MB_FN + r"\| memory breakdown \[MiB\] \|")
_MB_DEVICE = re.compile(_MB_FN + r"\|\s+- (.+?)\s+\|\s+(\d+) = (\d+) \+ \(\s*(\d+) =\s+(\d+) \+\s+(\d+) \+\s+(\d+)\) \+\s+(-?\d+) \|")
_MB_OTHER = re.compile(_MB_FN + r"\|\s+- (.+?)\s+\|\s+(\d+) =\s+(\d+) \+\s+(\d+) \+\s+(\d+)\s+\|")
# ggml-hexagon.cpp GGML_LOG_INFO lines (0.3.20 and 0.3.36 forms):
#   "ggml-hex: Hexagon backend (experimental) : allocating new registry : ndev %zu\n"
#   "ggml-hex: Hexagon Arch version v%d\n" / "ggml-hex: Hexagon Arch version v%d, DMA64 %s\n"
#   "ggml-hex: new session: %s : session-id %d domain-id %d uri %s handle 0x%lx\n"   (0.3.20)
#   "ggml-hex: %s new session : session-id %d domain-id %d uri %s handle 0x%lx\n"    (0.3.36)
#   "ggml-hex: allocating new session: %s\n"
_HEX_REGISTRY = re.compile(r"ggml-hex: Hexagon backend .*allocating new registry : ndev (\d+)")
_HEX_ARCH = re.compile(r"ggml-hex: Hexagon Arch version v(\d+)(?:, DMA64 (enabled|disabled))?")
_HEX_ALLOC = re.compile(r"ggml-hex: allocating new session: (\S+)")
_HEX_SESSION = re.compile(r"ggml-hex: (?:new session: (\S+) :|(\S+) new session :) session-id (-?\d+) domain-id (-?\d+) uri (\S+)")
_HEX_ERROR = re.compile(r"ggml-hex:.*\b(?:failed|error|exceeds)\b", re.IGNORECASE)
_SKEL = re.compile(r"file:///([^?]+)")
# test-backend-ops.cpp console printer:
#   "  %s(%s): " then "OK" / "FAIL" / "not supported [%s]" (optional "[%s] NMSE = %.9f > %.9f " etc. before);
#   error details go to stderr, so with 2>&1 they can come first: "[MUL_MAT] ERR = 0.96 > 0.0005   MUL_MAT(...): FAIL"
#   "  %zu/%zu tests passed\n", "  Backend %s: OK|FAIL", "Backend %zu/%zu: %s\n", "%zu/%zu backends passed\n"
_OP_CASE = re.compile(r"^(.*?)(?<!\w)([A-Za-z][A-Za-z0-9_]*)\((.*)\): (.*)$")
_OPS_BACKEND = re.compile(r"^Backend (\d+)/(\d+): (\S+)\s*$")
_OPS_PASSED = re.compile(r"^\s*(\d+)/(\d+) tests passed\s*$")
_OPS_STATUS = re.compile(r"^\s*Backend (\S+): (OK|FAIL)\s*$")
_OPS_BACKENDS = re.compile(r"^\s*(\d+)/(\d+) backends passed\s*$")
_OPS_SKIP = re.compile(r"^\s+Skipping\b")  # print_backend_init: "  %s" with the skip reason
# llama-bench markdown printer: "| %*s |" cells, "\nbuild: %s (%d)\n" footer.
_BENCH_BUILD = re.compile(r"^build: (\S+) \((\d+)\)\s*$")
_BENCH_TEST = re.compile(r"^(?:pp(\d+))?(?:\+?tg(\d+))?(?: @ d(\d+))?$")
_SIZE = re.compile(r"^([\d.]+) (KiB|MiB|GiB|TiB)$")
_PARAMS = re.compile(r"^([\d.]+) ([KMBT])$")


def _f(text: str) -> float | None:
    v = float(text)
    return v if math.isfinite(v) else None


def _new_log(source: str) -> dict[str, Any]:
    return {"source": source, "perf": None, "sampler": None, "offload": None, "model_buffers": [],
            "output_buffers": [], "compute_buffers": [], "kv_cache": None, "memory_breakdown": [],
            "devices": [], "hexagon": None, "bench": [], "backend_ops": None}


def buffer_device(buffer: str) -> tuple[str, str]:
    """Split a ggml buffer name into (device, kind): ``HTP0-REPACK`` → (HTP0, repack),
    ``CPU_REPACK`` → (CPU, repack), ``CPU_Mapped`` → (CPU, model), ``HTP0:0`` → (HTP0:0, model)."""
    m = re.match(r"^(.+?)[-_](REPACK|AARCH64|Mapped|Host|KLEIDIAI|AMX)$", buffer, re.IGNORECASE)
    if not m:
        return buffer, "model"
    return m.group(1), "repack" if m.group(2).upper() in ("REPACK", "AARCH64", "KLEIDIAI", "AMX") else "model"


class _LogParser:
    def __init__(self, source: str) -> None:
        self.out = _new_log(source)
        self.matched = 0
        self._model_bufs: dict[str, dict[str, Any]] = {}
        self._pending_kv: list[dict[str, Any]] = []
        self._kv_kind: str | None = None
        self._md_header: list[str] | None = None
        self._md_rows: list[dict[str, Any]] = []
        self._json_lines: list[str] | None = None
        self._ops_backend: str | None = None

    # -- helpers ---------------------------------------------------------------------------
    def _perf(self) -> dict[str, Any]:
        if self.out["perf"] is None:
            self.out["perf"] = {"load_ms": None, "prompt_eval": None, "eval": None, "total": None,
                                "unaccounted_ms": None, "graphs_reused": None}
        return self.out["perf"]

    def _sampler(self) -> dict[str, Any]:
        if self.out["sampler"] is None:
            self.out["sampler"] = {"sampling_ms": None, "samplers_ms": None, "runs": None,
                                   "ms_per_token": None, "tokens_per_second": None}
        return self.out["sampler"]

    def _hex(self) -> dict[str, Any]:
        if self.out["hexagon"] is None:
            self.out["hexagon"] = {"arch": None, "dma64": None, "ndev": None, "sessions": [], "errors": []}
        return self.out["hexagon"]

    def _ops(self) -> dict[str, Any]:
        if self.out["backend_ops"] is None:
            self.out["backend_ops"] = {"passed": 0, "failed": 0, "not_supported": 0, "skipped": 0,
                                       "backends": [], "backends_passed": None, "backends_total": None,
                                       "failures": []}
        return self.out["backend_ops"]

    def _ops_backend_entry(self, name: str) -> dict[str, Any]:
        for b in self._ops()["backends"]:
            if b["name"] == name:
                return b
        entry = {"name": name, "tests_passed": None, "tests_total": None, "status": None}
        self._ops()["backends"].append(entry)
        return entry

    def _hit(self) -> bool:
        self.matched += 1
        return True

    # -- line dispatch -----------------------------------------------------------------------
    def feed(self, raw: str) -> None:
        line = _ANSI.sub("", raw).rstrip("\r\n")
        if self._json_lines is not None:
            self._json_lines.append(line)
            if line.strip() == "]":
                self._finish_bench_json()
                return
            if not line or line[0] in " \t{}":
                return
            # not JSON: the "[" was something else (or stderr interleaved); parse it normally too
        if "perf" in line and self._perf_line(line):
            return
        if "load_tensors:" in line and self._load_tensors_line(line):
            return
        if "llama_kv_cache" in line and self._kv_line(line):
            return
        if "buffer size" in line and self._context_line(line):
            return
        if "memory_breakdown_print:" in line and self._breakdown_line(line):
            return
        if "ggml-hex" in line and self._hex_line(line):
            return
        if line.lstrip().startswith("|") and self._markdown_line(line):
            return
        if self._md_header is not None and not line.lstrip().startswith("|"):
            if self._end_markdown(line):
                return
        if line.startswith("{") and '"build_commit"' in line and self._jsonl_line(line):
            return
        if line.strip() == "[":
            self._json_lines = [line]
            return
        self._ops_line(line)

    def _perf_line(self, line: str) -> bool:
        if m := _PROMPT.search(line):
            self._perf()["prompt_eval"] = {"ms": _f(m[1]), "tokens": int(m[2]), "ms_per_token": _f(m[3]),
                                           "tokens_per_second": _f(m[4])}
        elif m := _EVAL.search(line):
            self._perf()["eval"] = {"ms": _f(m[1]), "runs": int(m[2]), "ms_per_token": _f(m[3]),
                                    "tokens_per_second": _f(m[4])}
        elif m := _TOTAL.search(line):
            self._perf()["total"] = {"ms": _f(m[1]), "tokens": int(m[2])}
        elif m := _LOAD.search(line):
            self._perf()["load_ms"] = _f(m[1])
        elif m := _REUSED.search(line):
            self._perf()["graphs_reused"] = int(m[1])
        elif m := _UNACC.search(line):
            self._perf()["unaccounted_ms"] = _f(m[1])
        elif m := _SAMPLING.search(line):
            s = self._sampler()
            s["sampling_ms"] = _f(m[1])
            if m[2] is not None:
                s["runs"], s["ms_per_token"], s["tokens_per_second"] = int(m[2]), _f(m[3]), _f(m[4])
        elif m := _SAMPLERS.search(line):
            s = self._sampler()
            s["samplers_ms"], s["runs"] = _f(m[1]), int(m[2])
        else:
            return False
        return self._hit()

    def _load_tensors_line(self, line: str) -> bool:
        if m := _MODEL_BUF.search(line):
            device, kind = buffer_device(m[1])
            self._model_bufs[m[1]] = {"buffer": m[1], "device": device, "kind": kind, "mib": _f(m[2])}
        elif m := _OFFLOADED.search(line):
            self._model_bufs = {}  # a new model load starts its buffer list afresh
            self.out["offload"] = {"offloaded": int(m[1]), "total": int(m[2])}
        else:
            return False
        return self._hit()

    def _kv_line(self, line: str) -> bool:
        if m := _KV_KIND.search(line):
            self._kv_kind = m[1]
        elif m := _KV_BUF.search(line):
            self._pending_kv.append({"buffer": m[1], "mib": _f(m[2])})
        elif m := _KV_SIZE.search(line):
            cache = {"kind": self._kv_kind, "buffers": self._pending_kv, "size_mib": _f(m[1]),
                     "cells": int(m[2]), "layers": int(m[3]), "seqs": int(m[4]), "streams": int(m[5]),
                     "k_type": m[6], "k_mib": _f(m[7]), "v_type": m[8], "v_mib": _f(m[9])}
            kv = self.out["kv_cache"]
            # a cache without an iSWA announcement, or a repeated kind, starts a new context
            if kv is None or cache["kind"] is None or any(c["kind"] == cache["kind"] for c in kv["caches"]):
                kv = self.out["kv_cache"] = {"caches": [], "total_mib": 0.0}
            kv["caches"].append(cache)
            kv["total_mib"] = round(sum(c["size_mib"] or 0.0 for c in kv["caches"]), 2)
            self._pending_kv, self._kv_kind = [], None
        else:
            return False
        return self._hit()

    def _context_line(self, line: str) -> bool:
        if m := _COMPUTE_BUF.search(line):
            self._replace(self.out["compute_buffers"], m[1], _f(m[2]))
        elif m := _OUTPUT_BUF.search(line):
            self._replace(self.out["output_buffers"], m[1], _f(m[2]))
        else:
            return False
        return self._hit()

    @staticmethod
    def _replace(items: list[dict[str, Any]], buffer: str, mib: float | None) -> None:
        for item in items:
            if item["buffer"] == buffer:
                item["mib"] = mib
                return
        items.append({"buffer": buffer, "mib": mib})

    def _breakdown_line(self, line: str) -> bool:
        rows = self.out["memory_breakdown"]
        if _MB_HEADER.search(line):
            rows.clear()
        elif m := _MB_DEVICE.search(line):
            name, desc = m[1], None
            if dm := re.match(r"^(\S+) \((.*)\)$", name):
                name, desc = dm[1], dm[2]
            rows.append({"name": name, "description": desc, "kind": "device", "total": int(m[2]),
                         "free": int(m[3]), "self": int(m[4]), "model": int(m[5]), "context": int(m[6]),
                         "compute": int(m[7]), "unaccounted": int(m[8])})
        elif m := _MB_OTHER.search(line):
            rows.append({"name": m[1], "description": None, "kind": "host" if m[1] == "Host" else "buffer_type",
                         "total": None, "free": None, "self": int(m[2]), "model": int(m[3]),
                         "context": int(m[4]), "compute": int(m[5]), "unaccounted": None})
        else:
            return False
        return self._hit()

    def _hex_line(self, line: str) -> bool:
        if m := _HEX_SESSION.search(line):
            name = m[1] or m[2]
            skel = _SKEL.match(m[5])
            sessions = self._hex()["sessions"]
            sessions[:] = [s for s in sessions if s["name"] != name]
            sessions.append({"name": name, "session_id": int(m[3]), "domain_id": int(m[4]), "uri": m[5],
                             "skel": skel[1] if skel else None})
        elif m := _HEX_ARCH.search(line):
            self._hex()["arch"] = int(m[1])
            self._hex()["dma64"] = None if m[2] is None else m[2] == "enabled"
        elif m := _HEX_REGISTRY.search(line):
            self._hex()["ndev"] = int(m[1])
        elif m := _HEX_ALLOC.search(line):
            sessions = self._hex()["sessions"]
            if not any(s["name"] == m[1] for s in sessions):
                sessions.append({"name": m[1], "session_id": None, "domain_id": None, "uri": None, "skel": None})
        elif _HEX_ERROR.search(line):
            self._hex()["errors"].append(line[line.index("ggml-hex"):].strip())
        else:
            return False
        return self._hit()

    # -- llama-bench ---------------------------------------------------------------------------
    def _markdown_line(self, line: str) -> bool:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if self._md_header is None:
            if "model" in cells and "t/s" in cells and "test" in cells:
                self._md_header = cells
                return self._hit()
            return False
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            return True
        if len(cells) != len(self._md_header):
            return False
        self._md_rows.append(dict(zip(self._md_header, cells)))
        return self._hit()

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
        return self._hit()

    def _finish_bench_json(self) -> None:
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

    # -- test-backend-ops ------------------------------------------------------------------------
    def _ops_line(self, line: str) -> None:
        if m := _OP_CASE.match(line):
            op, params, rest = m[2], m[3], m[4].strip()
            ops = None
            if rest == "OK" or rest.endswith(" OK"):
                ops = self._ops()
                ops["passed"] += 1
            elif rest == "FAIL" or rest.endswith(" FAIL"):
                ops = self._ops()
                ops["failed"] += 1
                detail = " ".join(x for x in (m[1].strip(), rest[:-4].strip()) if x) or None
                ops["failures"].append({"backend": self._ops_backend, "op": op, "params": params,
                                        "case": f"{op}({params})", "detail": detail})
            elif rest.startswith("not supported"):
                ops = self._ops()
                ops["not_supported"] += 1
            elif rest.startswith("skipping"):
                ops = self._ops()
                ops["skipped"] += 1
            if ops is not None:
                self.matched += 1
                return
        if m := _OPS_BACKEND.match(line):
            self._ops_backend = m[3]
            self._ops_backend_entry(m[3])
        elif m := _OPS_PASSED.match(line):
            if self._ops_backend is None:
                return
            entry = self._ops_backend_entry(self._ops_backend)
            entry["tests_passed"], entry["tests_total"] = int(m[1]), int(m[2])
        elif m := _OPS_STATUS.match(line):
            self._ops_backend_entry(m[1])["status"] = m[2]
        elif _OPS_SKIP.match(line) and self._ops_backend is not None:
            self._ops_backend_entry(self._ops_backend)["status"] = "SKIPPED"
        elif m := _OPS_BACKENDS.match(line):
            ops = self._ops()
            ops["backends_passed"], ops["backends_total"] = int(m[1]), int(m[2])
        else:
            return
        self.matched += 1

    def finish(self) -> dict[str, Any]:
        if self._json_lines is not None:
            self._finish_bench_json()
        if self._md_header is not None:
            self._end_markdown("(end of log)")
        self.out["model_buffers"] = list(self._model_bufs.values())
        self.out["devices"] = _devices(self.out)
        return self.out


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
    if m := re.match(r"^" + _NUM + r" ± " + _NUM + r"$", row.get("t/s", "")):
        avg, std = _f(m[1]), _f(m[2])
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


def _devices(out: dict[str, Any]) -> list[dict[str, Any]]:
    devs: dict[str, dict[str, Any]] = {}

    def dev(name: str) -> dict[str, Any]:
        return devs.setdefault(name, {"device": name, "model_mib": 0.0, "repack_mib": 0.0, "kv_mib": 0.0,
                                      "compute_mib": 0.0, "output_mib": 0.0})

    for b in out["model_buffers"]:
        dev(b["device"])["repack_mib" if b["kind"] == "repack" else "model_mib"] += b["mib"] or 0.0
    for c in (out["kv_cache"] or {"caches": []})["caches"]:
        for b in c["buffers"]:
            dev(buffer_device(b["buffer"])[0])["kv_mib"] += b["mib"] or 0.0
    for b in out["compute_buffers"]:
        dev(buffer_device(b["buffer"])[0])["compute_mib"] += b["mib"] or 0.0
    for b in out["output_buffers"]:
        dev(buffer_device(b["buffer"])[0])["output_mib"] += b["mib"] or 0.0
    rows = sorted(devs.values(), key=lambda d: _device_order(d["device"]))
    for d in rows:
        for k in ("model_mib", "repack_mib", "kv_mib", "compute_mib", "output_mib"):
            d[k] = round(d[k], 2)
    return rows


def _device_order(name: str) -> tuple[int, str, int]:
    # CPU first, then devices in numeric order (HTP2 before HTP10)
    m = re.match(r"^(\D*)(\d+)", name)
    return (0 if name.upper().startswith("CPU") else 1, m[1] if m else name, int(m[2]) if m else -1)


def parse_text(lines: Iterable[str], source: str) -> dict[str, Any]:
    """Parse one log; raise ParseFailed if nothing in it is recognizable."""
    p = _LogParser(source)
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


def render(data: dict[str, Any]) -> str:
    """A compact view of parsed logs: per log, its sections as rich tables, then failing cases
    one per line, never wrapped (they are what test-backend-ops -o/-p take)."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    for log in data["logs"]:
        parts.append(f"== {log['source']}")
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column("what", style="bold")
        table.add_column("value")
        perf = log["perf"]
        if perf:
            for key, label in (("prompt_eval", "prompt eval"), ("eval", "eval")):
                s = perf[key]
                if s:
                    count = s.get("tokens", s.get("runs"))
                    table.add_row(label, f"{_fmt(s['tokens_per_second'])} t/s  ({count} x {_fmt(s['ms_per_token'])} ms)")
            if perf["total"]:
                table.add_row("total", f"{_fmt(perf['total']['ms'])} ms / {perf['total']['tokens']} tokens")
            if perf["graphs_reused"] is not None:
                table.add_row("graphs reused", str(perf["graphs_reused"]))
        if log["sampler"]:
            s = log["sampler"]
            table.add_row("sampling", f"{_fmt(s['sampling_ms'] if s['sampling_ms'] is not None else s['samplers_ms'])} ms / {s['runs']} runs")
        if log["offload"]:
            table.add_row("offloaded", f"{log['offload']['offloaded']}/{log['offload']['total']} layers")
        hx = log["hexagon"]
        if hx:
            skel = next((s["skel"] for s in hx["sessions"] if s["skel"]), None)
            table.add_row("hexagon", f"v{hx['arch']}  sessions {len(hx['sessions'])}" + (f"  skel {skel}" if skel else ""))
            for err in hx["errors"]:
                table.add_row("", Text(err))
        ops = log["backend_ops"]
        if ops:
            table.add_row("backend-ops", f"{ops['passed']} OK, {ops['failed']} FAIL, {ops['not_supported']} not supported")
            for b in ops["backends"]:
                counts = "" if b["tests_total"] is None else f"{b['tests_passed']}/{b['tests_total']} tests passed "
                table.add_row("", f"{b['name']}: {counts}{b['status'] or ''}")
        parts.append(table)
        if ops:
            # one line each, folded rather than wrapped: the case string is what -o/-p take
            parts += [f"FAIL {f['case']}" for f in ops["failures"][:20]]
            if len(ops["failures"]) > 20:
                parts.append(f"... {len(ops['failures']) - 20} more failures (see --json)")
        if log["devices"]:
            dt = Table(title_justify="left", pad_edge=False)
            for col in ("device", "model MiB", "repack MiB", "KV MiB", "compute MiB"):
                dt.add_column(col, justify="left" if col == "device" else "right")
            for d in log["devices"]:
                dt.add_row(d["device"], _fmt(d["model_mib"]), _fmt(d["repack_mib"]), _fmt(d["kv_mib"]),
                           _fmt(d["compute_mib"]))
            parts.append(dt)
        if log["bench"]:
            bt = Table(pad_edge=False)
            for col in ("model", "backend", "test", "t/s"):
                bt.add_column(col, justify="right" if col == "t/s" else "left")
            for r in log["bench"]:
                bt.add_row(str(r["model"]), str(r["backend"]), r["test"], f"{_fmt(r['avg_ts'])} ± {_fmt(r['stddev_ts'])}")
            parts.append(bt)
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        buf = io.StringIO()
        Console(file=buf, width=120, force_terminal=False, highlight=False).print(part)
        out.append(buf.getvalue().rstrip("\n"))
    return "\n".join(out) + "\n"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"
