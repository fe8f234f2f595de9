"""A GGUF model's bytes per layer, placed by a revision's rules: what each layer puts in an HTP
session's REPACK buffer, in its plain buffer, or leaves on the CPU (hexbuild/plan/__init__.py
says how llama.cpp places layers and tensors)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ParseFailed, UsageError
from ..plan_rules import ASSUMED, PlanRules

INPUT_TENSORS = frozenset({"token_embd", "pos_embd", "token_types", "per_layer_token_embd",
                           "masked_embd_centroids", "masked_embd_ordering"})
FIRST_LAYER_TENSORS = frozenset({"token_embd_norm", "rope_freqs", "rope_factors_long", "rope_factors_short"})
GGUF_MAGIC = b"GGUF"


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
# Per-architecture keys (``llama.block_count``) kept by their last part; the roofline needs the
# attention shape and the expert counts besides the plan's block count.
_KEEP_SUFFIXES = (".block_count", ".embedding_length", ".attention.head_count", ".attention.head_count_kv",
                  ".attention.key_length", ".attention.value_length", ".expert_count", ".expert_used_count")


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


def require_model_file(path: str | Path) -> Path:
    """``path`` as a model file, or UsageError (exit 2, docs/bad-input.md's rows model-is-a-directory
    and model-not-gguf) for what is not one: a directory, nothing, a file without the GGUF magic
    (an HTML error page saved as .gguf). Damage after the magic is the reader's to find (exit 9)."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise UsageError(f"{p} is a directory, not a model file", hint="give the .gguf file itself")
    if not p.is_file():
        raise UsageError(f"model file not found: {p}")
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise UsageError(f"cannot read the model {p}: {e.strerror}") from None
    if magic != GGUF_MAGIC:
        raise UsageError(f"{p} is not a GGUF file (it starts with {magic!r}, not b'GGUF')",
                         hint="an interrupted or HTML download? fetch the model again")
    return p


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
            keep = key in _KEEP_KEYS or key.endswith(_KEEP_SUFFIXES)
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
    p = require_model_file(path)
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
