"""Hexagon backend log lines made from a real tree's own printf format strings
(ggml/src/ggml-hexagon/ggml-hexagon.cpp), so that tests follow the revision rather than a copy.

``HexFormats(tree).line("failed to open session", "HTP0", "file:///…", 0x80000406)`` finds the
one GGML_LOG_* call whose format contains the needle and fills it in, printf-style."""

import re
from pathlib import Path

_CALL = re.compile(r'GGML_LOG_(?:INFO|WARN|ERROR|DEBUG)\(\s*"((?:[^"\\]|\\.)*)"')
_CONV = re.compile(r"%(?:[-+ 0#]*\d*(?:\.\d+)?)(?:zu|llu|lu|lx|ll|u|d|x|s|f|p)")


def _py_format(c_format: str) -> str:
    def conv(m: re.Match) -> str:
        spec = m.group(0)
        for c, py in (("zu", "d"), ("llu", "d"), ("lu", "d"), ("lx", "x"), ("u", "d"), ("p", "s")):
            if spec.endswith(c):
                return spec[: -len(c)] + py
        return spec

    return _CONV.sub(conv, c_format.replace("%%", "%%"))


class HexFormats:
    def __init__(self, tree: Path, source: str = "ggml/src/ggml-hexagon/ggml-hexagon.cpp") -> None:
        text = (tree / source).read_text(encoding="utf-8", errors="replace")
        self.formats = [bytes(m.group(1), "utf-8").decode("unicode_escape") for m in _CALL.finditer(text)]

    def format(self, needle: str) -> str:
        found = [f for f in self.formats if needle in f]
        assert len(found) >= 1, f"no ggml-hex format string with {needle!r}"
        return found[0]

    def line(self, needle: str, *args) -> str:
        return _py_format(self.format(needle)) % args
