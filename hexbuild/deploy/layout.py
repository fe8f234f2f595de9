"""The layout on the target: release directories beside ``<dest>``, the symlink that makes one of
them live, and the one-rename switch between them (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import DeployFailed
from ..targets.base import RemoteFile, Target
from ..targets.snapshot import Snapshot, parse_snapshot, snapshot_step
from .package import PackageFile

MANIFEST = ".hexbuild/manifest.json"


@dataclass
class Layout:
    dest: str

    @property
    def parent(self) -> str:
        return posixpath.dirname(self.dest)

    @property
    def name(self) -> str:
        return posixpath.basename(self.dest)

    @property
    def prefix(self) -> str:
        return f".{self.name}.hexbuild-"

    def release(self, rid: str) -> str:
        return posixpath.join(self.parent, self.prefix + rid)

    @property
    def link_tmp(self) -> str:
        return self.prefix + "link"


@dataclass
class Live:
    kind: str  # missing | link | dir
    release: str | None  # directory name (in parent) of the live release
    root: str | None  # real path of the live tree
    manifest: dict[str, Any] | None
    files: dict[str, RemoteFile]


def release_id(files: dict[str, PackageFile], meta: dict[str, Any] | None = None) -> str:
    """The release's content: its files and the package's build metadata (two builds of other
    revisions with the same bytes are two releases, or the device's manifest would keep naming
    the first one)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        f = files[rel]
        h.update(f"{rel}\0{f.sha256}\0{f.mode:o}\n".encode("utf-8"))
    if meta:
        h.update(json.dumps(meta, sort_keys=True, default=str).encode("utf-8"))
    return h.hexdigest()[:16]


