"""What a revision's Hexagon backend puts in an HTP session (the rules `hexbuild plan` follows),
read from that revision's ggml-hexagon.cpp, never from a table of versions.

* repacked types: the types the backend moves into the session's REPACK buffer. Newer trees
  name them in ``ggml_hexagon_is_repack_type`` (0.3.36: Q4_0 Q4_1 Q8_0 IQ4_NL MXFP4 Q4_K Q5_K
  Q6_K); older ones in the ``case`` labels of ``ggml_backend_hexagon_buffer_set_tensor``'s
  repack switch (0.3.20: Q4_0 Q8_0 IQ4_NL MXFP4; 0.3.28 adds Q4_1).
* row limit: up to the 0.3.28 tree the matmul refuses weights with more rows than
  ``ggml_nrows(src0) > 16 * 1024`` ("typically the lm-head"), which then stay on the CPU; 0 when
  the tree has no such test (the 0.3.36 tree).
* the per-session VA budget knob ``GGML_HEXAGON_VMEM`` (MiB) and its default, where it exists.

The rules travel in the package manifest and the device manifest (``llama_cpp.plan_rules``),
so a plan for a package or a deployed target needs no checkout. Beside them the manifest keeps
how the revision names sessions (``llama_cpp.device_selection``, from hexbuild/source.py:
``GGML_HEXAGON_NDEV``; the 0.3.36 tree also reads ``GGML_HEXAGON_DEVICES``, which the 0.3.20
and 0.3.28 trees do not), which the rules read back from there too.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

BACKEND_FILE = "ggml/src/ggml-hexagon/ggml-hexagon.cpp"
HTP_OPS_HEADER = "ggml/src/ggml-hexagon/htp/htp-ops.h"
VMEM_KNOB = "GGML_HEXAGON_VMEM"

# Patterns, compiled when a tree is read (re caches them): compiled at import they cost a start of
# `serve` or `run`, which import this module for the manifest's rules and read no tree, 4 ms.
_TYPE_RE = r"GGML_TYPE_([A-Z0-9_]+)"
_IS_REPACK_RE = r"(?s)bool\s+ggml_hexagon_is_repack_type\s*\([^)]*\)\s*\{(.*?)\n\}"
_SET_TENSOR_RE = (r"(?s)void\s+ggml_backend_hexagon_buffer_set_tensor\s*\(.*?switch\s*\(\s*tensor->type\s*\)"
                  r"\s*\{(.*?)default\s*:")
_ROW_LIMIT_RE = r"ggml_nrows\s*\(\s*src0\s*\)\s*>\s*([0-9][0-9\s*]*)\)"
_VMEM_DEFAULT_RE = r"#define\s+HTP_OP_MAX_VMEM_DEFAULT\s+\(?\s*(\d+)u?\s*\)?"
_VMEM_MIB_RE = r"str_vmem\s*,\s*NULL\s*,\s*0\s*\)\s*\*\s*MiB"
_GGML_VERSION_RE = r"set\(GGML_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)\)"


@dataclass(frozen=True)
class PlanRules:
    revision: str | None
    repack_types: list[str]
    row_limit: int                     # 0: no limit
    vmem: dict[str, Any] | None = None  # {"env", "unit", "default_bytes"} when the revision has the knob
    origin: str = "assumed"            # source | package | target | assumed
    device_selection: dict[str, str | None] | None = None  # {"ndev_var", "devices_var"}; None: unknown

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def manifest_json(self) -> dict[str, Any]:
        """What the package manifest keeps (where they came from is said when they are read; the
        manifest records the device selection beside them, as ``llama_cpp.device_selection``)."""
        return {k: v for k, v in self.to_json().items() if k not in ("origin", "device_selection")}


# When plan is given no revision: every rule of the newest tree hexbuild knows, as read from it
# (the llama.cpp of the llama-cpp-python 0.3.36 source distribution; tests/test_plan.py reads that
# tree and compares): its repacked types, no row limit, its GGML_HEXAGON_VMEM default (3200 MiB)
# as the budget, and GGML_HEXAGON_DEVICES to name the sessions. The plan says which revision.
NEWEST_KNOWN = "0c1e570 (llama-cpp-python 0.3.36)"
ASSUMED = PlanRules(revision="0c1e570",
                    repack_types=["IQ4_NL", "MXFP4", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q8_0"],
                    row_limit=0, vmem={"env": VMEM_KNOB, "unit": "MiB", "default_bytes": 3200 * 2 ** 20},
                    origin="assumed",
                    device_selection={"ndev_var": "GGML_HEXAGON_NDEV", "devices_var": "GGML_HEXAGON_DEVICES"})


def read_rules(root: Path | str, revision: str | None = None) -> PlanRules | None:
    """The rules of the llama.cpp tree at ``root``; None when it has no Hexagon backend."""
    root = Path(root)
    try:
        text = (root / BACKEND_FILE).read_text("utf-8", "replace")
    except OSError:
        return None
    types = _repack_types(text)
    if not types:
        return None
    m = re.search(_ROW_LIMIT_RE, text)
    row_limit = _product(m[1]) if m else 0
    vmem = None
    if f'getenv("{VMEM_KNOB}")' in text:
        default = None
        try:
            if d := re.search(_VMEM_DEFAULT_RE, (root / HTP_OPS_HEADER).read_text("utf-8", "replace")):
                default = int(d[1])
        except OSError:
            pass
        vmem = {"env": VMEM_KNOB, "unit": "MiB" if re.search(_VMEM_MIB_RE, text) else "bytes", "default_bytes": default}
    return PlanRules(revision=revision or _ggml_version(root), repack_types=types, row_limit=row_limit,
                     vmem=vmem, origin="source")


def rules_from_manifest(llama_cpp: Mapping[str, Any] | None, origin: str) -> PlanRules | None:
    """The rules a package or device manifest carries (``llama_cpp.plan_rules``), if any."""
    data = (llama_cpp or {}).get("plan_rules") if isinstance(llama_cpp, Mapping) else None
    if not isinstance(data, Mapping) or not isinstance(data.get("repack_types"), list):
        return None
    row_limit = data.get("row_limit")
    selection = (llama_cpp or {}).get("device_selection")
    return PlanRules(revision=data.get("revision") or (llama_cpp or {}).get("revision"),
                     repack_types=[str(t) for t in data["repack_types"]],
                     row_limit=row_limit if isinstance(row_limit, int) and row_limit >= 0 else 0,
                     vmem=data.get("vmem") if isinstance(data.get("vmem"), Mapping) else None, origin=origin,
                     device_selection={"ndev_var": selection.get("ndev_var"), "devices_var": selection.get("devices_var")}
                     if isinstance(selection, Mapping) else None)


def _repack_types(text: str) -> list[str]:
    m = re.search(_IS_REPACK_RE, text) or re.search(_SET_TENSOR_RE, text)
    if not m:
        return []
    body = m[1]
    if m.re.pattern == _SET_TENSOR_RE:  # only the case labels: the repack calls name other identifiers
        body = " ".join(re.findall(r"case\s+GGML_TYPE_[A-Z0-9_]+\s*:", body))
    return sorted(set(re.findall(_TYPE_RE, body)))


def _product(expr: str) -> int:
    out = 1
    for part in expr.split("*"):
        if part.strip():
            out *= int(part)
    return out


def _ggml_version(root: Path) -> str | None:
    """A tree without git history (a source distribution) is named by its ggml version."""
    try:
        text = (root / "ggml" / "CMakeLists.txt").read_text("utf-8", "replace")
    except OSError:
        return None
    parts = dict(re.findall(_GGML_VERSION_RE, text))
    if len(parts) != 3:
        return None
    return f"ggml-{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
