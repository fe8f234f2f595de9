"""inspect's ELF reader (elfmeta.py, struct) against pyelftools on genuine Hexagon libraries, and
the one line it gives for what is not one: not ELF, not Hexagon, cut short."""

from __future__ import annotations

import pytest

from hexbuild import errors
from hexbuild.artifacts.inspect.elfmeta import read_meta
from tests import elf_factory as ef
from tests import inspect_kernels as ik


def pyelftools_view(path):
    """What elfmeta read with pyelftools before: FUNC symbols defined here, .rela.plt, sections."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        symbols, slots, order, execs, plt, debug = {}, {}, [], [], None, False
        for sec in elf.iter_sections():
            debug |= sec.name in (".debug_info", ".debug_line")
            if sec["sh_flags"] & 0x4 and sec["sh_size"]:
                execs.append((sec["sh_addr"], sec["sh_addr"] + sec["sh_size"], sec.name))
            if sec.name == ".plt":
                plt = (sec["sh_addr"], sec["sh_size"])
            if sec["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM"):
                for s in sec.iter_symbols():
                    if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF" and s.name:
                        symbols.setdefault((s["st_value"], s.name), s["st_size"])
            if sec.name == ".rela.plt":
                table = elf.get_section(sec["sh_link"])
                for rel in sec.iter_relocations():
                    name = table.get_symbol(rel["r_info_sym"]).name or f"slot{len(order)}"
                    slots[rel["r_offset"]] = name
                    order.append(name)
        return (elf.header.e_flags, sorted((a, -s, n) for (a, n), s in symbols.items()), slots, order, sorted(execs),
                plt, debug)


@pytest.mark.parametrize("version,debug", [("v68", False), ("v73", False), ("v73", True)])
def test_reads_what_pyelftools_reads(tmp_path, version, debug):
    lib = ik.build(tmp_path / f"libggml-htp-{version}.so", version, debug=debug)
    m = read_meta(lib)
    mine = (m.e_flags, [(s.addr, -s.size, s.name) for s in m.symbols], m.jump_slots, m.jump_slot_order,
            m.exec_ranges, m.plt, m.debug_info)
    assert mine == pyelftools_view(lib)
    assert m.arch == version and m.jump_slots and m.debug_info is debug


def test_what_is_not_a_hexagon_library(tmp_path, cli):
    lib = ik.build(tmp_path / "libggml-htp-v73.so", "v73")
    text = tmp_path / "notes.so"
    text.write_text("not a library\n")
    cut = tmp_path / "cut.so"
    cut.write_bytes(lib.read_bytes()[:200])
    arm = ef.aarch64_so(tmp_path / "libggml-cpu.so", os="linux")
    for path, words in ((text, "not an ELF file"), (cut, "damaged ELF file"), (arm, "not Hexagon code (machine EM_AARCH64)")):
        r = cli("inspect", str(path))
        assert r.rc == errors.USAGE and words in r.err, (path, r.err)
        assert len(r.err.strip().splitlines()) <= 2 and "Traceback" not in r.err
