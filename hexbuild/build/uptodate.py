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
        h.update(line.encode("utf-8", "surrogateescape"))
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
    path = plan.build_path / RECORD
    rec = {"schema": SCHEMA, "inputs": digest, "package": _package_stamps(plan.package), "result": result}
    tmp = path.with_name(f"{RECORD}.{os.getpid()}.part")
    try:
        tmp.write_text(json.dumps(rec), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # no record: the next build runs in full, nothing worse
        return None
    return path


def forget(plan: Any) -> None:
    """A build that starts may change the build tree and the package: until it succeeds, the
    last record no longer describes them."""
    try:
        (plan.build_path / RECORD).unlink()
    except OSError:
        pass


def _stamp(path: str, rel: str, *, ctime: bool = False) -> str:
    st = os.lstat(path)
    changed = f"\0{st.st_ctime_ns}" if ctime else ""
    return f"{rel}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}{changed}\0{st.st_ino}\n"


def _tree_stamps(plan: Any) -> list[str]:
    root = str(plan.root)
    skip = {plan.build_dir.rstrip("/"), plan.install_dir.rstrip("/"), f"{plan.install_dir}{cmds.STAGING_SUFFIX}",
            f"{plan.install_dir}.hexbuild-old", ".git"}
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
                if not os.path.exists(os.path.join(entry.path, "CMakeCache.txt")):
                    stack.append(rel)
                continue
            try:
                out.append(_stamp(entry.path, rel))
            except OSError:
                out.append(f"{rel}\0gone\n")
    return out


def _package_stamps(package: Path) -> list[str] | None:
    if not package.is_dir():
        return None
    out = []
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                # the package is hexbuild's own output: any change to it at all counts
                out.append(_stamp(path, os.path.relpath(path, package), ctime=True).rstrip("\n"))
            except OSError:
                return None
    return out
