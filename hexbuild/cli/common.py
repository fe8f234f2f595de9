"""What every command shares: the global flags' state, loading settings, the source dir."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when settings are read: `serve stop` may need none (serve_stop.py)
    from ..config import Settings


class State:
    config_file: str | None = None


state = State()


def settings(**flags: Any) -> Settings:
    """Settings for this invocation; ``flags`` are dotted keys (``build.os``) → flag values,
    where None means the flag was not given."""
    from ..config import load

    return load(flags=flags, config_file=state.config_file)


def source_dir(s: Settings) -> Path:
    return Path(s["source"]).expanduser()
