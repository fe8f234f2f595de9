"""Every function's report in one pass over the disassembler's text, without the model.

``parse`` + ``analyze`` (model.py, analysis.py) build an object per instruction and walk each
function again per analysis; on a real skel (100,000 lines) that is most of inspect's time. The
scanner reads each line once with the same compiled patterns and keeps per function only what
the analyses read: per packet its address, last word, ``:endloop`` bits and HVX count; the loop
set-ups and jumps, the calls and the spills (the stack-derived registers are followed as the
lines go by, with packet semantics). ``finish`` then makes the very reports ``analyze`` makes
(tests/test_inspect_scan.py holds the two to each other on real libraries); ``--disasm`` keeps
the model, which it prints.

    sc = Scanner()
    sc.feed(lines)                     # as many times as the text comes in chunks
    reports = sc.finish(meta, elfmeta.plt_names_from(meta, sc.plt_pairs()))
"""

from __future__ import annotations

from typing import Iterable

from .analysis import _PLAIN_LOOP, STACK_REGS, CallSite, FunctionReport, Loop, helper_kind, nest_loops, target_name
from .elfmeta import ElfMeta
from .model import _CALL, _HEADER, _JUMP, _LOOP, _MEM, _PC_REL, _SECTION, _VECTOR, ENDLOOP0, ENDLOOP1, _is_reg

_BITS = (ENDLOOP0, ENDLOOP1)


class _Fn:
    """One function as the scanner keeps it (see the module docstring)."""

    __slots__ = ("name", "addr", "section", "packets", "insns", "unknown", "loop_events", "xfers", "spills",
                 "stack", "derived", "pc_rel")

    def __init__(self, name: str, addr: int, section: str):
        self.name, self.addr, self.section = name, addr, section
        self.packets: list[tuple[int, int, int, int]] = []  # (address, last word, :endloop bits, HVX insns)
        self.insns = 0
        self.unknown = 0
        # (packet, loop n or -1 for a jump, start/target, plain loopN n or None, its start): in order
        self.loop_events: list[tuple[int, int, int, int | None, int | None]] = []
        self.xfers: list[tuple[int, int, int, str | None, bool]] = []  # (packet, word, target, printed, jump)
        self.spills: list[tuple[int, bool, bool]] = []                  # (packet, vector, store)
        self.stack = set(STACK_REGS)
        self.derived: list[tuple[str, bool]] = []                       # the open packet's writes
        self.pc_rel: list[tuple[int, int]] = []                         # (packet address, add(pc,##X))


def _settle(stack: set[str], derived: list[tuple[str, bool]]) -> None:
    """A packet ended: its register writes land (every instruction of it read the old values)."""
    for reg, from_stack in derived:
        if from_stack:
            stack.add(reg)
        elif reg not in STACK_REGS:
            stack.discard(reg)


