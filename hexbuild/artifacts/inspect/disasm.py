"""`inspect --disasm FUNC`: one function's packets with what the analysis saw marked on them:
packet boundaries, loop starts and ends (with their kind and depth), spills, helper calls."""

from __future__ import annotations

from .analysis import FunctionReport
from .model import Function

_WIDTH = 48


def render_disasm(fn: Function, rep: FunctionReport) -> str:
    starts: dict[int, list[str]] = {}
    ends: dict[int, list[str]] = {}
    for lp in rep.loops:
        label = f"{lp.kind} depth {lp.depth}" + (", innermost" if lp.innermost else "")
        starts.setdefault(lp.start, []).append(f"{lp.kind.upper()}-START ({label}, ends {lp.end:#x})")
        ends.setdefault(lp.end, []).append(f"{lp.kind.upper()}-END (from {lp.start:#x})")
    calls = {c.addr: c for c in rep.calls}  # a word holds at most one call or tail jump
    lines = [f"{rep.name}  {rep.addr:#x}-{rep.addr + rep.size:#x}  {rep.size} bytes, {rep.packets} packets, "
             f"{rep.insns} instructions ({rep.hvx_insns} HVX), {len(rep.loops)} loops",
             f"  HVX spills: {rep.hvx_spills.in_loop} in loops, {rep.hvx_spills.total} in all; scalar spills: "
             f"{rep.scalar_spills.in_loop} in loops, {rep.scalar_spills.total} in all; "
             f"helper calls: {len(rep.helper_calls)}", ""]
    for p in fn.packets:
        for tag in starts.get(p.addr, []):
            lines.append(f"{'':>10}  ┌─ {tag}")
        for i, insn in enumerate(p.insns):
            brace = "{" if i == 0 else " "
            close = " }" if i == len(p.insns) - 1 else ""
            tags = []
            spill = rep.spill_tags.get((insn.addr, insn.text))
            if spill:
                tags.append(spill)
            c = calls.get(insn.addr) if (insn.call is not None or insn.jump is not None) else None
            if c is not None:
                kind = (c.helper or "call").upper().replace("_", "-")
                where = ":HOT-LOOP" if c.hot else (":IN-LOOP" if c.loop else "")
                tags.append(f"{kind}:{c.target}{where}")
            text = f"{insn.text}{close}"
            addr = f"{insn.addr:>8x}:" if i == 0 or insn.addr != p.insns[i - 1].addr else ""
            line = f"{addr:>10} {brace} {text}"
            lines.append(f"{line:<{_WIDTH + 12}}  [{'] ['.join(tags)}]" if tags else line)
        if not p.insns:
            lines.append(f"{p.addr:>8x}: {{ }}")
        for tag in ends.get(p.addr, []):
            lines.append(f"{'':>10}  └─ {tag}")
    return "\n".join(lines)
