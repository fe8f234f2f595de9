"""What a kernel developer looks for in one function: its loops, its stack traffic inside and
outside them, and the compiler helpers it calls.

- **Loops**: hardware loops (``loopN``/``spNloopN`` set-up to the packet marked ``:endloopN``)
  and branch loops (a jump back to an earlier packet of the same function: the compiler does
  not form a hardware loop around a call). The innermost loops are the hot ones.
- **Spills**: loads and stores whose base register is the stack or frame pointer (r29, r30) or
  a register computed from them (``rN = add(r29,#…)``), split into HVX (``vmem``) and scalar
  and into in-loop and frame set-up/tear-down. Register state follows packet semantics: every
  instruction of a packet reads the registers as they were before it.
- **Spills in hardware loops, upstream's way**: llama.cpp's ``ggml-hexagon-inspect.py`` counts a
  spill as in a loop when it sits between a ``loop0``/``loop1`` set-up's start address and the next
  packet marked ``:endloop0``/``:endloop1`` in address order (branch loops do not count). The same
  spills are counted that way too (``hw_loop_spills``), so the two tools' figures compare.
- **Helpers**: calls (and tail jumps) to software float conversions (``__extend*``,
  ``__trunc*``), software divide/modulo (``__hexagon_udivsi3``, …) and other soft-float
  routines, with their call sites and whether they sit in a (hot) loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .elfmeta import ElfMeta
from .model import ENDLOOP0, ENDLOOP1, Function

STACK_REGS = frozenset(("r29", "r30"))
INDIRECT = "(indirect)"

_PROMOTION = re.compile(r"^__(?:trunc|extend)[a-z0-9_]+$")
_DIVIDE = re.compile(r"^__(?:hexagon_)?(?:u?(?:div|mod)[sd]i3|u?divmod[sd]i4|(?:fast2?_)?div[sdt]f3)$")
_SOFT_FLOAT = re.compile(r"^__(?:hexagon_)?(?:(?:add|sub|mul|neg)[sdt]f3|fix(?:uns)?[sdt]f[sdt]i|"
                         r"float(?:un)?[sdt]i[sdt]f|(?:eq|ne|lt|le|gt|ge|unord|cmp)[sdt]f2|"
                         r"(?:fast2?_)?sqrt(?:f|df2|sf2)?)$")


def helper_kind(name: str | None) -> str | None:
    """"promotion", "divide", "soft_float" or None for an ordinary function."""
    if not name:
        return None
    base = name.split("@", 1)[0]
    if _PROMOTION.match(base):
        return "promotion"
    if _DIVIDE.match(base):
        return "divide"
    if _SOFT_FLOAT.match(base):
        return "soft_float"
    return None


@dataclass
class Loop:
    kind: str                   # loop0 | loop1 | branch
    start: int
    end: int                    # address of the packet that closes it
    packets: int = 0
    depth: int = 1              # 1: outermost
    innermost: bool = True
    hvx_spills: list[int] = field(default_factory=lambda: [0, 0])     # [stores, loads]
    scalar_spills: list[int] = field(default_factory=lambda: [0, 0])
    hvx_insns: int = 0
    calls: int = 0

    def contains(self, other: "Loop") -> bool:
        return self.start <= other.start and other.end <= self.end and (self.start, self.end) != (other.start, other.end)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "start": self.start, "end": self.end, "packets": self.packets,
                "depth": self.depth, "innermost": self.innermost, "hvx_insns": self.hvx_insns,
                "hvx_spills": {"stores": self.hvx_spills[0], "loads": self.hvx_spills[1]},
                "scalar_spills": {"stores": self.scalar_spills[0], "loads": self.scalar_spills[1]},
                "calls": self.calls}


@dataclass
class Spills:
    in_loop_stores: int = 0
    in_loop_loads: int = 0
    frame_stores: int = 0
    frame_loads: int = 0

    @property
    def in_loop(self) -> int:
        return self.in_loop_stores + self.in_loop_loads

    @property
    def total(self) -> int:
        return self.in_loop + self.frame_stores + self.frame_loads

    def add(self, store: bool, in_loop: bool) -> None:
        if in_loop:
            if store:
                self.in_loop_stores += 1
            else:
                self.in_loop_loads += 1
        elif store:
            self.frame_stores += 1
        else:
            self.frame_loads += 1

    def to_json(self) -> dict[str, int]:
        return {"in_loop": self.in_loop, "in_loop_stores": self.in_loop_stores, "in_loop_loads": self.in_loop_loads,
                "frame": self.frame_stores + self.frame_loads, "total": self.total}


@dataclass
class CallSite:
    addr: int
    offset: int
    target: str
    helper: str | None          # promotion | divide | soft_float | None
    loop: str | None            # the innermost enclosing loop's kind, None outside loops
    hot: bool                   # inside an innermost loop
    tail: bool = False          # a jump, not a call
    line: str | None = None     # file:line with debug info
    dest: int | None = None     # the address called (not in the JSON: ``target`` names it)

    def to_json(self) -> dict[str, Any]:
        out = {"addr": self.addr, "offset": self.offset, "target": self.target, "helper": self.helper,
               "in_loop": self.loop is not None, "loop": self.loop, "hot": self.hot, "tail": self.tail}
        if self.line:
            out["line"] = self.line
        return out


@dataclass
class FunctionReport:
    name: str
    addr: int
    size: int
    packets: int = 0
    insns: int = 0
    hvx_insns: int = 0
    unknown: int = 0
    loops: list[Loop] = field(default_factory=list)
    hvx_spills: Spills = field(default_factory=Spills)
    scalar_spills: Spills = field(default_factory=Spills)
    calls: list[CallSite] = field(default_factory=list)
    hw_loop_hvx: list[int] = field(default_factory=lambda: [0, 0])     # [stores, loads], upstream's loops
    hw_loop_scalar: list[int] = field(default_factory=lambda: [0, 0])
    spill_tags: dict[tuple[int, str], str] = field(default_factory=dict)  # (word, insn) → "V-SPILL:STORE"…

    @property
    def helper_calls(self) -> list[CallSite]:
        return [c for c in self.calls if c.helper]

    def count(self, helper: str, *, in_loop: bool = False) -> int:
        return sum(1 for c in self.calls if c.helper == helper and (not in_loop or c.loop is not None))

    def hot_helpers(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.calls:
            if c.helper and c.hot:
                out[c.target] = out.get(c.target, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "addr": self.addr, "size": self.size, "packets": self.packets, "insns": self.insns,
            "hvx_insns": self.hvx_insns, "unknown_words": self.unknown,
            "hardware_loops": sum(1 for lp in self.loops if lp.kind != "branch"),
            "branch_loops": sum(1 for lp in self.loops if lp.kind == "branch"),
            "loops": [lp.to_json() for lp in self.loops],
            "hvx_spills": self.hvx_spills.to_json(), "scalar_spills": self.scalar_spills.to_json(),
            "hw_loop_spills": {"hvx": sum(self.hw_loop_hvx), "hvx_stores": self.hw_loop_hvx[0],
                               "hvx_loads": self.hw_loop_hvx[1], "scalar": sum(self.hw_loop_scalar)},
            "calls": {"total": len(self.calls), "in_loop": sum(1 for c in self.calls if c.loop),
                      "in_hot_loop": sum(1 for c in self.calls if c.hot)},
            "promotions": {"total": self.count("promotion"), "in_loop": self.count("promotion", in_loop=True)},
            "divides": {"total": self.count("divide"), "in_loop": self.count("divide", in_loop=True)},
            "soft_float": {"total": self.count("soft_float"), "in_loop": self.count("soft_float", in_loop=True)},
            "helper_calls": [c.to_json() for c in self.helper_calls],
        }


def find_loops(fn: Function) -> list[Loop]:
    index = {p.addr: i for i, p in enumerate(fn.packets)}
    loops: dict[tuple[int, int], Loop] = {}
    for i, p in enumerate(fn.packets):
        for insn in p.insns:
            if insn.loop is not None and insn.loop_start in index:
                bit = ENDLOOP0 if insn.loop == 0 else ENDLOOP1
                for q in fn.packets[index[insn.loop_start]:]:
                    if q.endloop & bit:
                        loops.setdefault((insn.loop_start, q.addr), Loop(f"loop{insn.loop}", insn.loop_start, q.addr))
                        break
            elif insn.jump is not None and fn.addr <= insn.jump <= p.addr and insn.jump in index:
                loops.setdefault((insn.jump, p.addr), Loop("branch", insn.jump, p.addr))
    return nest_loops(loops)


def nest_loops(loops: dict[tuple[int, int], Loop]) -> list[Loop]:
    """The loops in address order, each with its depth and whether it is innermost."""
    found = sorted(loops.values(), key=lambda lp: (lp.start, -lp.end))
    spans = [(lp.start, lp.end) for lp in found]  # Loop.contains, unrolled: hundreds of loops in a kernel
    for lp in found:
        s, e = lp.start, lp.end
        depth, innermost = 1, True
        for os_, oe in spans:
            if os_ <= s and e <= oe:
                depth += (os_, oe) != (s, e)
            elif s <= os_ and oe <= e:
                innermost = False
        lp.depth, lp.innermost = depth, innermost
    return found


_PLAIN_LOOP = re.compile(r"\bloop([01])\((0x[0-9a-f]+)")


def hw_loop_packets(fn: Function) -> list[bool]:
    """Per packet: inside a hardware loop as llama.cpp's ggml-hexagon-inspect.py sees it: from
    the start address a ``loopN(start, …)`` names (once reached, in address order) to the next
    packet marked ``:endloopN``."""
    target: list[int | None] = [None, None]
    active = [False, False]
    inside = []
    for p in fn.packets:
        for insn in p.insns:
            if insn.loop is not None:
                m = _PLAIN_LOOP.search(insn.text)  # loopN only, not spNloopN: as upstream's pattern
                if m:
                    target[int(m.group(1))] = int(m.group(2), 16)
        for n in (0, 1):
            if target[n] is not None and p.addr >= target[n]:
                active[n] = True
        inside.append(active[0] or active[1])
        for n, bit in ((0, ENDLOOP0), (1, ENDLOOP1)):
            if p.endloop & bit:
                active[n], target[n] = False, None
    return inside


def analyze(fn: Function, meta: ElfMeta | None, plt: dict[int, str]) -> FunctionReport:
    loops = find_loops(fn)
    sym = meta.function_at(fn.addr) if meta is not None else None
    size = sym.size if sym is not None and sym.addr == fn.addr and sym.size else fn.size
    rep = FunctionReport(fn.name, fn.addr, size, packets=len(fn.packets), unknown=fn.unknown, loops=loops)
    # The innermost loop holding each packet: paint outer loops first, inner ones over them.
    enclosing: list[Loop | None] = [None] * len(fn.packets)
    if loops:
        index = {p.addr: i for i, p in enumerate(fn.packets)}
        for lp in sorted(loops, key=lambda lp: lp.depth):
            for i in range(index[lp.start], index[lp.end] + 1):
                enclosing[i] = lp
                lp.packets += 1
    hw = hw_loop_packets(fn)
    stack = set(STACK_REGS)
    for i, p in enumerate(fn.packets):
        lp = enclosing[i]
        derived: list[tuple[str, bool]] = []
        for insn in p.insns:
            rep.insns += 1
            if insn.vector:
                rep.hvx_insns += 1
                if lp:
                    lp.hvx_insns += 1
            if insn.mem_base is not None and insn.mem_base in stack:
                spills = rep.hvx_spills if insn.mem_vector else rep.scalar_spills
                spills.add(insn.mem_store, lp is not None)
                if lp:
                    (lp.hvx_spills if insn.mem_vector else lp.scalar_spills)[0 if insn.mem_store else 1] += 1
                if hw[i]:
                    (rep.hw_loop_hvx if insn.mem_vector else rep.hw_loop_scalar)[0 if insn.mem_store else 1] += 1
                rep.spill_tags[(insn.addr, insn.text)] = (("V-SPILL:" if insn.mem_vector else "S-SPILL:")
                                                          + ("STORE" if insn.mem_store else "LOAD")
                                                          + (":IN-LOOP" if lp else ""))
            target = None
            tail = False
            if insn.call is not None:
                target = insn.call
            elif insn.jump is not None and not (fn.addr <= insn.jump < fn.end):
                target, tail = insn.jump, True
            if target is not None:
                name = target_name(target, insn.target_name, meta, plt)
                rep.calls.append(CallSite(insn.addr, insn.addr - fn.addr, name, helper_kind(name),
                                          lp.kind if lp else None, bool(lp and lp.innermost), tail))
                if lp:
                    lp.calls += 1
            if insn.dest is not None:
                derived.append((insn.dest, any(s in stack for s in insn.sources)))
                if insn.dest_pair is not None:
                    derived.append((insn.dest_pair, False))
        for reg, from_stack in derived:  # packet semantics: writes land after all reads
            if from_stack:
                stack.add(reg)
            elif reg not in STACK_REGS:
                stack.discard(reg)
    return rep


def target_name(addr: int, printed: str | None, meta: ElfMeta | None, plt: dict[int, str]) -> str:
    if addr < 0:
        return INDIRECT
    if addr in plt:
        return plt[addr]
    if printed:
        return printed.removesuffix("@plt")
    if meta is not None:
        sym = meta.function_at(addr)
        if sym is not None:
            return sym.name if sym.addr == addr else f"{sym.name}+{addr - sym.addr:#x}"
    return f"{addr:#x}"
