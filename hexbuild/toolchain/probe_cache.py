"""What a local Docker engine said about itself, remembered between runs: its /info answer
(rootless or not, CPUs, OS) is the slowest part of connecting, and it cannot change while the
same daemon runs. The key is the daemon's socket file, whose inode and ctime change whenever
the daemon (re)starts and recreates it, together with its /version answer, which a connection
asks for anyway. Only unix:// engines are remembered; the file is the user's own (0600)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..paths import atomic_write, cache_root

MAX_ENTRIES = 32


def _file() -> Path:
    return cache_root() / "engines.json"


def socket_key(host: str) -> str | None:
    """The daemon instance behind a unix:// host, or None for any other host."""
    u = urlparse(host)
    if u.scheme != "unix":
        return None
    try:
        st = os.stat(u.path)
    except OSError:
        return None
    return f"{u.path}:{st.st_ino}:{st.st_ctime_ns}"


def version_digest(version: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(version, sort_keys=True, default=str).encode()).hexdigest()


def _load() -> dict[str, Any]:
    try:
        data = json.loads(_file().read_text("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def lookup(host: str) -> dict[str, Any] | None:
    """{"api_version", "version_digest", "engine"} remembered for this daemon, if any."""
    key = socket_key(host)
    hit = _load().get(key) if key else None
    return hit if isinstance(hit, dict) and isinstance(hit.get("engine"), dict) else None


def remember(host: str, version: dict[str, Any], engine: dict[str, Any]) -> None:
    key = socket_key(host)
    if key is None:
        return
    data = {k: v for k, v in _load().items() if not k.startswith(key.split(":", 1)[0] + ":")}
    data[key] = {"api_version": engine.get("api_version"), "version_digest": version_digest(version),
                 "engine": engine}
    if len(data) > MAX_ENTRIES:
        data = dict(list(data.items())[-MAX_ENTRIES:])
    try:
        atomic_write(_file(), json.dumps(data))
    except OSError:
        pass  # a cache that cannot be written only costs time
