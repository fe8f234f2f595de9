"""What the user asked of a deploy: the flags of ``hexbuild deploy`` as one object."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class DeployOptions:
    dest: str | None = None  # None: the target's default (runner.default_dest)
    models: list[Path] = field(default_factory=list)
    models_dir: str | None = None
    ndev: int = 0
    verify: bool = False
    rollback: bool = False
    dry_run: bool = False
    parallel: int = 4
    wait: float = 10.0  # seconds to wait for another deploy's lock on the same destination
    stale_lock: float = 3600.0  # a lock older than this (device clock) is broken
    facts: dict[str, Any] | None = None  # source facts for launch scripts (default: the package's)
    progress: Any = None  # a ui.progress() object, or None
    bundle_runtime: bool = False  # ship the glibc loader and runtime libraries under runtime/
    sysroot: str = ""  # where they come from ("" : the open toolchain image's runtime)
    runtime_files: dict[str, Any] = field(default_factory=dict)  # filled once per deploy (runtime.bundle)
    runtime: dict[str, Any] | None = None  # the deployed manifest's ``runtime`` record
