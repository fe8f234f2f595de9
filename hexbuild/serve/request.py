"""What a ``hexbuild serve`` asks for, in a module of its own: the command that detaches a server
builds it and hands it to the supervisor without importing what starts a server (server.py, the
runner, the targets), which the supervisor imports meanwhile (prefork.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_PORT = 8080  # llama-server's own default
READY_TIMEOUT = 600.0  # a large model takes minutes to load and repack


@dataclass
class ServeRequest:
    target: str
    model: str
    package: str | None = None
    port: int = DEFAULT_PORT
    device_port: int | None = None  # default: the local port
    ctx: int | None = None
    ndev: int | None = None
    devices: str | None = None
    knobs: list[tuple[str, str]] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    dest: str = ""
    models_dir: str = ""
    threads: int | str | None = None  # None: the target's default (6 on phones)
    ubatch: int | str = 1024
    allow_cpu_fallback: bool = False
    ready_timeout: float = READY_TIMEOUT
    stream_log: bool = True
    detached: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any], **changes: Any) -> "ServeRequest":
        return cls(**{**raw, "knobs": [tuple(k) for k in raw.get("knobs") or []], **changes})
