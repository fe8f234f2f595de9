"""How many HTP sessions a run opens, in the deployed revision's vocabulary: GGML_HEXAGON_NDEV
(HTP0..HTP{n-1}) or GGML_HEXAGON_DEVICES (any list, newer revisions)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError
from .revision import Revision

MAX_SESSIONS = 16  # GGML_HEXAGON_MAX_SESSIONS
SESSION_VARS = ("GGML_HEXAGON_NDEV", "GGML_HEXAGON_DEVICES")


def htp_arch_number(arch: str | None) -> int | None:
    m = re.fullmatch(r"v?(\d+)", (arch or "").strip().lower())
    return int(m.group(1)) if m else None


def check_sessions(n: int, *, os_name: str, htp_arch: str | None) -> None:
    if n < 1 or n > MAX_SESSIONS:
        raise UsageError(f"the session count must be 1..{MAX_SESSIONS}, got {n}")
    arch = htp_arch_number(htp_arch)
    if n > 1 and os_name == "android" and arch is not None and arch < 75:
        raise UsageError(f"llama.cpp forces one HTP session on Android below v75 and this device is v{arch}; "
                         f"{n} sessions cannot work", hint="use --ndev 1")


@dataclass
class Sessions:
    env: dict[str, str]
    names: list[str]  # device names as the tools see them (HTP0, HTP0:1, ...)

    @property
    def count(self) -> int:
        return len(self.names)


def _split_devices(spec: str) -> list[str]:
    """Split a GGML_HEXAGON_DEVICES list at top-level commas (``HTP0[0-1],HTP1[2-3]``)."""
    parts, cur, depth = [], "", 0
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def sessions(rev: Revision, *, ndev: int | None, devices: str | None) -> Sessions:
    """The session selection in the deployed revision's vocabulary."""
    if ndev is not None and devices is not None:
        raise UsageError("give --ndev or --devices, not both")
    if devices is not None:
        devices = devices.strip()
        if not devices:
            raise UsageError("--devices is empty")
        if devices.isdigit():
            ndev, devices = int(devices), None
    if devices is None:
        n = ndev or 1
        if n < 1 or n > MAX_SESSIONS:
            raise UsageError(f"--ndev must be 1..{MAX_SESSIONS}, got {n}")
        names = [f"HTP{i}" for i in range(n)]
        if n == 1:
            return Sessions({}, names)  # the backend's default: one session, HTP0
        if rev.devices_var:
            return Sessions({rev.devices_var: str(n)}, names)
        if rev.known and not rev.ndev_var:
            raise UsageError(f"--ndev {n}: the revision reads neither GGML_HEXAGON_NDEV nor "
                             "GGML_HEXAGON_DEVICES, so it opens one session only")
        # NDEV is read by every revision that can open several sessions (newer ones as a fallback).
        return Sessions({"GGML_HEXAGON_NDEV": str(n)}, names)

    parts = _split_devices(devices)
    names = [p.split("[", 1)[0].strip() for p in parts]
    bad = [n for n in names if not re.fullmatch(r"HTP\d+(:\d+)?", n)]
    if bad:
        raise UsageError(f"--devices: {bad[0]!r} is not an HTP device (HTP<n>, HTP<n>:<m>, HTP<n>[<cores>])")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice:
        raise UsageError(f"--devices {devices}: {twice} is listed twice (each session is opened once)")
    if len(names) > MAX_SESSIONS:
        raise UsageError(f"--devices: at most {MAX_SESSIONS} sessions, got {len(names)}")
    plain = all("[" not in p and ":" not in p for p in parts)
    if rev.devices_var:
        return Sessions({rev.devices_var: devices}, names)
    if plain and (rev.ndev_var or not rev.known or names == ["HTP0"]):
        # HTP0..HTP{n-1} is what NDEV=n opens.
        indices = sorted(int(n[3:]) for n in names)
        if indices != list(range(len(indices))):
            raise UsageError(f"--devices {devices}: this revision opens sessions HTP0..HTP<n-1> only "
                             "(GGML_HEXAGON_NDEV)", hint=f"use --ndev {len(indices)}")
        env = {"GGML_HEXAGON_NDEV": str(len(names))} if len(names) > 1 else {}
        return Sessions(env, names)
    if rev.known:
        raise UsageError(f"--devices {devices}: the revision does not read GGML_HEXAGON_DEVICES "
                         "(names like HTP0:1 or HTP0[0-1] need a newer llama.cpp)", hint="use --ndev N")
    return Sessions({"GGML_HEXAGON_DEVICES": devices}, names)
