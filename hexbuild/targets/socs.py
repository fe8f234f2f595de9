"""SoC → Hexagon arch, read from hexbuild/data/socs.toml. Unknown SoCs give None, never a guess."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import data


@dataclass(frozen=True)
class Soc:
    model: str
    name: str
    htp: str
    platforms: tuple[str, ...]
    source: str


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Soc]:
    out = {}
    for model, row in data.table("socs").get("soc", {}).items():
        out[model.upper()] = Soc(model.upper(), row.get("name", model), row["htp"],
                                 tuple(p.lower() for p in row.get("platforms", [])), row.get("source", ""))
    return out


def lookup(soc: str | None, platform: str | None = None) -> Soc | None:
    """By SoC model first (``SM8650``), then by board platform code name (``pineapple``)."""
    socs = table()
    if soc and soc.strip().upper() in socs:
        return socs[soc.strip().upper()]
    if platform:
        p = platform.strip().lower()
        for s in socs.values():
            if p in s.platforms:
                return s
    return None


def htp_arch(soc: str | None, platform: str | None = None) -> str | None:
    found = lookup(soc, platform)
    return found.htp if found else None
