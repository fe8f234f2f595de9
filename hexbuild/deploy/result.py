"""What a deploy did on one target (TargetResult, the --json record), and the command's verdict
over all of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ..errors import DeployFailed


@dataclass
class TargetResult:
    target: str
    serial: str | None = None
    soc: str | None = None
    htp_arch: str | None = None
    files_total: int = 0
    files_pushed: int = 0
    files_removed: int = 0
    bytes_total: int = 0
    bytes_pushed: int = 0  # file bytes sent (models and repairs included)
    wire_bytes: int = 0  # what the link carried for them: less than bytes_pushed where compressed
    files_compressed: int = 0  # package files sent as zstd (adb sync v2, an ssh board's zstd -d); the rest raw
    link_mb_s: float | None = None  # the link's raw rate, when the target measured it before a large push
    duration_s: float = 0.0
    push_s: float = 0.0  # of duration_s, sending the package's files: the link's share (the rest is the tool's)
    status: str = "failed"  # ok | failed | unchanged
    error: str | None = None
    hint: str | None = None
    dest: str | None = None
    release: str | None = None
    previous: str | None = None
    verified: int | None = None
    repaired: int | None = None
    lock_wait_s: float = 0.0  # time spent waiting for another deploy to the same destination
    models: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None  # with --dry-run: what would be pushed and removed
    glibc: dict[str, Any] | None = None  # {"target": "2.31", "package": "2.36"} on Linux targets
    warnings: list[str] = field(default_factory=list)  # e.g. no skel for this device's HTP arch
    # with --verify: the release kept for rollback, {release, repaired: [...], differs: [...]}
    kept_release: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def raise_for_failures(results: Sequence[TargetResult]) -> None:
    failed = [r for r in results if r.status == "failed"]
    if failed:
        names = "; ".join(f"{r.serial or r.target}: {r.error}" for r in failed)
        raise DeployFailed(f"deploy failed on {len(failed)} of {len(results)} target(s): {names}",
                           hint=failed[0].hint)
