"""An up-to-date build: when nothing that goes into a build has changed since the last one that
succeeded, the package in place is that build's output, and `hexbuild build` says so instead of
starting the container to find out (CMake's configure check and ninja's no-op scan are most of
what an up-to-date build costs), as make and cargo do. `--force` builds anyway.

What goes in, hashed into one digest: every file of the checkout (path, mode, size, mtime and
inode, as make and ccache's direct mode judge a file; not ctime, which CMake's install of an
unchanged file into another prefix in the tree moves on every run) except the build trees inside it
(any directory holding a CMakeCache.txt), the package, its staging and .git; the revision
(git describe --dirty: the commit llama.cpp's build info embeds); the plan; the container's
image ID, command, user, mounts and environment (passthrough values are hashed, never stored);
and hexbuild's own version. The record lives in the build directory (``.hexbuild-build.json``,
beside CMakeCache.txt), so a removed build directory means a full build; it also holds the
package's files as the build left them, so a package changed since (a file added, removed or
rewritten) is built again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .. import __version__
from ..toolchain import commands as cmds

RECORD = ".hexbuild-build.json"
SCHEMA = 1


def inputs_digest(plan: Any, spec: Any, image_id: str) -> str:
    h = hashlib.sha256()
    described = {"schema": SCHEMA, "hexbuild": __version__, "revision": plan.facts.revision,
                 "plan": plan.to_json(), "image_id": image_id, "image": spec.image, "command": spec.command,
                 "user": spec.user, "mounts": [m.to_json() for m in spec.mounts], "env": spec.environment,
                 "working_dir": spec.working_dir, "network": spec.network, "platform": spec.platform}
    h.update(json.dumps(described, sort_keys=True, default=str).encode())
    for line in _tree_stamps(plan):
        h.update(f"{line}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def lookup(plan: Any, digest: str) -> dict[str, Any] | None:
    """The recorded result of the last build when ``digest`` names the same inputs and the
    package is still as that build left it; None otherwise."""
    try:
        rec = json.loads((plan.build_path / RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA or rec.get("inputs") != digest:
        return None
    if rec.get("package") != _package_stamps(plan.package):
        return None
    result = rec.get("result")
    return result if isinstance(result, dict) else None


def remember(plan: Any, digest: str, result: dict[str, Any]) -> Path | None:
    """Record a successful build (after its package and manifest are in place)."""
    from ..paths import atomic_write

    path = plan.build_path / RECORD
    rec = {"schema": SCHEMA, "inputs": digest, "package": _package_stamps(plan.package), "result": result}
    try:
        atomic_write(path, json.dumps(rec), mode=0o644)
    except OSError:
        return None  # no record: the next build runs in full, nothing worse
    return path


def forget(plan: Any) -> None:
    """A build that starts may change the build tree and the package: until it succeeds, the
    last record no longer describes them."""
    try:
        (plan.build_path / RECORD).unlink()
    except OSError:
        pass


def _tree_stamps(plan: Any) -> list[str]:
    skip = {plan.build_dir.rstrip("/"), plan.install_dir.rstrip("/"), f"{plan.install_dir}{cmds.STAGING_SUFFIX}",
            f"{plan.install_dir}.hexbuild-old", ".git"}
    return _stamps(str(plan.root), skip=skip, build_trees=False)


def _package_stamps(package: Path) -> list[str] | None:
    # the package is hexbuild's own output: any change to it at all counts, ctime included
    return _stamps(str(package), ctime=True) if package.is_dir() else None


def _stamps(root: str, *, skip: set[str] = frozenset(), build_trees: bool = True, ctime: bool = False) -> list[str]:
    """One line per file (symlinks as themselves) under ``root``, in a fixed order: its path,
    mode, size, mtime (ctime) and inode. ``build_trees=False`` leaves out every directory that
    holds a CMakeCache.txt."""
    out: list[str] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel in skip:
                continue
            if entry.is_dir(follow_symlinks=False):
                if build_trees or not os.path.exists(os.path.join(entry.path, "CMakeCache.txt")):
                    stack.append(rel)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                out.append(f"{rel}\0gone")
                continue
            changed = f"\0{st.st_ctime_ns}" if ctime else ""
            out.append(f"{rel}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}{changed}\0{st.st_ino}")
    return out