def manifest_of(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None


def user_files(listing: dict[str, RemoteFile]) -> dict[str, RemoteFile]:
    return {k: v for k, v in listing.items() if not k.startswith(".hexbuild/")}


@dataclass
class Survey:
    """What the device holds at ``<dest>``, read before the release's name is known (it waits for
    the package's hashes): the install's files and manifest, and the release directories' names."""

    snap: dict[str, Any]
    manifest: bytes | None = None  # of the live tree, when there is one


def survey(target: Target, lay: Layout, take: Callable[..., bytes | None] | None = None, *,
           once: bool = False) -> Survey | None:
    """One device call that needs no hash, the lock's own when there is one (``take``: its
    ``DeployLock.acquire``): the listing of ``<dest>`` with the names of the release directories
    beside it, and the live tree's manifest (read through ``<dest>``: under the lock no deploy
    moves the link in between). ``once``: the lock is tried once, and None says another deploy
    holds it."""
    from ..targets.tools import INSTALLED_SCRIPT, split_installed

    steps = [snapshot_step([lay.dest], like=posixpath.join(lay.parent, lay.prefix)), (INSTALLED_SCRIPT, [lay.dest])]
    what, timeout = f"inspecting {lay.dest}", target.default_timeout * 4
    raw = take(steps, what, timeout=timeout, once=once) if take is not None else \
        target.sh_chain(steps, what=what, timeout=timeout).stdout
    if raw is None:
        return None
    listing, manifest = split_installed(raw)
    snap = parse_snapshot(listing)
    snap.setdefault(lay.dest, Snapshot("missing"))
    here = snap[lay.dest]
    return Survey(snap, manifest if here.kind != "file" and here.is_dir else None)


def _live_root(target: Target, lay: Layout, here: Any) -> tuple[str | None, str]:
    """(the live release's directory name, or None for a plain directory; the live tree's path)
    of ``<dest>`` as a snapshot found it: a link must be one hexbuild made."""
    if here.kind != "link":
        return None, lay.dest
    release = managed_release(target, lay, here.link or "")
    return release, posixpath.join(lay.parent, release)


def read_live(target: Target, lay: Layout, rid: str, *, verify: bool, early: Survey) -> tuple[Live, Any]:
    """The live install (as the survey ``early`` read it) and the staged release ``rid`` (from an
    earlier, cut-off run: read in one more device call when the survey named it); hashes only
    where nothing else can tell them."""
    staging = lay.release(rid)
    snap = dict(early.snap)
    if staging in snap and not snap[staging].listed:  # a cut-off run's: its files are read now
        snap.update(target.snapshot([staging]))
    snap.setdefault(staging, Snapshot("missing"))
    here, staged = snap[lay.dest], snap[staging]
    if here.kind == "file":
        raise DeployFailed(f"{lay.dest} on {target.spec} is a file, not an install directory",
                           hint="remove it or choose another --dest")
    if here.kind == "missing" or not here.is_dir:
        if here.kind == "link":
            managed_release(target, lay, here.link or "")  # a dangling link must still be ours
        return Live("missing", None, None, None, {}), staged
    release, root = _live_root(target, lay, here)
    raw = early.manifest  # read in the survey's own call
    manifest = manifest_of(raw)
    files = user_files(here.files)
    # hash on the device only what cannot be known otherwise: an install without a manifest
    # (adopted), or the live release itself under --verify
    if manifest is None or (verify and manifest.get("release") == rid):
        for rel, digest in target.hash_tree(root).items():
            if rel in files:
                files[rel].sha256 = digest
    else:
        recorded = {f["path"]: f for f in manifest["files"] if isinstance(f, dict) and "path" in f}
        for rel, f in files.items():
            rec = recorded.get(rel)
            # the recorded hash stands for the file only while its size still matches
            if rec and int(rec.get("size", -1)) == f.size:
                f.sha256 = rec.get("sha256")
    return Live(here.kind, release, root, manifest, files), staged


def managed_release(target: Target, lay: Layout, link: str) -> str:
    name = posixpath.basename(link.rstrip("/"))
    where = posixpath.dirname(link.rstrip("/"))
    if where not in ("", lay.parent) or not name.startswith(lay.prefix):
        raise DeployFailed(f"{lay.dest} on {target.spec} is a symlink hexbuild did not make (-> {link})",
                           hint="remove the symlink or choose another --dest")
    return name


# The switch. `mv -fT NEW CUR` is not portable: toybox (Android's mv) stats CUR through the
# link, finds a directory and refuses ("mv: 'llama.cpp' is a directory"); without -T every mv
# moves NEW *into* the directory CUR leads to. What every mv does alike is moving a file into a
# directory operand: the new link is made as "$tmp/$name" and moved into "." — one rename(2)
# of "$tmp/$name" to "./$name" on GNU, toybox and busybox, which replaces the old link itself.
SWAP = r'''set -e
cd "$1"
name=$2; rel=$3; tmp=$4; legacy=$5; prefix=$6
shift 6
rm -rf "$tmp"
mkdir "$tmp"
ln -s "$rel" "$tmp/$name"
if [ -d "$name" ] && [ ! -L "$name" ]; then mv "$name" "$legacy"; fi
mv -f "$tmp/$name" .
[ -L "$name" ] && [ ! -e "$tmp/$name" ] || { echo "the link was not replaced" >&2; exit 1; }
rmdir "$tmp"
[ -n "$prefix" ] || exit 0
# the switch is done: every release but the kept ones ("$@") goes. Each is renamed into the trash
# (beside the lock, outside "$prefix"*: no plan ever reuses it), and the trash is emptied by a
# process in a session of its own that this call does not wait for: removing a release of a few
# hundred MB took the switch's call 30-50 ms here, and longer on a phone's flash
trash=${prefix%-}.trash
for d in "$prefix"*; do
  [ -e "$d" ] || [ -L "$d" ] || continue
  keep=0
  for k in "$@"; do [ "$d" = "$k" ] && keep=1; done
  [ $keep = 1 ] && continue
  { mkdir -p "$trash" && mv "$d" "$trash/$d.$$"; } 2>/dev/null || rm -rf "$d"
done
[ -d "$trash" ] || exit 0
if command -v setsid >/dev/null 2>&1; then
  setsid rm -rf "$trash" </dev/null >/dev/null 2>&1 &
else
  rm -rf "$trash"
fi'''
