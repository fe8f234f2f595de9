"""Tables kept as data, shipped inside the package: SoC -> Hexagon arch, system libraries per
OS, known build failures. ``table(name)`` reads one; ``tomllib`` is the TOML reader for
Python 3.10 and later alike."""

from __future__ import annotations

import functools
import sys
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["table", "tomllib"]


@functools.lru_cache(maxsize=None)
def table(name: str) -> dict[str, Any]:
    """The parsed ``hexbuild/data/<name>.toml``."""
    return tomllib.loads(resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8"))
