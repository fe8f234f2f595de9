"""The diff: what the new release needs, file by file, against the live install and any
half-staged release — kept, hard-linked, copied on the device, pushed, or repaired in place."""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

from ..targets.base import RemoteFile, Target
from .layout import MANIFEST, Layout, Live, user_files
from .models import TEMP_NAME
from .options import DeployOptions
from .package import PackageFile


@dataclass
class Plan:
    release_dir: str
    in_place: bool  # the release is already live: repair only
    keep: set[str] = field(default_factory=set)  # already right in the staged release
    link: set[str] = field(default_factory=set)  # hard-linked from the live release
    copy: set[str] = field(default_factory=set)  # copied on the device from the live release
    push: set[str] = field(default_factory=set)  # sent over the wire
    repair: set[str] = field(default_factory=set)  # in-place: replaced one by one, atomically
    fix_mode: set[str] = field(default_factory=set)  # kept, but with the wrong mode
    junk: set[str] = field(default_factory=set)  # in the staged release, not wanted
    stale: set[str] = field(default_factory=set)  # in the live release, not in the new one
    staged_manifest: bool = False
    swap: bool = False
    previous: str | None = None
    push_bytes: int = 0
    sizes: dict[str, int] = field(default_factory=dict)  # of the files copied on the device


def matches(f: RemoteFile | None, want: PackageFile, *, need_hash: bool = True, ignore_mode: bool = False) -> bool:
    if f is None or f.size != want.size or (not ignore_mode and (f.mode & 0o7777) != want.mode):
        return False
    return not need_hash or f.sha256 == want.sha256


def plan_release(target: Target, lay: Layout, live: Live, staged_snap: Any, want: dict[str, PackageFile], rid: str,
                 opts: DeployOptions) -> Plan:
    release_name = lay.prefix + rid
    if live.release == release_name and live.manifest is not None and live.manifest.get("release") == rid:
        plan = Plan(posixpath.join(lay.parent, release_name), in_place=True, previous=live.manifest.get("previous"))
        plan.junk = {rel for rel in live.files if rel not in want and TEMP_NAME.match(posixpath.basename(rel))}
        for rel, w in want.items():
            f = live.files.get(rel)
            if not matches(f, w, need_hash=opts.verify):
                plan.repair.add(rel)
        plan.push_bytes = sum(want[r].size for r in plan.repair)
        return plan

    plan = Plan(lay.release(rid), in_place=False, swap=True, previous=live.release)
    if live.kind == "dir":
        plan.previous = lay.prefix + "legacy-" + time.strftime("%Y%m%d%H%M%S")
    staged: dict[str, RemoteFile] = {}
    if staged_snap.kind == "dir":
        listing = staged_snap.files
        plan.staged_manifest = MANIFEST in listing
        staged = user_files(listing)
        # a half-staged release from a cut-off run: only what still hashes right is kept
        candidates = [r for r, f in staged.items() if r in want and f.size == want[r].size]
        digests = target.hash_files(plan.release_dir, candidates) if candidates else {}
        for rel, f in staged.items():
            f.sha256 = digests.get(rel)
    for rel, w in want.items():
        f = staged.get(rel)
        if f is not None and f.size == w.size and f.sha256 == w.sha256:
            plan.keep.add(rel)
            if (f.mode & 0o7777) != w.mode:
                plan.fix_mode.add(rel)  # pushed before a cut-off run reached its chmod
        elif matches(live.files.get(rel), w):
            plan.link.add(rel)
        elif matches(live.files.get(rel), w, ignore_mode=True):
            plan.copy.add(rel)  # same bytes, other mode: copied on the device, never re-sent
            plan.fix_mode.add(rel)
        else:
            plan.push.add(rel)
    plan.junk = set(staged) - plan.keep
    plan.stale = set(live.files) - set(want)
    plan.push_bytes = sum(want[r].size for r in plan.push)
    plan.sizes = {r: want[r].size for r in plan.copy}
    return plan
