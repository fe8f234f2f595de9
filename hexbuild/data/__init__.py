"""Tables kept as data, shipped inside the package: SoC -> Hexagon arch, system libraries per
OS, known build failures. ``table(name)`` reads one; ``toml()`` is the TOML reader for Python
3.10 and later alike, imported on first use (a run that reads no TOML does not pay for it)."""

from __future__ import annotations

import functools
import sys
from typing import Any

__all__ = ["table", "toml"]


def toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


@functools.lru_cache(maxsize=None)
def table(name: str) -> dict[str, Any]:
    """The parsed ``hexbuild/data/<name>.toml``."""
    from importlib import resources

    return toml().loads(resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8"))
