"""The newest glibc symbol version a package's AArch64 Linux programs need (GLIBC_2.x entries of
``.gnu.version_r``), and the version a board has. A small probe of its own: programs built in a
newer image than the board's userland fail to start there ("version `GLIBC_2.38' not found")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

_VERSION = re.compile(r"^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$")
_DEVICE = re.compile(r"(?:glibc|GLIBC|GNU libc\)?|GNU C Library[^)]*\)?)\s*(?:version\s*)?(\d+)\.(\d+)")


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def needed_by(path: Path) -> str | None:
    """The highest GLIBC_x.y one ELF file asks for; None for non-ELF or files that ask for none."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
            f.seek(0)
            elf = ELFFile(f)
            best: tuple[int, ...] | None = None
            for section in elf.iter_sections():
                if not isinstance(section, GNUVerNeedSection):
                    continue
                for _verneed, auxes in section.iter_versions():
                    for aux in auxes:
                        m = _VERSION.match(aux.name)
                        if m:
                            key = tuple(int(g) for g in m.groups() if g is not None)
                            best = key if best is None or key > best else best
            return ".".join(map(str, best)) if best else None
    except (ELFError, OSError, ValueError, KeyError, IndexError):
        return None


def needed_by_all(paths: Iterable[Path]) -> tuple[str | None, str | None]:
    """(highest version, the file that needs it) over ``paths``."""
    best: str | None = None
    who: str | None = None
    for p in paths:
        v = needed_by(p)
        if v and (best is None or version_key(v) > version_key(best)):
            best, who = v, p.name
    return best, who


def device_version(text: str) -> str | None:
    """``getconf GNU_LIBC_VERSION`` ("glibc 2.36") or ``ldd --version``'s first line."""
    m = _DEVICE.search(text or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None
