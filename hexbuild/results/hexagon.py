"""ggml-hex lines: the Hexagon backend's registry, arch, sessions and failures (the patterns and
their format strings are in dispatch.py, which also judges whether a run reached the NPU)."""

from __future__ import annotations

from typing import Any

from .dispatch import SessionLog
from .lines import LineFamily


class HexagonLines(LineFamily):
    """Fills ``hexagon``."""

    def __init__(self, out: dict[str, Any]) -> None:
        super().__init__(out)
        self.sessions = SessionLog()

    def feed(self, line: str) -> bool:
        if self.sessions.feed(line) is False:
            return False
        self.out["hexagon"] = self.sessions.to_json()
        return self.hit()
