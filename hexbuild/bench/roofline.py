"""The memory roofline: how far a decode figure is from what the device's DRAM can feed.

Decode makes one pass over the weights per token: every tensor once, except the input
embedding (one row per token; all of it when the output layer shares it), and of a mixture of
experts only the experts each token uses (``expert_used_count / expert_count`` of the ``*_exps``
tensors); plus the KV cache up to the token's position (K and V of every layer, F16 unless the
run says otherwise). That is the same whether the weights sit in the HTP sessions' buffers or
on the CPU: a Snapdragon has one DRAM. So

    bound (tokens/s) = peak DRAM bandwidth / bytes read per token,   percent = measured / bound.

Peak bandwidth comes from hexbuild/data/dram.toml (each row with its source; a SoC without a
published bus width has no peak, and the result says so), or --peak-bandwidth. Prefill is set
against the NPU's published TOPS (2 operations per weight per token) only where the table has
one; elsewhere it says there is no published compute figure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import data
from ..errors import HexbuildError, UsageError

INPUT_TENSORS = ("token_embd", "pos_embd", "token_types", "per_layer_token_embd")
# bytes per element of the KV cache types llama-bench reports (type_k/type_v)
KV_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
                 "iq4_nl": 18 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32}


@dataclass(frozen=True)
class Dram:
    soc: str
    name: str
    dram: str | None
    clock_mhz: float | None
    bus_bits: int | None
    peak_gbs: float | None
    peak_basis: str | None
    source: str | None
    bus_source: str | None
    note: str | None
    npu_tops: float | None
    npu_precision: str | None
    npu_source: str | None

    @property
    def data_rate_mts(self) -> float | None:
        return 2 * self.clock_mhz if self.clock_mhz else None

    def to_json(self) -> dict[str, Any]:
        return {"soc": self.soc, "name": self.name, "dram": self.dram, "clock_mhz": self.clock_mhz,
                "data_rate_mts": self.data_rate_mts, "bus_bits": self.bus_bits, "peak_gbs": self.peak_gbs,
                "peak_basis": self.peak_basis, "source": self.source, "bus_source": self.bus_source,
                "note": self.note}


@functools.lru_cache(maxsize=1)
def dram_table() -> dict[str, Dram]:
    out = {}
    for soc, row in data.table("dram").get("soc", {}).items():
        out[soc.upper()] = Dram(soc.upper(), row.get("name", soc), row.get("dram"), row.get("clock_mhz"),
                                row.get("bus_bits"), row.get("peak_gbs"), row.get("peak_basis"), row.get("source"),
                                row.get("bus_source"), row.get("note"), row.get("npu_tops"), row.get("npu_precision"),
                                row.get("npu_source"))
    return out


def lookup(soc: str | None) -> Dram | None:
    """The SoC's row: by model (``SM8650``; ``SM8650-AB`` and ``X1E-84-100`` match their family)."""
    if not soc:
        return None
    key = soc.strip().upper()
    table = dram_table()
    if key in table:
        return table[key]
    for name in table:
        if key.startswith(name + "-") or key.startswith(name):
            return table[name]
    return None


@dataclass
class ModelTraffic:
    """What one decode token reads of a model, from its GGUF tensor table (header only)."""

    path: str
    arch: str
    n_layer: int
    weight_bytes: int            # every weight read once per token (experts: the used share)
    session_bytes: int           # of those, the weights the HTP sessions hold (the plan's repacked bytes)
    other_bytes: int             # norms, other types and row-limited weights: plain buffers or the CPU
    embedding_bytes: int         # the input embedding rows a token reads
    params: int                  # weight elements a token multiplies (for the compute bound)
    kv_per_position: int | None  # K+V elements per cached position, all layers (None: unknown)
    notes: list[str] = field(default_factory=list)

    def kv_bytes(self, positions: float, type_k: str | None = None, type_v: str | None = None) -> int:
        if not self.kv_per_position or positions <= 0:
            return 0
        size = (KV_TYPE_BYTES.get((type_k or "f16").lower(), 2.0) + KV_TYPE_BYTES.get((type_v or "f16").lower(), 2.0)) / 2
        return int(self.kv_per_position * positions * size)

    def bytes_per_token(self, positions: float = 0.0, type_k: str | None = None, type_v: str | None = None) -> int:
        return self.weight_bytes + self.kv_bytes(positions, type_k, type_v)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.path, "arch": self.arch, "n_layer": self.n_layer, "weight_bytes": self.weight_bytes,
                "session_bytes": self.session_bytes, "other_bytes": self.other_bytes,
                "embedding_bytes": self.embedding_bytes, "params": self.params,
                "kv_elements_per_position": self.kv_per_position, "notes": self.notes}


