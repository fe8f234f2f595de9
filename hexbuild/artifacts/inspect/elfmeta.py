"""What the disassembly does not say, read from the ELF file: the Hexagon arch,
function symbols with their sizes, and which symbol each PLT slot jumps to.

A skel is a shared object, so its calls to compiler helpers (``__hexagon_udivsi3``,
``__extendhfsf2``) are ``call <plt slot>``; open LLVM before 21 prints no name for them. The
names are in ``.rela.plt``: each R_HEX_JMP_SLOT relocation names the symbol whose address the
dynamic linker writes into one GOT word, and each PLT slot loads its GOT word pc-relatively.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UsageError
from ..elf import EM_QDSP6, ELF_MAGIC, hexagon_arch

# lld's Hexagon PLT: a 32-byte header, then one 16-byte slot per .rela.plt entry, in order.
# Used only when a slot's code is not the pc-relative load it normally is.
_PLT_HEADER, _PLT_SLOT = 32, 16


@dataclass(frozen=True)
class Symbol:
    addr: int
    size: int
    name: str


@dataclass
class ElfMeta:
    path: Path
    arch: str | None
    e_flags: int
    symbols: list[Symbol]                                       # FUNC symbols, by address
    jump_slots: dict[int, str] = field(default_factory=dict)    # GOT word → symbol (.rela.plt)
    jump_slot_order: list[str] = field(default_factory=list)
    plt: tuple[int, int] | None = None                          # .plt (address, size)
    exec_ranges: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, section)
    debug_info: bool = False
    _starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._starts = [s.addr for s in self.symbols]

    def function_at(self, addr: int) -> Symbol | None:
        """The function symbol whose [addr, addr+size) holds ``addr`` (a zero-size symbol holds
        everything up to the next one)."""
        i = bisect.bisect_right(self._starts, addr) - 1
        while i >= 0:
            s = self.symbols[i]
            if addr < s.addr + max(s.size, 1):
                return s
            if s.size == 0:
                nxt = self._starts[i + 1] if i + 1 < len(self._starts) else None
                return s if nxt is None or addr < nxt else None
            if i > 0 and self.symbols[i - 1].addr == s.addr:
                i -= 1
                continue
            return None
        return None

    def section_of(self, addr: int) -> str | None:
        for start, end, name in self.exec_ranges:
            if start <= addr < end:
                return name
        return None


# Their e_machine names, for the one line saying a file is not Hexagon code.
_MACHINES = {3: "EM_386", 40: "EM_ARM", 62: "EM_X86_64", 183: "EM_AARCH64", 243: "EM_RISCV"}
_SHT_SYMTAB, _SHT_RELA, _SHT_REL, _SHT_DYNSYM = 2, 4, 9, 11
_SHF_EXECINSTR, _STT_FUNC, _SHN_XINDEX = 0x4, 2, 0xFFFF


def read_meta(path: Path) -> ElfMeta:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if data[:4] != ELF_MAGIC:
        raise UsageError(f"{path}: not an ELF file")
    try:
        return _meta(Path(path), data)
    except (struct.error, IndexError, ValueError) as e:
        raise UsageError(f"{path}: damaged ELF file: {e}") from None


def _meta(path: Path, data: bytes) -> ElfMeta:
    """The section headers, symbol tables and .rela.plt read with struct: pyelftools took longer
    to import than this takes to read a skel (its DWARF reader still serves addr2line.py)."""
    if data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ValueError(f"ELF class {data[4]}, data encoding {data[5]}")
    wide, end = data[4] == 2, "<" if data[5] == 1 else ">"
    head = struct.unpack_from(end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"), data, 16)
    machine, e_flags, shoff, shentsize, shnum, shstrndx = head[1], head[6], head[5], head[10], head[11], head[12]
    if machine != EM_QDSP6:
        raise UsageError(f"{path}: not Hexagon code (machine {_MACHINES.get(machine, machine)}); inspect reads "
                         "the NPU libraries (libggml-htp-vNN.so)")
    shdr = struct.Struct(end + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"))
    first = shdr.unpack_from(data, shoff) if shoff else None
    if first is not None and shnum == 0:
        shnum = first[5]  # more sections than e_shnum holds
    if first is not None and shstrndx == _SHN_XINDEX:
        shstrndx = first[6]
    # (name offset, type, flags, addr, offset, size, link, info, addralign, entsize) per section
    sections = [shdr.unpack_from(data, shoff + i * shentsize) for i in range(shnum)] if shoff else []
    names = sections[shstrndx] if 0 < shstrndx < len(sections) else None

    def text(table, at: int) -> str:
        start = table[4] + at
        return data[start:data.index(b"\0", start)].decode("utf-8", "replace")

    sym = struct.Struct(end + ("IBBHQQ" if wide else "IIIBBH"))

    def symbols_of(sec):  # (name, value, size, type, shndx) of each entry
        strtab = sections[sec[6]]
        for off in range(sec[4], sec[4] + sec[5] - sym.size + 1, sym.size):
            f = sym.unpack_from(data, off)
            name_at, value, size, info, shndx = (f[0], f[4], f[5], f[1], f[3]) if wide else (f[0], f[1], f[2], f[3], f[5])
            yield (text(strtab, name_at) if name_at else ""), value, size, info & 0xF, shndx

    symbols: dict[tuple[int, str], Symbol] = {}
    jump_slots: dict[int, str] = {}
    order: list[str] = []
    plt = None
    exec_ranges = []
    debug = False
    for sec in sections:
        name = text(names, sec[0]) if names is not None else ""
        sh_type, flags, addr, size = sec[1], sec[2], sec[3], sec[5]
        if name == ".debug_info" or name == ".debug_line":
            debug = True
        if flags & _SHF_EXECINSTR and size:
            exec_ranges.append((addr, addr + size, name))
        if name == ".plt":
            plt = (addr, size)
        if sh_type in (_SHT_SYMTAB, _SHT_DYNSYM):
            for sym_name, value, sym_size, kind, shndx in symbols_of(sec):
                if kind == _STT_FUNC and shndx != 0 and sym_name and (value, sym_name) not in symbols:
                    symbols[(value, sym_name)] = Symbol(value, sym_size, sym_name)
        if (name == ".rela.plt" and sh_type in (_SHT_RELA, _SHT_REL)) or (name == ".rel.plt" and sh_type in (_SHT_RELA, _SHT_REL)):
            rel = struct.Struct(end + ("QQ" if wide else "II") + (("q" if wide else "i") if sh_type == _SHT_RELA else ""))
            table = sections[sec[6]] if 0 < sec[6] < len(sections) else None
            entries = list(symbols_of(table)) if table is not None and table[1] in (_SHT_SYMTAB, _SHT_DYNSYM) else []
            for off in range(sec[4], sec[4] + size - rel.size + 1, rel.size):
                r_offset, r_info = rel.unpack_from(data, off)[:2]
                index = r_info >> (32 if wide else 8)
                sym_name = entries[index][0] if index < len(entries) else ""
                jump_slots[r_offset] = sym_name or f"slot{len(order)}"
                order.append(jump_slots[r_offset])
    ordered = sorted(symbols.values(), key=lambda s: (s.addr, -s.size, s.name))
    return ElfMeta(path, hexagon_arch(e_flags), e_flags, ordered, jump_slots, order, plt, sorted(exec_ranges), debug)


def plt_names(meta: ElfMeta, plt_packets) -> dict[int, str]:
    """PLT slot address → the symbol it calls. ``plt_packets`` are the parsed packets of the
    .plt section: a slot computes its GOT word as ``add(pc,##X)``, and the relocation at that
    word names the symbol."""
    return plt_names_from(meta, [(p.addr, insn.pc_rel) for p in plt_packets for insn in p.insns
                                 if insn.pc_rel is not None])


def plt_names_from(meta: ElfMeta, pc_rel: list[tuple[int, int]]) -> dict[int, str]:
    """plt_names from (packet address, X) of each ``add(pc,##X)`` in .plt (scan.py's record)."""
    names: dict[int, str] = {}
    if not meta.jump_slots or meta.plt is None:
        return names
    for addr, offset in pc_rel:
        got = (addr + offset) & 0xFFFFFFFF
        if got in meta.jump_slots:
            names[addr] = meta.jump_slots[got]
    if not names:
        start = meta.plt[0] + _PLT_HEADER
        for i, name in enumerate(meta.jump_slot_order):
            names[start + i * _PLT_SLOT] = name
    return names
