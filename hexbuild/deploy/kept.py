"""The release kept for ``--rollback``, checked against its own manifest.

Releases share unchanged files by hard link, so a library copied over the live install in
place (``cp``/``scp`` write through the existing inode) changes the kept release too: after
``--verify`` repaired the live one, a rollback would make the changed bytes live. So the
release a rollback returns to is hashed on the device first and a mismatch refuses the switch,
naming the files; ``--verify`` hashes the kept release as well and repairs it from the package
being deployed wherever that package has the bytes its manifest records (the files the two
releases share), naming the ones it cannot.

Why refuse rather than repair on rollback: ``--rollback`` runs without a package, and the only
copies on the device are the very hard links that were changed (or, after ``--verify``, the
live release's files, which help only for files the releases share). A rollback that never
makes unknown bytes live is worth one more command.
"""

from __future__ import annotations

import posixpath
from typing import Any, Callable

from ..targets.base import RemoteFile, Target
from ..ui import ui
from .layout import MANIFEST, Layout, manifest_of, user_files
from .package import PackageFile
from .push import repair
from .result import TargetResult


def recorded_files(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in manifest.get("files", []) if isinstance(f, dict) and isinstance(f.get("path"), str)}


def _matches(f: RemoteFile | None, rec: dict[str, Any]) -> bool:
    try:
        mode = int(str(rec.get("mode", "")), 8)
    except ValueError:
        mode = None
    return (f is not None and f.size == int(rec.get("size", -1)) and f.sha256 == rec.get("sha256")
            and (mode is None or (f.mode & 0o7777) == mode))


def read_kept(target: Target, lay: Layout, name: str | None) -> dict[str, Any] | None:
    """The kept release's manifest; None when there is none (an adopted directory, or no release)."""
    if not name or not name.startswith(lay.prefix) or "/" in name:
        return None
    return manifest_of(target.read_file(posixpath.join(lay.parent, name, MANIFEST)))


def differing(target: Target, root: str, manifest: dict[str, Any]) -> list[str]:
    """The files of the release at ``root`` (hashed on the device) that are not what its
    manifest records: changed, resized, re-moded or missing."""
    files = user_files(target.list_files(root, hashes=True))
    return sorted(rel for rel, rec in recorded_files(manifest).items() if not _matches(files.get(rel), rec))


def describe(name: str, bad: list[str]) -> str:
    shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    return f"the release kept for rollback ({name}) is not what was deployed: {len(bad)} file(s) changed since ({shown})"


def check_kept(target: Target, lay: Layout, name: str | None, want: dict[str, PackageFile],
               progress: Callable[[int], None], res: TargetResult) -> None:
    """``--verify``'s look at the kept release: hash it, repair what the package has the bytes
    for (by sha256, any path), record the rest in ``res.kept_release`` and as a warning."""
    manifest = read_kept(target, lay, name)
    if manifest is None:
        return
    root = posixpath.join(lay.parent, name)
    bad = differing(target, root, manifest)
    record = recorded_files(manifest)
    by_hash = {(f.sha256, f.size): f for f in want.values()}
    fixable: dict[str, PackageFile] = {}
    for rel in bad:
        rec = record[rel]
        src = by_hash.get((rec.get("sha256"), int(rec.get("size", -1))))
        if src is not None:
            fixable[rel] = PackageFile(rel, src.size, src.sha256, int(str(rec.get("mode", "644")), 8), src.local)
    if fixable:
        # under temporary names, renamed over: the kept release's own links to the live one break,
        # and nothing is written through a shared inode
        repair(target, root, set(fixable), fixable, progress, res, counted=False)
        again = user_files(target.list_files(root, hashes=True))
        fixed = sorted(rel for rel in fixable if _matches(again.get(rel), record[rel]))
    else:
        fixed = []
    left = [rel for rel in bad if rel not in fixed]
    res.kept_release = {"release": name, "repaired": fixed, "differs": left}
    if left:
        note = describe(name, left) + "; --rollback refuses it until a deploy of its own package repairs it"
        res.warnings.append(note)
        ui.warn(f"{target.spec}: {note}")