class Scanner:
    def __init__(self) -> None:
        self.functions: list[_Fn] = []
        self._section = ""
        self._fn: _Fn | None = None
        self._owner: _Fn | None = None   # the function holding the open packet (None: no packet open)
        self._pending = 0                # <unknown> words not yet known to be code
        self._open: tuple[int, int, int, int] = (0, 0, 0, 0)  # the open packet: address, last word, HVX, insns

    def feed(self, lines: Iterable[str]) -> None:
        """Lines of ``llvm-objdump -d --no-show-raw-insn`` output, in order (any chunking)."""
        # inspect's hot path: one loop, the open packet in locals, appended to its function
        # (``owner``) when it closes; a regular expression only where a cheap test lets it through
        section, fn, owner, pending = self._section, self._fn, self._owner, self._pending
        functions = self.functions
        vector_search, mem_search, call_search, jump_search = _VECTOR.search, _MEM.search, _CALL.search, _JUMP.search
        if owner is not None:
            p_addr, p_last, vec, insns = self._open
            packets, spills, xfers, stack, derived = owner.packets, owner.spills, owner.xfers, owner.stack, owner.derived
            pi = len(packets)
        for line in lines:
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
                    if fn is not None and fn.addr == addr and not fn.packets and owner is not fn:
                        continue  # two names for one address: the first one names it
                    if owner is not None:  # a packet that never closed ends with its function
                        packets.append((p_addr, p_last, 0, vec))
                        owner.insns += insns
                        owner.derived = derived
                    fn = _Fn(m.group(2), addr, section)
                    functions.append(fn)
                    owner, pending = None, 0
                continue
            head, sep, rest = line.partition(":")
            if not sep:
                continue
            try:
                addr = int(head, 16)
            except ValueError:
                continue
            if fn is None:
                fn = _Fn(section or "?", addr, section)
                functions.append(fn)
            rest = rest.strip()
            if rest[:1] == "<" and rest.startswith("<unknown>"):
                pending += 1  # counted once code follows: a function's trailing padding is not code
                continue
            if pending:
                fn.unknown += pending
                pending = 0
            opens = rest[:1] == "{"
            if opens:
                rest = rest[1:]
            if opens or owner is None:
                if owner is not None:  # a packet that never closed ends where the next one opens
                    packets.append((p_addr, p_last, 0, vec))
                    owner.insns += insns
                    if derived:
                        _settle(stack, derived)
                        derived = []
                    owner.derived = derived
                if owner is not fn:
                    owner = fn
                    packets, spills, xfers, stack, derived = (owner.packets, owner.spills, owner.xfers, owner.stack,
                                                              owner.derived)
                p_addr = addr
                pi = len(packets)
                vec = insns = 0
            p_last = addr
            brace = rest.rfind("}")
            if brace >= 0:
                tail = rest[brace + 1:]
                rest = rest[:brace]
            for text in (rest.split(";") if ";" in rest else (rest,)):
                text = text.strip()
                if not text or text.startswith("immext("):
                    continue
                insns += 1
                c0 = text[0]
                if c0 == "v" and text[1:2].isdigit():
                    vec += 1  # vN…: what _VECTOR finds first
                elif ("v" in text or "q" in text) and vector_search(text) is not None:
                    vec += 1
                if "mem" in text:
                    m = mem_search(text)
                    if m is not None and m.group(2) in stack:
                        body = text
                        if c0 == "i" and body.startswith("if ("):
                            cut = body.find(") ")
                            body = body[cut + 2:] if cut >= 0 else body
                        spills.append((pi, m.group(1).startswith("v"), body.startswith(("mem", "vmem"))))
                if "call" in text:
                    m = call_search(text)
                    if m is not None:
                        xfers.append((pi, addr, int(m.group(1), 16), m.group(2), False))
                    elif "callr" in text:
                        xfers.append((pi, addr, -1, None, False))
                elif "jump" in text:
                    m = jump_search(text)
                    if m is not None:
                        target = int(m.group(1), 16)
                        xfers.append((pi, addr, target, m.group(2), True))
                        owner.loop_events.append((pi, -1, target, None, None))
                if "loop" in text:
                    m = _LOOP.search(text)
                    if m is not None:
                        plain = _PLAIN_LOOP.search(text)
                        owner.loop_events.append((pi, int(m.group(1)), int(m.group(2), 16),
                                                  int(plain.group(1)) if plain else None,
                                                  int(plain.group(2), 16) if plain else None))
                if "pc" in text and owner.section == ".plt":
                    m = _PC_REL.search(text)
                    if m is not None:
                        owner.pc_rel.append((p_addr, int(m.group(1), 16)))
                if c0 == "r":
                    # a write matters when it names a stack register (or writes a pair, whose low
                    # register is not spelled out): else it neither derives from the stack nor kills
                    for reg in stack:
                        if reg in text:
                            _writes(text, stack, derived)
                            break
                    else:
                        if len(stack) > 2 and ":" in text[:text.find("=")]:
                            _writes(text, stack, derived)
            if brace >= 0:
                endloop = 0
                if "endloop" in tail:
                    if "endloop0" in tail or "endloop01" in tail:
                        endloop |= ENDLOOP0
                    if "endloop1" in tail or "endloop01" in tail:
                        endloop |= ENDLOOP1
                packets.append((p_addr, p_last, endloop, vec))
                owner.insns += insns
                if derived:
                    _settle(stack, derived)
                    derived = []
                owner.derived = derived
                owner = None
        if owner is not None:
            self._open = (p_addr, p_last, vec, insns)
            owner.derived = derived
        self._section, self._fn, self._owner, self._pending = section, fn, owner, pending

    def close(self) -> None:
        """The end of the text: a packet left open belongs to its function as it is."""
        if self._owner is not None:
            p_addr, p_last, vec, insns = self._open
            self._owner.packets.append((p_addr, p_last, 0, vec))
            self._owner.insns += insns
            self._owner = None

    def plt_pairs(self) -> list[tuple[int, int]]:
        """(packet address, pc-relative offset) of every ``add(pc,##X)`` in the .plt section."""
        return [pair for f in self.functions if f.section == ".plt" and f.packets for pair in f.pc_rel]

    def finish(self, meta: ElfMeta | None, plt: dict[int, str]) -> list[FunctionReport]:
        """The report of every function outside .plt, in address order (``analyze``'s reports)."""
        self.close()
        return [_report(f, meta, plt) for f in self.functions if f.packets and f.section != ".plt"]


