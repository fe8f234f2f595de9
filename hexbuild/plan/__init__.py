"""Plan how a GGUF model splits across Hexagon (HTP) sessions (`hexbuild plan`).

An HTP session maps a limited amount of memory (about 3.5 GiB, docs/backend/snapdragon/
developer.md), so big models run on several sessions (GGML_HEXAGON_NDEV=N or, in the 0.3.36 tree,
GGML_HEXAGON_DEVICES: devices HTP0..N-1, or named ones such as the virtual sessions HTP0:1)
with llama.cpp's layer split. This module reads the GGUF tensor table (the header only, over an
mmap; tensor data is never touched), sums the bytes of each layer, picks the smallest
session count whose best split fits the budget, and finds `--tensor-split` ratios that make
llama.cpp produce exactly that split.

How llama.cpp places layers (src/llama-model.cpp, load_tensors, 0.3.20 and 0.3.36 alike):
* the split ratios (``--tensor-split``, else each device's free memory: the same for every HTP
  session, so equal ratios) are summed into cumulative split points and normalized (float32);
* layer ``il`` (the output layer is ``il = n_layer``) goes to the first device whose split point
  is greater than ``il / (n_layer + 1)`` (std::upper_bound), with all layers offloaded (-ngl);
* the input layer (token_embd, pos_embd, token_types, per_layer_token_embd) always stays on the
  CPU; output, output_norm, cls* and other non-``blk.N`` tensors are the output layer; the
  repeating tensors without a layer number (token_embd_norm, rope_freqs, rope_factors_*) are
  created for layer 0.

Which bytes count against a session follows the revision's rules (hexbuild/plan_rules.py,
read from its ggml-hexagon.cpp: a checkout, a package's or a deployed target's manifest):
weights of the types the backend repacks go to the session's REPACK buffer; up to the 0.3.28
tree its matmul refuses weights with more than 16384 rows ("typically the lm-head"), which
therefore stay on the CPU, as the gpt-oss-20b log in developer.md shows. Other tensors (norms,
biases, F16/F32 and types that revision does not repack) are recorded as ``other_bytes``: small,
in the session's plain buffer or on the CPU. Only the repacked bytes are balanced and checked
against the budget. K-quant weights count at their GGUF size (the 0.3.36 tiles are slightly
larger: uncompressed scales).

JSON (``--json``):

    {"model": str, "arch": str, "n_layer": int, "vmem": int, "max_ndev": int,
     "ndev": int, "per_session_bytes": [int], "per_session_other_bytes": [int],
     "balance": float,                       # max / mean of per_session_bytes
     "tensor_split": [int] | null,           # null when it cannot be passed (16 sessions)
     "devices": [str],                       # the sessions' device names (HTP0, HTP0:1, ...)
     "env": {"GGML_HEXAGON_NDEV" | "GGML_HEXAGON_DEVICES": str},   # in the revision's vocabulary
     "args": [str], "bench_args": [str], "command": str,
     "layers": [{"index", "name", "htp_bytes", "other_bytes", "cpu_bytes", "tensors"}],  # n_layer + 1
     "cpu": {"input_bytes", "input_tensors", "row_limited_bytes"},   # bytes that stay on the CPU
     "assignment": [int],                    # session of each layer, as llama.cpp will place it
     "sessions": [{"device", "first_layer", "last_layer", "n_layers", "htp_bytes", "other_bytes"}],
     "default_split": {"tensor_split": [1, ...], "assignment": [int], "per_session_bytes": [int],
                       "balance": float, "fits": bool},
     "rules": {"revision": str | null, "repack_types": [str], "row_limit": int,   # 0: no limit
               "vmem": {"env", "unit", "default_bytes"} | null,   # the revision's GGML_HEXAGON_VMEM
               "device_selection": {"ndev_var", "devices_var"} | null,   # the variables it reads
               "origin": "source" | "package" | "target" | "assumed"},
     "notes": [str]}
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .gguf_layout import Layer, ModelLayout, read_gguf_header, read_model
from .render import mib, render
from ..plan_rules import ASSUMED, NEWEST_KNOWN, PlanRules
from .split import balance, bytes_per_session, llama_assign, min_max_cap, ratios_for, split_ends

__all__ = ["DEFAULT_MAX_NDEV", "DEFAULT_VMEM", "LLAMA_MAX_DEVICES", "Layer", "ModelLayout", "balance", "llama_assign",
           "make_plan", "min_max_cap", "parse_size", "plan_model", "ratios_for", "read_gguf_header", "read_model",
           "render", "split_ends"]

LLAMA_MAX_DEVICES = 16  # llama_max_devices(); common's --tensor-split takes fewer values than this
DEFAULT_VMEM = int(3.5 * 1024 ** 3)
DEFAULT_MAX_NDEV = 16

_UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1024 ** 2, "mib": 1024 ** 2, "g": 1024 ** 3,
          "gib": 1024 ** 3, "t": 1024 ** 4, "tib": 1024 ** 4, "kb": 1000, "mb": 1000 ** 2,
          "gb": 1000 ** 3, "tb": 1000 ** 4}


def parse_size(text: str) -> int:
    """``3.5GiB``, ``3584MiB``, ``3758096384`` → bytes (KiB/MiB/GiB and K/M/G are binary,
    KB/MB/GB decimal)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m[2].lower() not in _UNITS:
        raise UsageError(f"bad size {text!r}", hint="use bytes or a unit: 3.5GiB, 3584MiB, 3758096384")
    value = int(float(m[1]) * _UNITS[m[2].lower()])
    if value <= 0:
        raise UsageError(f"bad size {text!r}: must be positive")
    return value


