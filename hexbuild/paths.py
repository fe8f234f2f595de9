"""Where hexbuild keeps what it remembers between runs: one root per kind, from the XDG
variables (their defaults otherwise), so every cache and state file moves together."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hexbuild`` (``~/.cache/hexbuild``): what can be made again."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hexbuild"


def state_root() -> Path:
    """``$XDG_STATE_HOME/hexbuild`` (``~/.local/state/hexbuild``): what records running things."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "hexbuild"