def _writes(text: str, stack: set[str], derived: list[tuple[str, bool]]) -> None:
    """The register an instruction writes, and whether it is derived from the stack (model.parse_insn's
    rules: ``rN = add(rS,…)`` and ``rN = rS`` copy; compound and pair writes do not)."""
    eq = text.find("=")
    if eq <= 0 or text[eq + 1:eq + 2] == "=":
        return
    lhs = text[:eq].rstrip()
    compound = lhs[-1] in "+-*/&|^<>"
    regs = lhs.rstrip("+-*/&|^<> ").split(":")
    if not _is_reg(regs[0]):
        return
    pair = "r" + regs[1] if len(regs) == 2 and regs[1].isdigit() else None
    sources: tuple[str, ...] = ()
    if not compound and pair is None:
        rhs = text[eq + 1:].strip()
        if rhs.startswith("add(") and rhs.endswith(")"):
            sources = tuple(a for a in rhs[4:-1].split(",") if _is_reg(a))
        elif _is_reg(rhs):
            sources = (rhs,)
    derived.append((regs[0], any(s in stack for s in sources)))
    if pair is not None:
        derived.append((pair, False))


def _report(f: _Fn, meta: ElfMeta | None, plt: dict[int, str]) -> FunctionReport:
    pk_addr = [p[0] for p in f.packets]
    pk_end = [p[2] for p in f.packets]
    pk_vec = [p[3] for p in f.packets]
    n = len(pk_addr)
    end = f.packets[-1][1] + 4
    index = {a: i for i, a in enumerate(pk_addr)}
    found: dict[tuple[int, int], Loop] = {}
    for pi, kind, start, _, _ in f.loop_events:
        if kind >= 0:
            if start in index:
                bit = _BITS[kind]
                for q in range(index[start], n):
                    if pk_end[q] & bit:
                        found.setdefault((start, pk_addr[q]), Loop(f"loop{kind}", start, pk_addr[q]))
                        break
        elif f.addr <= start <= pk_addr[pi] and start in index:
            found.setdefault((start, pk_addr[pi]), Loop("branch", start, pk_addr[pi]))
    loops = nest_loops(found)
    sym = meta.function_at(f.addr) if meta is not None else None
    size = sym.size if sym is not None and sym.addr == f.addr and sym.size else end - f.addr
    rep = FunctionReport(f.name, f.addr, size, packets=n, unknown=f.unknown, loops=loops,
                         insns=f.insns, hvx_insns=sum(pk_vec))
    enclosing: list[Loop | None] = [None] * n
    for lp in sorted(loops, key=lambda lp: lp.depth):
        for i in range(index[lp.start], index[lp.end] + 1):
            enclosing[i] = lp
            lp.packets += 1
    if loops:
        for i, lp in enumerate(enclosing):
            if lp is not None:
                lp.hvx_insns += pk_vec[i]
    hw = _hw_loop_packets(f, pk_addr, pk_end) if f.spills else ()
    for pi, vector, store in f.spills:
        lp = enclosing[pi]
        (rep.hvx_spills if vector else rep.scalar_spills).add(store, lp is not None)
        if lp is not None:
            (lp.hvx_spills if vector else lp.scalar_spills)[0 if store else 1] += 1
        if hw[pi]:
            (rep.hw_loop_hvx if vector else rep.hw_loop_scalar)[0 if store else 1] += 1
    for pi, word, target, printed, jump in f.xfers:
        if jump and f.addr <= target < end:
            continue
        name = target_name(target, printed, meta, plt)
        lp = enclosing[pi]
        rep.calls.append(CallSite(word, word - f.addr, name, helper_kind(name), lp.kind if lp else None,
                                  bool(lp and lp.innermost), jump, dest=target))
        if lp is not None:
            lp.calls += 1
    return rep


def _hw_loop_packets(f: _Fn, pk_addr: list[int], pk_end: list[int]) -> list[bool]:
    """analysis.hw_loop_packets over the scanner's packets: upstream's loopN-to-:endloopN view."""
    events: dict[int, list[tuple[int, int]]] = {}
    for pi, kind, _, n, start in f.loop_events:
        if kind >= 0 and n is not None:
            events.setdefault(pi, []).append((n, start))
    t0 = t1 = None
    a0 = a1 = False
    inside = []
    for i, (addr, endloop) in enumerate(zip(pk_addr, pk_end)):
        if i in events:
            for n, start in events[i]:
                if n:
                    t1 = start
                else:
                    t0 = start
        if t0 is not None and addr >= t0:
            a0 = True
        if t1 is not None and addr >= t1:
            a1 = True
        inside.append(a0 or a1)
        if endloop:
            if endloop & ENDLOOP0:
                a0, t0 = False, None
            if endloop & ENDLOOP1:
                a1, t1 = False, None
    return inside
