"""One small model of disassembled Hexagon code: functions → packets → instructions.

``parse(text)`` reads ``llvm-objdump -d --no-show-raw-insn`` output once; every regular
expression that looks at Hexagon assembly lives here, and the analysis only reads the fields
they fill in (memory base and direction, branch targets, loop set-ups, register moves).

The shape of that output (LLVM 17 to 21 and the SDK's hexagon-llvm-objdump)::

    00010320 <clean_add>:
       10320: { 	p0 = cmp.gt(r3,#0x0); if (!p0.new) jump:nt 0x10430 }
       10324: { 	r4 = and(r3,#0x7)
       10328:   	memd(r29+#-0x10) = r17:16; 	allocframe(#0x28) }
       103ec:   	nop }  :endloop0

A line is one instruction word; a duplex word holds two instructions separated by ``;``; ``{``
opens a packet and ``}`` closes it, followed by ``:endloop0``/``:endloop1`` when the packet ends
a hardware loop body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# A memory operand: vmem/vmemu (HVX) or memb/memub/memh/memuh/memw/memd (+ _locked, _fifo …),
# and the first token inside the parentheses, the base register.
_MEM = re.compile(r"\b(v?mem[a-z]*)(?:_[a-z]+)?\(\s*([a-z]+[0-9]*)")
_VECTOR = re.compile(r"\b(?:v[0-9]+|q[0-3]|vtmp)\b|\bvmemu?\(")
_CALL = re.compile(r"\bcall\s+(0x[0-9a-f]+)(?:\s+<([^>]+)>)?")
_JUMP = re.compile(r"\bjump(?::[a-z]+)?\s+(0x[0-9a-f]+)(?:\s+<([^>]+)>)?")
_LOOP = re.compile(r"\b(?:sp[123])?loop([01])\((0x[0-9a-f]+)")
_PC_REL = re.compile(r"\badd\(pc\s*,\s*#+(-?0x[0-9a-f]+)\)")  # PLT slots: rX = add(pc,##GOT-slot)
_HEADER = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_SECTION = "Disassembly of section "

ENDLOOP0, ENDLOOP1 = 1, 2


class Insn:
    """One instruction. Only what parse_insn finds is set on the instance; everything else is
    the class default (a million instructions are created for a 5 MB library: keep it cheap)."""

    vector = False            # names an HVX register or vmem
    mem_base = None           # base register of its memory operand (str)
    mem_store = False
    mem_vector = False        # vmem/vmemu rather than memb/h/w/d
    call = None               # direct call target; -1: callr (indirect)
    jump = None               # direct jump target (conditional or not)
    target_name = None        # the disassembler's own <name> for the target, if printed
    loop = None               # 0/1: sets up hardware loop N (loopN / spNloopN)
    loop_start = None
    dest = None               # scalar register written (the high one of a pair)
    dest_pair = None          # the low register of a pair written (r1:0 → r0)
    sources: tuple[str, ...] = ()  # registers that dest is derived from (add / transfer)
    pc_rel = None             # add(pc,##X): the packet address + X

    def __init__(self, addr: int, text: str):
        self.addr = addr      # the instruction word holding it
        self.text = text

    def __repr__(self) -> str:
        return f"Insn({self.addr:#x}, {self.text!r})"


@dataclass(slots=True)
class Packet:
    addr: int
    insns: list[Insn] = field(default_factory=list)
    endloop: int = 0                # ENDLOOP0 | ENDLOOP1 bits
    last: int = 0                   # address of its last word


@dataclass(slots=True)
class Function:
    name: str
    addr: int
    section: str
    packets: list[Packet] = field(default_factory=list)
    unknown: int = 0                # words the disassembler could not decode
    aliases: list[str] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.packets[-1].last + 4 if self.packets else self.addr

    @property
    def size(self) -> int:
        return self.end - self.addr

    def insns(self):
        for p in self.packets:
            yield from p.insns


def _is_reg(token: str) -> bool:
    return len(token) > 1 and token[0] == "r" and token[1:].isdigit()


def parse_insn(addr: int, text: str) -> Insn:
    insn = Insn(addr, text)
    if "v" in text or "q" in text:
        insn.vector = _VECTOR.search(text) is not None
    if "mem" in text:
        m = _MEM.search(text)
        if m:
            insn.mem_base = m.group(2)
            insn.mem_vector = m.group(1).startswith("v")
            body = text
            if body.startswith("if ("):
                cut = body.find(") ")
                body = body[cut + 2:] if cut >= 0 else body
            insn.mem_store = body.startswith(("mem", "vmem"))
    if "call" in text:
        m = _CALL.search(text)
        if m:
            insn.call, insn.target_name = int(m.group(1), 16), m.group(2)
        elif "callr" in text:
            insn.call = -1
    elif "jump" in text:
        m = _JUMP.search(text)
        if m:
            insn.jump, insn.target_name = int(m.group(1), 16), m.group(2)
    if "loop" in text:
        m = _LOOP.search(text)
        if m:
            insn.loop, insn.loop_start = int(m.group(1)), int(m.group(2), 16)
    if "pc" in text:
        m = _PC_REL.search(text)
        if m:
            insn.pc_rel = int(m.group(1), 16)
    if text[0] == "r":
        eq = text.find("=")
        if eq > 0 and text[eq + 1:eq + 2] != "=":
            lhs = text[:eq].rstrip()
            compound = lhs[-1] in "+-*/&|^<>"  # r3 += …, r1:0 -= …: written, not a copy
            regs = lhs.rstrip("+-*/&|^<> ").split(":")
            if _is_reg(regs[0]):
                insn.dest = regs[0]
                if len(regs) == 2 and regs[1].isdigit():
                    insn.dest_pair = "r" + regs[1]
                rhs = text[eq + 1:].strip()
                if compound or insn.dest_pair:
                    pass
                elif rhs.startswith("add(") and rhs.endswith(")"):
                    insn.sources = tuple(a for a in rhs[4:-1].split(",") if _is_reg(a))
                elif _is_reg(rhs):
                    insn.sources = (rhs,)
    return insn


def parse(text: str) -> list[Function]:
    """Every function the disassembler printed, in address order. Words before any symbol
    header (a stripped library) go into a function named after their section."""
    functions: list[Function] = []
    section = ""
    fn: Function | None = None
    packet: Packet | None = None
    pending_unknown = 0
    for line in text.splitlines():
        if not line:
            continue
        if line[0] != " ":
            if line.startswith(_SECTION):
                section = line[len(_SECTION):].rstrip(":")
                fn = None
                continue
            m = _HEADER.match(line)
            if m:
                addr = int(m.group(1), 16)
                if fn is not None and not fn.packets and fn.addr == addr:
                    fn.aliases.append(m.group(2))  # two names for one address
                    continue
                fn = Function(m.group(2), addr, section)
                functions.append(fn)
                packet = None
                pending_unknown = 0
            continue
        head, sep, rest = line.partition(":")
        if not sep:
            continue
        try:
            addr = int(head, 16)
        except ValueError:
            continue
        if fn is None:
            fn = Function(section or "?", addr, section)
            functions.append(fn)
        rest = rest.strip()
        if rest.startswith("<unknown>"):
            pending_unknown += 1  # counted once code follows: a function's trailing zero padding is not code
            continue
        fn.unknown += pending_unknown
        pending_unknown = 0
        opens = rest.startswith("{")
        if opens:
            rest = rest[1:]
        closes = False
        endloop = 0
        brace = rest.rfind("}")
        if brace >= 0:
            tail = rest[brace + 1:]
            rest = rest[:brace]
            closes = True
            if "endloop" in tail:
                if "endloop0" in tail or "endloop01" in tail:
                    endloop |= ENDLOOP0
                if "endloop1" in tail or "endloop01" in tail:
                    endloop |= ENDLOOP1
        if opens or packet is None:
            packet = Packet(addr)
            fn.packets.append(packet)
        packet.last = addr
        for part in rest.split(";"):
            part = part.strip()
            if part and not part.startswith("immext("):
                packet.insns.append(parse_insn(addr, part))
        if closes:
            packet.endloop = endloop
            packet = None
    return [f for f in functions if f.packets]
