"""What the disassembly does not say, read from the ELF file (pyelftools): the Hexagon arch,
function symbols with their sizes, and which symbol each PLT slot jumps to.

A skel is a shared object, so its calls to compiler helpers (``__hexagon_udivsi3``,
``__extendhfsf2``) are ``call <plt slot>``; open LLVM before 21 prints no name for them. The
names are in ``.rela.plt``: each R_HEX_JMP_SLOT relocation names the symbol whose address the
dynamic linker writes into one GOT word, and each PLT slot loads its GOT word pc-relatively.
"""

from __future__ import annotations

import bisect
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


def read_meta(path: Path) -> ElfMeta:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            if f.read(4) != ELF_MAGIC:
                raise UsageError(f"{path}: not an ELF file")
            f.seek(0)
            elf = ELFFile(f)
            return _meta(path, elf)
    except ELFError as e:
        raise UsageError(f"{path}: damaged ELF file: {e}") from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def _meta(path: Path, elf) -> ElfMeta:
    machine = elf.header.e_machine
    if machine not in ("EM_QDSP6", EM_QDSP6):
        raise UsageError(f"{path}: not Hexagon code (machine {machine}); inspect reads the NPU libraries "
                         "(libggml-htp-vNN.so)")
    e_flags = int(elf.header.e_flags)
    symbols: dict[tuple[int, str], Symbol] = {}
    jump_slots: dict[int, str] = {}
    order: list[str] = []
    plt = None
    exec_ranges = []
    debug = False
    for sec in elf.iter_sections():
        name = sec.name
        if name == ".debug_info" or name == ".debug_line":
            debug = True
        if sec["sh_flags"] & 0x4 and sec["sh_size"]:  # SHF_EXECINSTR
            exec_ranges.append((sec["sh_addr"], sec["sh_addr"] + sec["sh_size"], name))
        if name == ".plt":
            plt = (sec["sh_addr"], sec["sh_size"])
        if sec["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM"):
            for sym in sec.iter_symbols():
                if (sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] != "SHN_UNDEF"
                        and sym.name and (sym["st_value"], sym.name) not in symbols):
                    symbols[(sym["st_value"], sym.name)] = Symbol(sym["st_value"], sym["st_size"], sym.name)
        if name == ".rela.plt" or (sec["sh_type"] in ("SHT_RELA", "SHT_REL") and name == ".rel.plt"):
            symtab = elf.get_section(sec["sh_link"])
            for rel in sec.iter_relocations():
                sym = symtab.get_symbol(rel["r_info_sym"]) if symtab is not None else None
                sym_name = sym.name if sym is not None and sym.name else f"slot{len(order)}"
                jump_slots[rel["r_offset"]] = sym_name
                order.append(sym_name)
    ordered = sorted(symbols.values(), key=lambda s: (s.addr, -s.size, s.name))
    return ElfMeta(path, hexagon_arch(e_flags), e_flags, ordered, jump_slots, order, plt,
                   sorted(exec_ranges), debug)


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