def model_traffic(path: str | Path, rules: Any = None) -> ModelTraffic:
    """Read the GGUF (every shard's header; never the tensor data) and the plan's placement."""
    from ..plan.gguf_layout import _shards, read_gguf_header, read_model
    from ..plan_rules import ASSUMED

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{path}: no such file (the roofline reads the model's GGUF header)")
    rules = rules or ASSUMED
    layout = read_model(p, rules)  # checks the file and its shards, counts the layers
    first = read_gguf_header(p)
    tensors = []
    for shard in _shards(p, first):
        header = first if shard == p else read_gguf_header(shard)
        tensors += header.tensors
    f, arch = first.fields, layout.arch

    def key(name: str) -> Any:
        v = f.get(f"{arch}.{name}")
        return v if isinstance(v, (int, float)) else None

    n_expert, n_used = key("expert_count"), key("expert_used_count")
    tied = "output.weight" not in {t[0] for t in tensors}
    repack, row_limit = frozenset(rules.repack_types), rules.row_limit
    weight = session = embedding = params = 0
    notes: list[str] = []
    for name, type_name, ne, n_bytes, _off in tensors:
        base = name.rsplit(".", 1)[0] if name.endswith((".weight", ".bias")) else name
        if base in INPUT_TENSORS and not (tied and base == "token_embd"):
            rows = ne[1] if len(ne) >= 2 and ne[1] else 1
            embedding += n_bytes // rows
            continue
        share = n_used / n_expert if "_exps" in base and n_expert and n_used else 1.0
        read = int(n_bytes * share)
        weight += read
        rows = ne[1] if len(ne) == 2 else 0
        if type_name in repack and not (row_limit and rows > row_limit) and base != "token_embd":
            session += read  # as the plan places it: the sessions' REPACK buffers
        if len(ne) >= 2:
            elements = 1
            for d in ne:
                elements *= d
            params += int(elements * share)
    if n_expert and n_used:
        notes.append(f"mixture of experts: {n_used} of {n_expert} experts' weights read per token")
    if tied:
        notes.append("the output layer shares token_embd: all of it is read per token")
    n_head, n_head_kv, n_embd = key("attention.head_count"), key("attention.head_count_kv"), key("embedding_length")
    n_head_kv = n_head_kv or n_head
    k_len = key("attention.key_length") or (n_embd // n_head if n_embd and n_head else None)
    v_len = key("attention.value_length") or k_len
    kv = None
    if n_head_kv and k_len and v_len and layout.n_layer:
        kv = int(layout.n_layer * n_head_kv * (k_len + v_len))
    else:
        notes.append("the KV cache shape is not in the header's scalar keys (per-layer head counts?): "
                     "weights only")
    return ModelTraffic(str(p), arch, layout.n_layer, weight + embedding, session, weight - session, embedding,
                        params, kv, notes)


def decode_positions(n_depth: int = 0, n_gen: int = 0, n_prompt: int = 0) -> float:
    """Positions an average generated token attends to: the depth (and prompt) before it, plus
    half of the generated tokens."""
    return float(n_depth + n_prompt) + (n_gen + 1) / 2 if n_gen else float(n_depth + n_prompt)


def decode(traffic: ModelTraffic, dram: Dram | None, tokens_per_s: float | None, *, positions: float = 0.0,
           type_k: str | None = None, type_v: str | None = None, peak_gbs: float | None = None,
           soc: str | None = None) -> dict[str, Any]:
    """The decode roofline of one figure: bound, percent and where the bandwidth comes from."""
    per_token = traffic.bytes_per_token(positions, type_k, type_v)
    out: dict[str, Any] = {"soc": dram.soc if dram else soc, "dram": dram.dram if dram else None,
                           "bytes_per_token": per_token, "weight_bytes": traffic.weight_bytes,
                           "kv_bytes": traffic.kv_bytes(positions, type_k, type_v), "positions": positions,
                           "peak_gbs": None, "peak_source": None, "bound_ts": None, "percent": None, "note": None}
    if peak_gbs:
        out.update(peak_gbs=float(peak_gbs), peak_source="--peak-bandwidth")
    elif dram is not None and dram.peak_gbs:
        out.update(peak_gbs=float(dram.peak_gbs), peak_source=dram.source, peak_basis=dram.peak_basis,
                   bus_source=dram.bus_source)
    elif dram is not None:
        out["note"] = (f"{dram.soc}: {dram.note or 'no peak bandwidth published'}; "
                       "give --peak-bandwidth GB/s for your device")
    else:
        out["note"] = (f"SoC {soc} is not in hexbuild's DRAM table" if soc else "the device's SoC is unknown") + \
            "; give --soc or --peak-bandwidth GB/s"
    if out["peak_gbs"] and per_token:
        bound = out["peak_gbs"] * 1e9 / per_token
        out["bound_ts"] = round(bound, 3)
        if tokens_per_s:
            out["percent"] = round(100.0 * tokens_per_s / bound, 2)
    return out


def prefill(traffic: ModelTraffic, dram: Dram | None, tokens_per_s: float | None) -> dict[str, Any]:
    """Prefill against the NPU's published peak: 2 operations per weight element per token."""
    if dram is None or not dram.npu_tops:
        what = dram.soc if dram else "this SoC"
        return {"bound_ts": None, "percent": None,
                "note": f"no published compute figure for {what}'s NPU: prefill has no compute bound here"}
    bound = dram.npu_tops * 1e12 / (2 * traffic.params) if traffic.params else None
    return {"tops": dram.npu_tops, "precision": dram.npu_precision, "source": dram.npu_source,
            "bound_ts": round(bound, 1) if bound else None,
            "percent": round(100.0 * tokens_per_s / bound, 3) if bound and tokens_per_s else None,
            "note": "an upper bound: llama.cpp's Hexagon matmuls do not run at the NPU's INT8 peak"}


class TrafficCache:
    """Each model's traffic read once per command (a bench matrix repeats models)."""

    def __init__(self) -> None:
        self._seen: dict[str, ModelTraffic | str] = {}

    def get(self, path: str | None) -> tuple[ModelTraffic | None, str | None]:
        if not path:
            return None, "no local copy of the model to read (give --gguf FILE)"
        if path not in self._seen:
            try:
                self._seen[path] = model_traffic(path)
            except HexbuildError as e:
                self._seen[path] = e.message
        got = self._seen[path]
        return (got, None) if isinstance(got, ModelTraffic) else (None, got)


def local_model(model: str | None, gguf: str | None) -> str | None:
    """The local GGUF to read: --gguf, else --model when it names a file here."""
    if gguf:
        return gguf
    if model and Path(model).expanduser().is_file():
        return str(Path(model).expanduser())
    return None


def summary_line(r: dict[str, Any]) -> str:
    """One line for a person: '41.0% of the SM8650 DRAM bound (30.1 t/s: 76.8 GB/s / 2.55 GB per token)'."""
    if r.get("percent") is None or not r.get("bound_ts"):
        return r.get("note") or "no roofline"
    gb = r["bytes_per_token"] / 1e9
    where = f"the {r['soc']} " if r.get("soc") else ""
    return (f"{r['percent']:.1f}% of {where}DRAM bound ({r['bound_ts']:.1f} t/s: {r['peak_gbs']:g} GB/s / "
            f"{gb:.3g} GB per token; bandwidth: {r['peak_source']})")


def _local_copy(model: str, gguf: list[str]) -> str | None:
    """The local GGUF for a model named on the device: the --gguf of the same file name, the
    only --gguf when there is one, or the model itself when it is a local path."""
    name = Path(model).name
    for g in gguf:
        if Path(g).name == name:
            return g
    if len(gguf) == 1:
        return gguf[0]
    return local_model(model, None)


def attach(summary: list[dict[str, Any]], rows: list[dict[str, Any]], *, socs: dict[str, str | None],
           gguf: list[str] | None = None, peak_gbs: float | None = None) -> None:
    """Give each eval (decode) and prompt (prefill) summary its ``roofline``, and each eval row
    the bytes_per_token / peak_gbs / roofline_pct the history keeps."""
    cache, gguf = TrafficCache(), list(gguf or [])

    def one(item: dict[str, Any], ts: float) -> dict[str, Any] | None:
        if item.get("kind") not in ("eval", "prompt"):
            return None
        traffic, why = cache.get(_local_copy(item["model"], gguf))
        soc = socs.get(item["target"])
        if traffic is None:
            return {"soc": soc, "percent": None, "bound_ts": None, "note": why}
        if item["kind"] == "prompt":
            return {"soc": soc, **prefill(traffic, lookup(soc), ts)}
        positions = decode_positions(int(item.get("n_depth") or 0), int(item.get("n_gen") or 0))
        return decode(traffic, lookup(soc), ts, positions=positions, peak_gbs=peak_gbs, soc=soc)

    for s in summary:
        r = one(s, s["median_ts"])
        if r is not None:
            s["roofline"] = r
    for row in rows:
        if row.get("kind") == "eval":
            r = one(row, row["avg_ts"])
            if r and r.get("bound_ts"):
                row.update(bytes_per_token=r["bytes_per_token"], peak_gbs=r["peak_gbs"], roofline_pct=r["percent"])


def markdown_notes(summary: list[dict[str, Any]]) -> str:
    """The roofline's sources and gaps, under bench's table."""
    decode_rows = [s for s in summary if s.get("kind") == "eval" and s.get("roofline")]
    if not decode_rows:
        return ""
    lines = ["", "Memory roofline (decode): tokens/s as a share of peak DRAM bandwidth / bytes read per token "
             "(every weight once, the used experts' share, the embedding row, the KV cache at the test's mean depth)."]
    seen: set[Any] = set()
    for s in decode_rows:
        r = s["roofline"]
        if r.get("bound_ts"):
            key = ("peak", r.get("soc"), r["peak_gbs"])
            if key not in seen:
                seen.add(key)
                lines.append(f"- {r.get('soc') or 'device'}: {r['peak_gbs']:g} GB/s ({r['peak_source']})")
            key = ("model", s["model"], s["test"])
            if key not in seen:
                seen.add(key)
                lines.append(f"- {s['model']} {s['test']}: {r['bytes_per_token'] / 1e6:.3f} MB per token, "
                             f"bound {r['bound_ts']:.1f} t/s")
        elif r.get("note") and ("note", r["note"]) not in seen:
            seen.add(("note", r["note"]))
            lines.append(f"- no bound for {s['target']} {s['test']}: {r['note']}")
    return "\n".join(lines) + "\n"


def for_run(results: dict[str, Any] | None, *, model: str | None, gguf: str | None, soc: str | None,
            peak_gbs: float | None = None) -> dict[str, Any] | None:
    """The roofline of a `hexbuild run`'s decode (and prefill) figures, from its parsed perf lines;
    None when the run printed none."""
    perf = (results or {}).get("perf") or {}
    ev, pp = perf.get("eval") or {}, perf.get("prompt_eval") or {}
    if not ev.get("tokens_per_second"):
        return None
    traffic, why = TrafficCache().get(local_model(model, gguf))
    if traffic is None:
        return {"decode": {"soc": soc, "percent": None, "bound_ts": None, "note": why}}
    positions = decode_positions(int(pp.get("tokens") or 0), int(ev.get("runs") or 0))
    out = {"decode": decode(traffic, lookup(soc), ev["tokens_per_second"], positions=positions,
                            peak_gbs=peak_gbs, soc=soc), "model": traffic.to_json()}
    if pp.get("tokens_per_second"):
        out["prefill"] = prefill(traffic, lookup(soc), pp["tokens_per_second"])
    return out


def device_soc(spec: str, settings: Any, dest: str = "") -> str | None:
    """The SoC the target reports (None when it reports none, as local: and qemu: do)."""
    from ..runner import default_dest, open_target

    try:
        with open_target(spec, settings) as target:
            where = dest or default_dest(target)
            return target.probe(target.expand(where) if hasattr(target, "expand") else where).soc
    except HexbuildError:
        return None
