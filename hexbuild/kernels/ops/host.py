"""What a tree's host code (ggml-hexagon.cpp) accepts for an op: the body of its
ggml_hexagon_supported_<name> function, read from the tree, so that a family makes only the cases
that revision's backend would send to the DSP (no table of revisions)."""

from __future__ import annotations

import functools
import re

from ...source import HEXAGON_DIR
from ..tree import KernelTree


@functools.lru_cache(maxsize=8)
def _host_text(root: str) -> str:
    from pathlib import Path

    path = Path(root) / HEXAGON_DIR / "ggml-hexagon.cpp"
    return path.read_text(errors="replace") if path.is_file() else ""


def supported_body(tree: KernelTree, name: str) -> str:
    """The body of ggml_hexagon_supported_<name> ('' when the tree has no such function)."""
    text = _host_text(str(tree.root))
    m = re.search(r"\bbool\s+ggml_hexagon_supported_" + re.escape(name) + r"\s*\(", text)
    if not m:
        return ""
    end = text.find("\n}\n", m.end())
    return text[m.end(): end if end >= 0 else len(text)]


def requires_contiguous(tree: KernelTree, name: str, operand: str = "src0") -> bool:
    """Whether the host refuses a non-contiguous ``operand`` for this op."""
    return f"ggml_is_contiguous({operand})" in supported_body(tree, name)
