"""Hexagon backend log lines made from a real tree's own printf format strings
(ggml/src/ggml-hexagon/ggml-hexagon.cpp), so that tests follow the revision rather than a copy.

``HexFormats(tree).line("failed to open session", "HTP0", "file:///…", 0x80000406)`` finds the
one GGML_LOG_* call whose format contains the needle and fills it in, printf-style."""

import re
from pathlib import Path

_CALL = re.compile(r'GGML_LOG_(?:INFO|WARN|ERROR|DEBUG)\(\s*"((?:[^"\\]|\\.)*)"')
_CONV = re.compile(r"%(?:[-+ 0#]*\d*(?:\.\d+)?)(?:zu|llu|lu|lx|ll|u|d|x|s|f|p)")


def _py_format(c_format: str) -> str:
    def conv(m: re.Match) -> str:
        spec = m.group(0)
        for c, py in (("zu", "d"), ("llu", "d"), ("lu", "d"), ("lx", "x"), ("u", "d"), ("p", "s")):
            if spec.endswith(c):
                return spec[: -len(c)] + py
        return spec

    return _CONV.sub(conv, c_format.replace("%%", "%%"))


class HexFormats:
    def __init__(self, tree: Path, source: str = "ggml/src/ggml-hexagon/ggml-hexagon.cpp") -> None:
        text = (tree / source).read_text(encoding="utf-8", errors="replace")
        self.formats = [bytes(m.group(1), "utf-8").decode("unicode_escape") for m in _CALL.finditer(text)]

    def format(self, needle: str) -> str:
        found = [f for f in self.formats if needle in f]
        assert len(found) >= 1, f"no ggml-hex format string with {needle!r}"
        return found[0]

    def line(self, needle: str, *args) -> str:
        return _py_format(self.format(needle)) % args


# -- profile logs made from a tree's own profile-op / trace-evt format strings -------------------
_OPS = [  # (op, names, srcs dims, dst dims, src types, dst type)
    ("MUL_MAT", "blk.{l}.attn_q.weight x attn_norm-{l} -> Qcur-{l}", ["2048:2048", "2048:{n}"], "2048:{n}",
     ["q4_0", "f32"], "f32"),
    ("MUL_MAT", "blk.{l}.ffn_up.weight x ffn_norm-{l} -> ffn_up-{l}", ["2048:8192", "2048:{n}"], "8192:{n}",
     ["q8_0", "f32"], "f32"),
    ("MUL_MAT_ID", "blk.{l}.ffn_gate_exps.weight x ffn_norm-{l} x ids -> ffn_moe_gate-{l}",
     ["2880:2880:32:1", "2880:4:{n}:1", "4:{n}"], "2880:4:{n}:1", ["mxfp4", "f32", "i32"], "f32"),
    ("RMS_NORM", "inp-{l} -> norm-{l}", ["2048:{n}"], "2048:{n}", ["f32"], "f32"),
    ("ADD", "ffn_out-{l} x ffn_inp-{l} -> l_out-{l}", ["2048:{n}", "2048:{n}"], "2048:{n}", ["f32", "f32"], "f32"),
    ("ROPE", "Qcur-{l} x pos -> Qcur-{l}", ["64:32:{n}:1", "{n}:1"], "64:32:{n}:1", ["f32", "i32"], "f32"),
]
TRACE_EVENTS = ["HVX_COMP", "DMA", "HMX_COMP", "FENCE"]


def _op_fields(spec, layer: int, n: int):
    op, names, srcs, dst, stypes, dtype = spec
    dims = " x ".join(s.format(n=n) for s in srcs) + " -> " + dst.format(n=n)
    types = " x ".join(stypes) + " -> " + dtype
    strides = " x ".join("4:8192" for _ in srcs) + " -> 4:8192"
    return op, names.format(l=layer), dims, types, strides


def profile_log(fmt: HexFormats, *, style: str, lines: int, devices=("HTP0",), seed: int = 1,
                trace_events: bool = False, prefix: str = "") -> str:
    """A log of ``lines`` profile-op lines in a tree's format: style "pipe" (0.3.32+: OPBATCH
    lines, start cycles, MHz, PMU counters, optional trace-evt lines), "colon-0.3.20" (the 0.3.20
    tree's op-usec form) or "colon" (0.3.24/0.3.28's "usec U cycles C", which no cached tree has:
    its words are those the upstream script's own pattern reads)."""
    import random

    rnd = random.Random(seed)
    out: list[str] = []
    cycles = {d: rnd.randrange(1, 2 ** 32) for d in devices}
    pipe = _py_format(fmt.format("profile-op %s|")) if style == "pipe" else None
    batch = _py_format(fmt.format("profile-op OPBATCH")) if style == "pipe" else None
    evt = _py_format(fmt.format("trace-evt")) if trace_events else None
    old = _py_format(fmt.format("profile-op %s:")) if style == "colon-0.3.20" else None
    stamp = 0
    while len(out) < lines:
        dev = devices[rnd.randrange(len(devices))]
        n_ops = rnd.randint(1, 8)
        mhz = 1000.0 + rnd.randrange(0, 500)
        start = cycles[dev]
        body: list[str] = []
        t = start
        for _ in range(n_ops):
            op, names, dims, types, strides = _op_fields(_OPS[rnd.randrange(len(_OPS))], rnd.randrange(24),
                                                         rnd.choice([1, 7, 128]))
            usec = rnd.randint(1, 5000)
            cyc = int(usec * mhz)
            if style == "pipe":
                pmu = " pmu [" + ",".join(str(rnd.randint(0, 10 ** 6)) for _ in range(8)) + "]" if rnd.random() < .3 else ""
                body.append(pipe % (dev, op, names, dims, types, strides, "hvx-tiled vtcm 65536", usec, cyc,
                                    t & 0xFFFFFFFF, cyc / usec, pmu))
                if evt:
                    for th in range(2):
                        e = TRACE_EVENTS[rnd.randrange(len(TRACE_EVENTS))]
                        body.append(evt % (dev, e, th, 0, "start", (t + 10) & 0xFFFFFFFF))
                        body.append(evt % (dev, e, th, 0, "stop", (t + cyc - 10) & 0xFFFFFFFF))
            elif style == "colon-0.3.20":
                body.append(old % (dev, op, names, dims, types, strides, "HTP0-REPACK", usec, cyc, cyc // 3,
                                   3.0, usec + 5))
            else:
                body.append(f"ggml-hex: {dev} profile-op {op}: {names} : {dims} : {types} : {strides} : "
                            f"usec {usec} cycles {cyc}\n")
            t += cyc + rnd.randint(0, 2000)
        if style == "pipe":
            total = t - start
            usec = max(1, int(total / mhz))
            out.append(batch % (dev, n_ops, "----", usec, total, start, total / usec))
        out += body
        cycles[dev] = t + rnd.randint(0, 10 ** 6)
        stamp += 1
    text = "".join(out[:lines])
    if prefix:
        text = "".join(f"{prefix}{ln}\n" for ln in text.splitlines())
    return text
