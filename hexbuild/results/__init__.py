"""Parse llama.cpp console output into one stable JSON document (`hexbuild results parse`).

Every pattern in this package follows a printf format string in llama.cpp (cited next to it), matched
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
                          "sessions": [{"name", "status": "listed"|"allocating"|"opened"|"failed",
                                        "phys", "virt", "domain", "peers": [str],   # device lines
                                        "session_id", "domain_id", "uri", "skel",  # "new session"
                                        "error": str|null, "code": int|null}],      # failure line
                          "errors": [str]},           # ggml-hex lines that report a failure
                                                       # (dispatch.py: patterns and the verdict)
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

One module per family of lines: perf.py (timings), buffers.py (model/output/compute/KV buffers and
the per-device sums), memory_breakdown.py, hexagon.py (ggml-hex), bench.py (llama-bench),
backend_ops.py (test-backend-ops); lines.py holds what they share, parse.py sends each line to
them, render.py draws the human view.
"""

from .buffers import buffer_device
from .parse import SCHEMA, parse_logs, parse_text
from .render import render

__all__ = ["SCHEMA", "buffer_device", "parse_logs", "parse_text", "render"]
