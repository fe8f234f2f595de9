"""GGML_HEXAGON_* knobs: ``--hex-<knob> VALUE`` flags checked against what the revision reads."""

from __future__ import annotations

import re
from typing import Sequence

from ..errors import UsageError
from .htp_sessions import SESSION_VARS
from .revision import Revision

# Knobs whose output the tools only print with -v (run.py and the adb scripts add it).
VERBOSE_KNOBS = ("GGML_HEXAGON_VERBOSE", "GGML_HEXAGON_PROFILE", "GGML_HEXAGON_OPTRACE")
# --hex-<knob> names that are not GGML_HEXAGON_<KNOB>: the adb scripts' HMX variable.
KNOB_ALIASES = {"hmx": "GGML_HEXAGON_USE_HMX"}
_KNOB_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def knob_env(knobs: Sequence[tuple[str, str]], rev: Revision) -> dict[str, str]:
    """``--hex-nhvx 4`` → GGML_HEXAGON_NHVX=4, checked against what the revision reads."""
    valid = sorted(v for v in (rev.env_vars or []) if v not in SESSION_VARS)
    out: dict[str, str] = {}
    for name, value in knobs:
        key = name.lower()
        if not _KNOB_RE.match(key):
            raise UsageError(f"--hex-{name}: not a knob name")
        if key in ("ndev", "devices"):
            raise UsageError(f"--hex-{key} is spelled --{key}")
        var = KNOB_ALIASES.get(key, "GGML_HEXAGON_" + key.upper().replace("-", "_"))
        if rev.env_vars is not None and var not in valid:
            knob_names = ", ".join("--hex-" + v[len("GGML_HEXAGON_"):].lower().replace("_", "-") for v in valid)
            raise UsageError(f"--hex-{key}: the deployed revision does not read {var}; valid: {knob_names}")
        out[var] = value
    return out
