"""Which glibc (and libstdc++) a Linux program needs, and which one a system has.

A program linked against glibc records, per library, the symbol versions it needs in
``.gnu.version_r`` (GLIBC_2.34 from libc.so.6, GLIBCXX_3.4.30 from libstdc++.so.6, CXXABI_1.3.13);
the loader refuses to start it when the system's libraries do not define them (``version
'GLIBC_2.38' not found``). The highest of each family is what a file needs. A system's glibc is
the release its libc.so.6 names, or the highest GLIBC_x.y its ``.gnu.version_d`` defines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Mapping

FAMILIES = ("GLIBC", "GLIBCXX", "CXXABI")
_NAME = re.compile(r"^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$")
_RELEASE = re.compile(rb"release version (\d+\.\d+)")
_VERSION_TEXT = re.compile(r"\b(\d+\.\d+)\b")


def key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def highest(versions: Iterable[str]) -> str | None:
    found = list(versions)
    return max(found, key=key) if found else None


def parse_version(text: str) -> str | None:
    """The glibc version in the first line of ``getconf GNU_LIBC_VERSION`` (``glibc 2.36``),
    ``ldd --version`` (``ldd (Debian GLIBC 2.31-13+deb11u5) 2.31``) or the loader's
    ``--version`` (``… stable release version 2.31.``): the last x.y on the line."""
    for line in text.splitlines():
        found = _VERSION_TEXT.findall(line)
        if found:
            return found[-1]
    return None


def needs(path: Path) -> dict[str, str]:
    """{family: highest version} that the ELF file at ``path`` needs; {} when it needs none
    (static, not glibc, or not an ELF file). Read through elf.read_elf, so inside
    elf.parse_once() verify and the manifest share one parse of each file."""
    from .elf import NotElf, read_elf

    by_family: dict[str, list[str]] = {}
    try:
        names = read_elf(path).version_needs
    except (NotElf, OSError):
        return {}
    for name in names:
        m = _NAME.match(name)
        if m:
            by_family.setdefault(m.group(1), []).append(m.group(2))
    return {fam: highest(v) for fam, v in by_family.items() if v}


def package_needs(pkg: Path, rels: Iterable[str]) -> dict[str, dict[str, str]]:
    """{relative path: needs} for the files of ``pkg`` that need something."""
    out = {}
    for rel in rels:
        found = needs(Path(pkg) / rel)
        if found:
            out[rel] = found
    return out


def summary(per_file: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The highest version of each family over all files (what the package needs)."""
    out = {}
    for fam in FAMILIES:
        top = highest(v[fam] for v in per_file.values() if fam in v)
        if top:
            out[fam] = top
    return out


def too_new(per_file: Mapping[str, Mapping[str, str]], have: str) -> dict[str, str]:
    """{file: GLIBC version} for each file a system with glibc ``have`` cannot load."""
    return {rel: v["GLIBC"] for rel, v in sorted(per_file.items()) if "GLIBC" in v and key(v["GLIBC"]) > key(have)}


def libc_version(libc: Path) -> str | None:
    """The glibc release of a libc.so.6: the version its banner names, else the highest
    GLIBC_x.y it defines."""
    try:
        data = Path(libc).read_bytes()
    except OSError:
        return None
    m = _RELEASE.search(data)
    if m:
        return m.group(1).decode()
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection

    defined = []
    try:
        with open(libc, "rb") as f:
            for section in ELFFile(f).iter_sections():
                if isinstance(section, GNUVerDefSection):
                    for _verdef, auxiliaries in section.iter_versions():
                        for aux in auxiliaries:
                            m2 = _NAME.match(aux.name)
                            if m2 and m2.group(1) == "GLIBC":
                                defined.append(m2.group(2))
    except (ELFError, OSError, ValueError):
        return None
    return highest(defined)


def sysroot_version(sysroot: Path) -> str | None:
    from ..toolchain.sysroot import LIB_DIRS

    for d in LIB_DIRS:
        libc = Path(sysroot) / d / "libc.so.6"
        if libc.exists():
            return libc_version(libc.resolve())
    return None
