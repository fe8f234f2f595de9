"""Buffer lines: load_tensors model buffers and offload, the context's output/compute buffers, the
KV cache, and their sums per device."""

from __future__ import annotations

import re
from typing import Any

from .lines import NUM, LineFamily, finite

# llama-model.cpp load_tensors: "%s: %12s model buffer size = %8.2f MiB\n",
#                               "%s: offloaded %d/%d layers to GPU\n"
_MODEL_BUF = re.compile(r"load_tensors:\s+(\S+) model buffer size\s*=\s*" + NUM + r" MiB")
_OFFLOADED = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")
# llama-context.cpp: "%s: %10s  output buffer size = %8.2f MiB\n", "%s: %10s compute buffer size = %8.2f MiB\n"
# (llama_context: in older trees, sched_reserve: in 0.3.20)
_OUTPUT_BUF = re.compile(r"llama_context:\s+(\S+)\s+output buffer size\s*=\s*" + NUM + r" MiB")
_COMPUTE_BUF = re.compile(r"\w+:\s+(\S+) compute buffer size\s*=\s*" + NUM + r" MiB")
# llama-kv-cache.cpp: "%s: %10s KV buffer size = %8.2f MiB\n",
#   "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB\n"
# llama-kv-cache-iswa.cpp: "%s: creating non-SWA KV cache, size = %u cells\n" / "creating     SWA KV cache"
_KV_BUF = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size\s*=\s*" + NUM + r" MiB")
_KV_SIZE = re.compile(r"llama_kv_cache: size =\s*" + NUM + r" MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\),"
                      r" K \((\w+)\):\s*" + NUM + r" MiB, V \((\w+)\):\s*" + NUM + r" MiB")
_KV_KIND = re.compile(r"llama_kv_cache\w*: creating\s+(.+?) KV cache")


def buffer_device(buffer: str) -> tuple[str, str]:
    """Split a ggml buffer name into (device, kind): ``HTP0-REPACK`` → (HTP0, repack),
    ``CPU_REPACK`` → (CPU, repack), ``CPU_Mapped`` → (CPU, model), ``HTP0:0`` → (HTP0:0, model)."""
    m = re.match(r"^(.+?)[-_](REPACK|AARCH64|Mapped|Host|KLEIDIAI|AMX)$", buffer, re.IGNORECASE)
    if not m:
        return buffer, "model"
    return m.group(1), "repack" if m.group(2).upper() in ("REPACK", "AARCH64", "KLEIDIAI", "AMX") else "model"


class BufferLines(LineFamily):
    """Fills ``offload``, ``model_buffers``, ``output_buffers``, ``compute_buffers``, ``kv_cache``
    and, at the end, ``devices``."""

    def __init__(self, out: dict[str, Any]) -> None:
        super().__init__(out)
        self._model_bufs: dict[str, dict[str, Any]] = {}
        self._pending_kv: list[dict[str, Any]] = []
        self._kv_kind: str | None = None

    def load_tensors_line(self, line: str) -> bool:
        if m := _MODEL_BUF.search(line):
            device, kind = buffer_device(m[1])
            self._model_bufs[m[1]] = {"buffer": m[1], "device": device, "kind": kind, "mib": finite(m[2])}
        elif m := _OFFLOADED.search(line):
            self._model_bufs = {}  # a new model load starts its buffer list afresh
            self.out["offload"] = {"offloaded": int(m[1]), "total": int(m[2])}
        else:
            return False
        return self.hit()

    def kv_line(self, line: str) -> bool:
        if m := _KV_KIND.search(line):
            self._kv_kind = m[1]
        elif m := _KV_BUF.search(line):
            self._pending_kv.append({"buffer": m[1], "mib": finite(m[2])})
        elif m := _KV_SIZE.search(line):
            cache = {"kind": self._kv_kind, "buffers": self._pending_kv, "size_mib": finite(m[1]),
                     "cells": int(m[2]), "layers": int(m[3]), "seqs": int(m[4]), "streams": int(m[5]),
                     "k_type": m[6], "k_mib": finite(m[7]), "v_type": m[8], "v_mib": finite(m[9])}
            kv = self.out["kv_cache"]
            # a cache without an iSWA announcement, or a repeated kind, starts a new context
            if kv is None or cache["kind"] is None or any(c["kind"] == cache["kind"] for c in kv["caches"]):
                kv = self.out["kv_cache"] = {"caches": [], "total_mib": 0.0}
            kv["caches"].append(cache)
            kv["total_mib"] = round(sum(c["size_mib"] or 0.0 for c in kv["caches"]), 2)
            self._pending_kv, self._kv_kind = [], None
        else:
            return False
        return self.hit()

    def context_line(self, line: str) -> bool:
        if m := _COMPUTE_BUF.search(line):
            _replace(self.out["compute_buffers"], m[1], finite(m[2]))
        elif m := _OUTPUT_BUF.search(line):
            _replace(self.out["output_buffers"], m[1], finite(m[2]))
        else:
            return False
        return self.hit()

    def finish(self) -> None:
        self.out["model_buffers"] = list(self._model_bufs.values())
        self.out["devices"] = _devices(self.out)


def _replace(items: list[dict[str, Any]], buffer: str, mib: float | None) -> None:
    for item in items:
        if item["buffer"] == buffer:
            item["mib"] = mib
            return
    items.append({"buffer": buffer, "mib": mib})


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
