"""Plan how a GGUF model splits across Hexagon (HTP) sessions (`hexbuild plan`).

An HTP session maps a limited amount of memory (about 3.5 GiB, docs/backend/snapdragon/
developer.md), so big models run on several sessions (GGML_HEXAGON_NDEV=N, devices HTP0..N-1)
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
     "env": {"GGML_HEXAGON_NDEV": "N"}, "args": [str], "bench_args": [str], "command": str,
     "layers": [{"index", "name", "htp_bytes", "other_bytes", "cpu_bytes", "tensors"}],  # n_layer + 1
     "cpu": {"input_bytes", "input_tensors", "row_limited_bytes"},   # bytes that stay on the CPU
     "assignment": [int],                    # session of each layer, as llama.cpp will place it
     "sessions": [{"device", "first_layer", "last_layer", "n_layers", "htp_bytes", "other_bytes"}],
     "default_split": {"tensor_split": [1, ...], "assignment": [int], "per_session_bytes": [int],
                       "balance": float, "fits": bool},
     "rules": {"revision": str | null, "repack_types": [str], "row_limit": int,   # 0: no limit
               "vmem": {"env", "unit", "default_bytes"} | null,   # the revision's GGML_HEXAGON_VMEM
               "origin": "source" | "package" | "target" | "assumed"},
     "notes": [str]}
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import shlex
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .errors import ParseFailed, UsageError
from .plan_rules import ASSUMED, PlanRules

INPUT_TENSORS = frozenset({"token_embd", "pos_embd", "token_types", "per_layer_token_embd",
                           "masked_embd_centroids", "masked_embd_ordering"})
FIRST_LAYER_TENSORS = frozenset({"token_embd_norm", "rope_freqs", "rope_factors_long", "rope_factors_short"})
LLAMA_MAX_DEVICES = 16  # llama_max_devices(); common's --tensor-split takes fewer values than this
DEFAULT_VMEM = int(3.5 * 1024 ** 3)
DEFAULT_MAX_NDEV = 16
GGUF_MAGIC = b"GGUF"

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


@dataclass
class Layer:
    index: int
    name: str
    htp_bytes: int = 0    # repacked weights: the session's REPACK buffer
    other_bytes: int = 0  # norms, biases, other types: the session's plain buffer or the CPU
    cpu_bytes: int = 0    # repackable weights over the row limit: the CPU
    tensors: int = 0


@dataclass
class ModelLayout:
    path: str
    arch: str
    n_layer: int
    layers: list[Layer]  # n_layer repeating layers, then the output layer
    input_bytes: int = 0
    input_tensors: int = 0
    notes: list[str] = field(default_factory=list)
    rules: PlanRules = ASSUMED


# -- the GGUF header ---------------------------------------------------------------------------
# gguf.GGUFReader turns every metadata array element into numpy objects: 13 s for a 201k-token
# vocabulary. This walks the same header (GGUF v2/v3, either byte order) over an mmap and keeps
# only the few keys the plan needs, in ~0.1 s; the type tables come from the gguf package, and
# tests/test_plan.py checks the result against GGUFReader.

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_KEEP_KEYS = ("general.architecture", "general.alignment", "split.count")


@dataclass
class GGUFHeader:
    fields: dict[str, Any]
    tensors: list[tuple[str, str, list[int], int, int]]  # name, type name, ne, n_bytes, data offset
    data_offset: int


class _Short(Exception):
    pass


class _Cursor:
    def __init__(self, buf: Any, order: str) -> None:
        self.buf, self.pos, self.order, self.size = buf, 0, order, len(buf)

    def take(self, n: int) -> int:
        start, self.pos = self.pos, self.pos + n
        if self.pos > self.size:
            raise _Short(self.pos)
        return start

    def scalar(self, fmt: str) -> Any:
        start = self.take(struct.calcsize(fmt))
        return struct.unpack_from(self.order + fmt, self.buf, start)[0]

    def string(self) -> str:
        n = self.scalar("Q")
        start = self.take(n)
        return bytes(self.buf[start:start + n]).decode("utf-8", "replace")

    def value(self, vtype: int, keep: bool) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            if keep:
                return self.string()
            self.take(self.scalar("Q"))
            return None
        if vtype == _ARRAY:
            itype, count = self.scalar("I"), self.scalar("Q")
            if itype in _SCALARS:  # skip a numeric array in one step
                self.take(count * struct.calcsize(_SCALARS[itype]))
            elif itype == _STRING:  # a vocabulary: hop from length to length
                length, pos, size = struct.Struct(self.order + "Q").unpack_from, self.pos, self.size
                for _ in range(count):
                    if pos + 8 > size:
                        raise _Short(pos + 8)
                    pos += 8 + length(self.buf, pos)[0]
                self.pos = pos
                self.take(0)
            else:
                for _ in range(count):
                    self.value(itype, False)
            return None
        raise ValueError(f"unknown metadata value type {vtype}")


def read_gguf_header(path: Path) -> GGUFHeader:
    """The metadata keys hexbuild needs and the tensor table, or ParseFailed with one line."""
    import mmap

    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    size = path.stat().st_size
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise ParseFailed(f"{path}: not a GGUF file (no GGUF magic at the start)")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        version = struct.unpack_from("<I", buf, 4)[0] if size >= 8 else 0
        order = "<" if version & 0xFFFF else ">"  # a big-endian file reads as a huge version here
        cur = _Cursor(buf, order)
        cur.take(4)
        version = cur.scalar("I")
        if version not in (2, 3):
            raise ParseFailed(f"{path}: GGUF version {version} is not supported (only 2 and 3)")
        n_tensors, n_kv = cur.scalar("Q"), cur.scalar("Q")
        fields: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            keep = key in _KEEP_KEYS or key.endswith(".block_count")
            value = cur.value(cur.scalar("I"), keep)
            if keep:
                fields[key] = value
        tensors = []
        for _ in range(n_tensors):
            name = cur.string()
            ne = [cur.scalar("Q") for _ in range(cur.scalar("I"))]
            type_id, offset = cur.scalar("I"), cur.scalar("Q")
            try:
                qtype = GGMLQuantizationType(type_id)
                block, type_size = GGML_QUANT_SIZES[qtype]
            except (ValueError, KeyError):
                raise ParseFailed(f"{path}: tensor {name} has unknown type {type_id} "
                                  "(a newer gguf package may know it)") from None
            n_elements = 1
            for d in ne:
                n_elements *= d
            tensors.append((name, qtype.name, ne, n_elements // block * type_size, offset))
        align = fields.get("general.alignment") or 32
        data_offset = (cur.pos + align - 1) // align * align
    except _Short as e:
        raise ParseFailed(f"{path}: truncated GGUF file: the header needs {e.args[0]} bytes, the file has {size}") from None
    except (ValueError, struct.error, UnicodeError) as e:
        raise ParseFailed(f"{path}: corrupt GGUF header: {e}") from None
    finally:
        buf.close()
    end = max((data_offset + off + n for _, _, _, n, off in tensors), default=data_offset)
    if end > size:
        raise ParseFailed(f"{path}: truncated GGUF file: tensor data ends at byte {end}, the file has {size}")
    return GGUFHeader(fields, tensors, data_offset)


def _shards(path: Path, header: GGUFHeader) -> list[Path]:
    count = header.fields.get("split.count") or 1
    if count <= 1:
        return [path]
    m = re.fullmatch(r"(.*)-(\d{5})-of-(\d{5})\.gguf", path.name)
    if not m or int(m[2]) != 1:
        raise UsageError(f"{path}: a split GGUF ({count} files): pass the first one (…-00001-of-{count:05d}.gguf)")
    return [path.with_name(f"{m[1]}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def read_model(path: str | Path, rules: PlanRules = ASSUMED) -> ModelLayout:
    """Sum each layer's bytes from the GGUF tensor table (all shards of a split model), placing
    them by ``rules`` (the revision's repacked types and row limit)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{path}: no such file")
    first = read_gguf_header(p)
    arch = first.fields.get("general.architecture") or "unknown"
    block_count = first.fields.get(f"{arch}.block_count")
    tensors = []
    for shard in _shards(p, first):
        if not shard.is_file():
            raise UsageError(f"{shard}: missing shard of split model {p.name}")
        header = first if shard == p else read_gguf_header(shard)
        tensors.extend((name, type_name, ne, n_bytes) for name, type_name, ne, n_bytes, _ in header.tensors)
    if not tensors:
        raise ParseFailed(f"{path}: the GGUF file has no tensors")

    blk = re.compile(r"^blk\.(\d+)\.")
    n_layer = int(block_count) if block_count else 0
    n_layer = max([n_layer] + [int(m[1]) + 1 for name, *_ in tensors if (m := blk.match(name))])
    layers = [Layer(i, f"blk.{i}") for i in range(n_layer)] + [Layer(n_layer, "output")]
    layout = ModelLayout(str(path), arch, n_layer, layers, rules=rules)
    repack, row_limit = frozenset(rules.repack_types), rules.row_limit
    row_limited = 0
    for name, type_name, shape, n_bytes in tensors:
        base = name.rsplit(".", 1)[0] if name.endswith((".weight", ".bias")) else name
        if m := blk.match(name):
            layer = layers[int(m[1])]
        elif base in INPUT_TENSORS:
            layout.input_bytes += n_bytes
            layout.input_tensors += 1
            continue
        elif base in FIRST_LAYER_TENSORS and n_layer > 0:
            layer = layers[0]
        else:
            layer = layers[n_layer]
        layer.tensors += 1
        rows = shape[1] if len(shape) == 2 else 0  # 3-D expert weights go through MUL_MAT_ID: no row limit
        if type_name in repack and not (row_limit and rows > row_limit):
            layer.htp_bytes += n_bytes
        elif type_name in repack:
            layer.cpu_bytes += n_bytes
            row_limited += 1
        else:
            layer.other_bytes += n_bytes
    if row_limited:
        layout.notes.append(f"{row_limited} weight(s) with more than {row_limit} rows stay on the CPU "
                            f"(the HTP matmul row limit of this revision)")
    return layout


# -- llama.cpp's layer placement -----------------------------------------------------------------

def llama_assign(ratios: Sequence[float], n_layer: int) -> list[int]:
    """The device index llama.cpp gives each of the n_layer + 1 layers (output last) for
    ``--tensor-split ratios`` and -ngl >= n_layer + 1; float32 like the C++ code."""
    import numpy as np

    f32 = np.float32
    if not ratios or all(r == 0 for r in ratios):
        ratios = [1.0] * max(1, len(ratios))  # default split: equal free memory on every session
    splits, total = [], f32(0)
    for r in ratios:
        total = f32(total + f32(r))
        splits.append(total)
    points = [float(f32(s / total)) for s in splits]
    act = n_layer + 1
    return [bisect.bisect_right(points, float(f32(f32(il) / f32(act)))) for il in range(act)]


def _bytes_per_session(weights: Sequence[int], assignment: Sequence[int], ndev: int) -> list[int]:
    out = [0] * ndev
    for w, d in zip(weights, assignment):
        out[d] += w
    return out


def balance(per_session: Sequence[int]) -> float:
    total = sum(per_session)
    return max(per_session) * len(per_session) / total if total else 1.0


def min_max_cap(weights: Sequence[int], k: int) -> int:
    """The smallest possible largest-group sum over all splits of ``weights`` into at most k
    contiguous groups. Exact: sums are integers, and greedy filling tells whether a cap works."""
    lo, hi = max(weights, default=0), sum(weights)

    def groups_needed(cap: int) -> int:
        n, acc = 1, 0
        for w in weights:
            if acc + w > cap:
                n, acc = n + 1, w
            else:
                acc += w
        return n

    while lo < hi:
        mid = (lo + hi) // 2
        if groups_needed(mid) <= k:
            hi = mid
        else:
            lo = mid + 1
    return lo


def split_ends(weights: Sequence[int], k: int, cap: int) -> list[int]:
    """Exclusive end index of each of exactly k non-empty contiguous groups, none above cap
    (needs len(weights) >= k and cap >= min_max_cap(weights, k))."""
    n, ends, acc, start = len(weights), [], 0, 0
    for i, w in enumerate(weights):
        groups_left = k - len(ends)  # counting the open one
        # close the open group when w would overflow it, or when each remaining layer must
        # open a group of its own to reach exactly k
        if i > start and groups_left > 1 and (acc + w > cap or n - i == groups_left - 1):
            ends.append(i)
            start, acc = i, 0
        acc += w
    ends.append(n)
    return ends


def ratios_for(ends: Sequence[int], n_items: int) -> list[int]:
    """Integer ratios whose cumulative split points sit half a layer before each group end,
    so float32 rounding can never move a layer across a boundary."""
    points = [2 * e - 1 for e in ends[:-1]] + [2 * n_items]
    return [b - a for a, b in zip([0] + points[:-1], points)]


# -- the plan ---------------------------------------------------------------------------------

def make_plan(layout: ModelLayout, *, vmem: int = DEFAULT_VMEM, max_ndev: int = DEFAULT_MAX_NDEV,
              ndev: int | None = None, program: str = "llama-cli") -> dict[str, Any]:
    if not 1 <= max_ndev <= LLAMA_MAX_DEVICES:
        raise UsageError(f"--max-ndev must be between 1 and {LLAMA_MAX_DEVICES}")
    weights = [layer.htp_bytes for layer in layout.layers]
    n_items = len(weights)
    total = sum(weights)
    if total == 0:
        raise UsageError(f"{layout.path}: no tensors of a type the HTP repacks "
                         f"({', '.join(layout.rules.repack_types)}): nothing to place on the NPU")
    notes = list(layout.notes)
    if layout.rules.origin == "assumed":
        notes.append("no revision given: assumed the rules of the newest known tree (0.3.36: "
                     f"repacks {' '.join(layout.rules.repack_types)}; no row limit); pass --source, "
                     "--package or --target for your revision's")

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
    candidates = [ndev] if ndev else range(1, limit + 1)
    if ndev and not 1 <= ndev <= limit:
        raise UsageError(f"--ndev {ndev}: must be between 1 and {limit} (layers: {n_items}, --max-ndev {max_ndev})")
    chosen = None
    for k in candidates:
        assignment, ratios = best(k)
        per = _bytes_per_session(weights, assignment, k)
        if max(per) <= vmem or ndev:
            chosen = (k, assignment, ratios, per)
            break
    if chosen is None:
        need = min_max_cap(weights, limit)
        biggest = max(weights)
        why = (f"its largest layer alone needs {_mib(biggest)}" if biggest > vmem
               else f"{limit} sessions need {_mib(need)} each")
        raise UsageError(f"{layout.path}: does not fit in {limit} HTP sessions of {_mib(vmem)}: {why}",
                         hint="raise --vmem or --max-ndev, or use a smaller quantization")
    k, assignment, ratios, per = chosen
    if max(per) > vmem:
        notes.append(f"--ndev {k}: the largest session needs {_mib(max(per))}, over the {_mib(vmem)} budget")
    if k > 1 and ratios is None:
        notes.append(f"{k} sessions: llama.cpp's --tensor-split takes at most {LLAMA_MAX_DEVICES - 1} values, "
                     "so this plan uses the default (equal) split")

    other = _bytes_per_session([layer.other_bytes for layer in layout.layers], assignment, k)
    default_assignment = llama_assign([1] * k, layout.n_layer)
    default_per = _bytes_per_session(weights, default_assignment, k)
    devices = [f"HTP{i}" for i in range(k)]
    ngl = max(99, n_items)
    args = ["-ngl", str(ngl), "--device", ",".join(devices)]
    bench_args = ["-ngl", str(ngl), "-dev", "/".join(devices)]
    if k > 1 and ratios is not None:
        args += ["--tensor-split", ",".join(map(str, ratios))]
        bench_args += ["-ts", "/".join(map(str, ratios))]
    env = {"GGML_HEXAGON_NDEV": str(k)}
    model_name = Path(layout.path).name
    command = " ".join([f"GGML_HEXAGON_NDEV={k}", program, "-m", shlex.quote(model_name),
                        *[shlex.quote(a) for a in args]])
    sessions = []
    for d in range(k):
        idx = [i for i, a in enumerate(assignment) if a == d]
        sessions.append({"device": devices[d], "first_layer": idx[0] if idx else None,
                         "last_layer": idx[-1] if idx else None, "n_layers": len(idx),
                         "htp_bytes": per[d], "other_bytes": other[d]})
    return {
        "model": layout.path, "arch": layout.arch, "n_layer": layout.n_layer, "vmem": vmem, "max_ndev": max_ndev,
        "ndev": k, "per_session_bytes": per, "per_session_other_bytes": other,
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
               ndev: int | None = None, row_limit: int | None = None, program: str = "llama-cli") -> dict[str, Any]:
    """``row_limit`` (--htp-row-limit) overrides the rules' own."""
    if row_limit is not None:
        if row_limit < 0:
            raise UsageError("--htp-row-limit must be 0 (no limit) or a row count")
        rules = dataclasses.replace(rules, row_limit=row_limit)
    layout = read_model(path, rules)
    budget = DEFAULT_VMEM if vmem is None else (vmem if isinstance(vmem, int) else parse_size(vmem))
    return make_plan(layout, vmem=budget, max_ndev=DEFAULT_MAX_NDEV if max_ndev is None else max_ndev,
                     ndev=ndev, program=program)


def _mib(n: int) -> str:
    return f"{n / 1024 ** 2:.2f} MiB"


def render(plan: dict[str, Any]) -> str:
    """The plan for people: a table of sessions, then lines that must not wrap (the command)."""
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(pad_edge=False)
    for col in ("device", "layers", "HTP MiB", "other MiB", "default split MiB"):
        table.add_column(col, justify="left" if col in ("device", "layers") else "right")
    for s, d in zip(plan["sessions"], plan["default_split"]["per_session_bytes"]):
        layers = "-" if s["first_layer"] is None else f"{s['first_layer']}-{s['last_layer']} ({s['n_layers']})"
        table.add_row(s["device"], layers, f"{s['htp_bytes'] / 1024 ** 2:.2f}",
                      f"{s['other_bytes'] / 1024 ** 2:.2f}", f"{d / 1024 ** 2:.2f}")
    buf = io.StringIO()
    Console(file=buf, width=120, force_terminal=False, highlight=False).print(table)
    lines = [f"{Path(plan['model']).name}: {plan['n_layer']} layers + output on {plan['ndev']} "
             f"session(s) of {_mib(plan['vmem'])}",
             buf.getvalue().rstrip("\n"),
             f"balance (max/mean): {plan['balance']:.3f}   default split: {plan['default_split']['balance']:.3f}",
             f"CPU: {_mib(plan['cpu']['input_bytes'] + plan['cpu']['row_limited_bytes'])} "
             f"(input layer {_mib(plan['cpu']['input_bytes'])})",
             plan["command"],
             _rules_line(plan["rules"])]
    lines += [f"note: {n}" for n in plan["notes"]]
    return "\n".join(lines) + "\n"


def _rules_line(rules: dict[str, Any]) -> str:
    where = rules["origin"] if rules["origin"] == "assumed" else f"{rules['origin']} {rules['revision'] or '?'}"
    limit = f"{rules['row_limit']} rows" if rules["row_limit"] else "none"
    line = f"rules ({where}): repacks {' '.join(rules['repack_types'])}; row limit {limit}"
    vmem = rules.get("vmem")
    if vmem:
        default = f", default {_mib(vmem['default_bytes'])}" if vmem.get("default_bytes") else ""
        line += f"; {vmem['env']} ({vmem['unit']}{default})"
    return line