def make_plan(layout: ModelLayout, *, vmem: int = DEFAULT_VMEM, max_ndev: int = DEFAULT_MAX_NDEV,
              ndev: int | None = None, devices: str | None = None, program: str = "llama-cli") -> dict[str, Any]:
    """``devices`` (--devices HTP0:0,HTP0:1) names the sessions, and so fixes their number."""
    if not 1 <= max_ndev <= LLAMA_MAX_DEVICES:
        raise UsageError(f"--max-ndev must be between 1 and {LLAMA_MAX_DEVICES}")
    if ndev is not None and devices is not None:
        raise UsageError("give --ndev or --devices, not both")
    named = _named_sessions(layout.rules, None, devices) if devices is not None else None
    if named is not None:
        ndev = named.count
    weights = [layer.htp_bytes for layer in layout.layers]
    n_items = len(weights)
    total = sum(weights)
    if total == 0:
        raise UsageError(f"{layout.path}: no tensors of a type the HTP repacks "
                         f"({', '.join(layout.rules.repack_types)}): nothing to place on the NPU")
    notes = list(layout.notes)
    if layout.rules.origin == "assumed":
        notes.append(f"no revision given: used the rules of the newest revision hexbuild knows, {NEWEST_KNOWN} "
                     f"(repacks {' '.join(layout.rules.repack_types)}; no row limit; sessions of "
                     f"{mib(int((layout.rules.vmem or {}).get('default_bytes') or DEFAULT_VMEM))} named by "
                     f"{(layout.rules.device_selection or {}).get('devices_var') or 'GGML_HEXAGON_NDEV'}); "
                     "pass --source, --package or --target for your revision's")

    def best(k: int) -> tuple[list[int], list[int] | None]:
        """(assignment, tensor_split) of the best split llama.cpp can be told to make."""
        if k == 1:
            return [0] * n_items, [1]
        if k >= LLAMA_MAX_DEVICES:  # common's --tensor-split rejects this many values
            return llama_assign([1] * k, layout.n_layer), None
        ends = split_ends(weights, k, min_max_cap(weights, k))
        ratios = ratios_for(ends, n_items)
        return llama_assign(ratios, layout.n_layer), ratios

    limit = min(max_ndev, n_items)
    if named is not None:  # the names fix the count, whatever --max-ndev says
        if named.count > n_items:
            raise UsageError(f"--devices {devices}: {named.count} sessions for {n_items} layers (one layer at least each)")
        limit = named.count
    candidates = [ndev] if ndev else range(1, limit + 1)
    if ndev and not 1 <= ndev <= limit:
        raise UsageError(f"--ndev {ndev}: must be between 1 and {limit} (layers: {n_items}, --max-ndev {max_ndev})")
    chosen = None
    for k in candidates:
        assignment, ratios = best(k)
        per = bytes_per_session(weights, assignment, k)
        if max(per) <= vmem or ndev:
            chosen = (k, assignment, ratios, per)
            break
    if chosen is None:
        need = min_max_cap(weights, limit)
        biggest = max(weights)
        why = (f"its largest layer alone needs {mib(biggest)}" if biggest > vmem
               else f"{limit} sessions need {mib(need)} each")
        raise UsageError(f"{layout.path}: does not fit in {limit} HTP sessions of {mib(vmem)}: {why}",
                         hint="raise --vmem or --max-ndev, or use a smaller quantization")
    k, assignment, ratios, per = chosen
    if max(per) > vmem:
        notes.append(f"--ndev {k}: the largest session needs {mib(max(per))}, over the {mib(vmem)} budget")
    if k > 1 and ratios is None:
        notes.append(f"{k} sessions: llama.cpp's --tensor-split takes at most {LLAMA_MAX_DEVICES - 1} values, "
                     "so this plan uses the default (equal) split")

    other = bytes_per_session([layer.other_bytes for layer in layout.layers], assignment, k)
    default_assignment = llama_assign([1] * k, layout.n_layer)
    default_per = bytes_per_session(weights, default_assignment, k)
    if named is None:
        named = _named_sessions(layout.rules, k, None)
    names, env = named.names, dict(named.env)
    knob = layout.rules.vmem or {}
    if knob.get("env") and vmem != knob.get("default_bytes"):
        # a budget other than the revision's default holds only if the sessions are given it
        env[knob["env"]] = str(vmem // 2 ** 20 if knob.get("unit") == "MiB" else vmem)
    ngl = max(99, n_items)
    args = ["-ngl", str(ngl), "--device", ",".join(names)]
    bench_args = ["-ngl", str(ngl), "-dev", "/".join(names)]
    if k > 1 and ratios is not None:
        args += ["--tensor-split", ",".join(map(str, ratios))]
        bench_args += ["-ts", "/".join(map(str, ratios))]
    if any("[" in d for d in (devices or "").split(",")):
        notes.append("a session written HTPn[a-b] is one llama.cpp device spread over several physical "
                     "sessions; the plan counts it against one session's budget")
    model_name = Path(layout.path).name
    command = " ".join([*[f"{var}={shlex.quote(value)}" for var, value in env.items()], program,
                        "-m", shlex.quote(model_name), *[shlex.quote(a) for a in args]])
    sessions = []
    for d in range(k):
        idx = [i for i, a in enumerate(assignment) if a == d]
        sessions.append({"device": names[d], "first_layer": idx[0] if idx else None,
                         "last_layer": idx[-1] if idx else None, "n_layers": len(idx),
                         "htp_bytes": per[d], "other_bytes": other[d]})
    return {
        "model": layout.path, "arch": layout.arch, "n_layer": layout.n_layer, "vmem": vmem, "max_ndev": max_ndev,
        "ndev": k, "devices": names, "per_session_bytes": per, "per_session_other_bytes": other,
        "balance": round(balance(per), 4), "tensor_split": ratios if ratios is not None else None,
        "env": env, "args": args, "bench_args": bench_args, "command": command,
        "layers": [{"index": layer.index, "name": layer.name, "htp_bytes": layer.htp_bytes,
                    "other_bytes": layer.other_bytes, "cpu_bytes": layer.cpu_bytes, "tensors": layer.tensors}
                   for layer in layout.layers],
        "cpu": {"input_bytes": layout.input_bytes, "input_tensors": layout.input_tensors,
                "row_limited_bytes": sum(layer.cpu_bytes for layer in layout.layers)},
        "assignment": assignment, "sessions": sessions,
        "default_split": {"tensor_split": [1] * k, "assignment": default_assignment,
                          "per_session_bytes": default_per, "balance": round(balance(default_per), 4),
                          "fits": max(default_per) <= vmem},
        "rules": layout.rules.to_json(),
        "notes": notes,
    }


def plan_model(path: str, *, rules: PlanRules = ASSUMED, vmem: str | int | None = None, max_ndev: int | None = None,
               ndev: int | None = None, devices: str | None = None, row_limit: int | None = None,
               program: str = "llama-cli") -> dict[str, Any]:
    """``row_limit`` (--htp-row-limit) overrides the rules' own."""
    if row_limit is not None:
        if row_limit < 0:
            raise UsageError("--htp-row-limit must be 0 (no limit) or a row count")
        rules = dataclasses.replace(rules, row_limit=row_limit)
    layout = read_model(path, rules)
    if vmem is not None:
        budget = vmem if isinstance(vmem, int) else parse_size(vmem)
    else:  # one figure: the revision's own default where it has the knob, else the docs' 3.5 GiB
        budget = int((rules.vmem or {}).get("default_bytes") or DEFAULT_VMEM)
    return make_plan(layout, vmem=budget, max_ndev=DEFAULT_MAX_NDEV if max_ndev is None else max_ndev,
                     ndev=ndev, devices=devices, program=program)


def _named_sessions(rules: PlanRules, ndev: int | None, devices: str | None) -> Any:
    """The sessions' names and the environment that opens them, in the revision's vocabulary
    (GGML_HEXAGON_NDEV, or GGML_HEXAGON_DEVICES where the tree reads it: 0.3.36): the same rules as
    `run --devices` (hexbuild/runner/htp_sessions.py). Give one of ``ndev`` and ``devices``."""
    from ..runner.htp_sessions import sessions
    from ..runner.revision import Revision

    selection = rules.device_selection
    rev = Revision.from_facts({"device_selection": selection}) if selection is not None else Revision()
    named = sessions(rev, ndev=ndev, devices=devices)
    if not named.env:  # one session is the backend's default; the printed command says so anyway
        named.env = {rev.devices_var or "GGML_HEXAGON_NDEV": str(named.count)}
    return named
