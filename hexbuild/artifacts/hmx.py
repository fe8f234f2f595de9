"""Whether a skel (libggml-htp-vNN.so) holds HMX code, read from the file alone.

HMX is the NPU's matrix unit. llama.cpp compiles its HMX units (``hmx-matmul-ops.c``,
``hmx-flash-attn-ops.c``, ``hmx-queue.c``...: the HMX matmul, HMX flash attention and the HMX
worker) for v73 and newer with ``-mhmx``; no open assembler takes them and no open emulator runs
them (qemu-hexagon stops at the first one: "unhandled CPU exception"). What a skel says:

- ``empty``: a toolchain without HMX built those units empty (hexbuild's toolchain double records
  them in elf.NO_HMX_SECTION, the manifest's ``no_hmx``): only the HVX paths are in it;
- ``present``: its symbol table shows code of an HMX unit: a function ``hmx_*`` with a size, or a
  source file ``hmx-*.c`` that no ``no_hmx`` record lists;
- ``none``: no HMX unit at all (a v68/v69 skel, a revision from before HMX);
- ``unknown``: a v73+ skel without a symbol table to tell by.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .elf import NO_HMX_SECTION

EMPTY, PRESENT, NONE, UNKNOWN = "empty", "present", "none", "unknown"
HMX_SINCE = 73  # the first HTP version llama.cpp builds HMX units for


@dataclass(frozen=True)
class HmxFacts:
    state: str
    arch: str | None
    units: tuple[str, ...] = ()      # the HMX units built empty (empty) or with code (present)
    functions: tuple[str, ...] = ()  # HMX functions with code (present)

    @property
    def emulable(self) -> bool:
        """Its code runs on an emulator without HMX (what is unknown is not refused)."""
        return self.state != PRESENT

    def evidence(self) -> str:
        """What says so, for one line: 'hmx-matmul-ops.c, hmx_mat_mul_f16 and 4 more'."""
        names = [*self.units, *self.functions]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return ", ".join(names[:3]) + more


def skel_hmx(path: Path) -> HmxFacts:
    """HmxFacts of the Hexagon shared object at ``path`` (NotElf from elf.py if it is not ELF)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    from .elf import read_elf

    info = read_elf(path)
    arch = info.arch
    empty = set(info.no_hmx)
    units: list[str] = []
    functions: list[str] = []
    tables = 0
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            if not isinstance(sec, SymbolTableSection) or sec.name == NO_HMX_SECTION:
                continue
            tables += sec.name == ".symtab"
            for sym in sec.iter_symbols():
                kind, name = sym["st_info"]["type"], sym.name
                if kind == "STT_FILE" and name.startswith("hmx-") and _unit(name) not in empty:
                    units.append(_unit(name))
                elif kind == "STT_FUNC" and name.lower().startswith("hmx_") and sym["st_shndx"] != "SHN_UNDEF" \
                        and sym["st_size"] > 0:
                    functions.append(name)
    units, functions = list(dict.fromkeys(units)), list(dict.fromkeys(functions))
    if units or functions:
        return HmxFacts(PRESENT, arch, tuple(units), tuple(functions))
    if empty:
        return HmxFacts(EMPTY, arch, tuple(sorted(empty)))
    number = int(arch[1:3]) if arch and arch[1:3].isdigit() else None
    if number is not None and number < HMX_SINCE:
        return HmxFacts(NONE, arch)
    return HmxFacts(NONE if tables else UNKNOWN, arch)


def _unit(file_symbol: str) -> str:
    """'hmx-queue.c' of the STT_FILE name a compiler wrote ('hmx-queue.c', or 'hmx-queue.c.c' for
    the toolchain double's empty unit, made from a copy with '.c' appended)."""
    return file_symbol[:-2] if file_symbol.endswith(".c.c") else file_symbol
