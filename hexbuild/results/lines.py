"""What every family of llama.cpp lines shares: colour stripping, printf numbers, and the count of
lines recognized (a log in which no family recognizes anything is a ParseFailed)."""

from __future__ import annotations

import math
import re
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NUM = r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan))"


def clean(raw: str) -> str:
    """A console line without colour codes or its line ending."""
    return ANSI.sub("", raw).rstrip("\r\n")


def finite(text: str) -> float | None:
    # llama.cpp prints nan/inf for 0 tokens; the schema has null for them
    v = float(text)
    return v if math.isfinite(v) else None


class LineFamily:
    """One family of llama.cpp lines: fills its sections of the log document ``out`` and counts
    the lines it recognized."""

    def __init__(self, out: dict[str, Any]) -> None:
        self.out = out
        self.matched = 0

    def hit(self) -> bool:
        self.matched += 1
        return True
