"""Carrying out a plan: stage the new release (links, device-side copies, pushes, modes), write
its manifest last, then switch ``<dest>`` to it with one rename — or, for a release already
live, repair it in place."""

from __future__ import annotations

import json
import posixpath
import time
from typing import Sequence

from .. import __version__
from ..targets.base import ByteProgress, Target
from ..targets.posix import RENAME_INTO_PLACE, batches
from .beside import Beside
from .checkpoints import checkpoint
from .layout import MANIFEST, SWAP, Layout, Live
from .options import DeployOptions
from .package import Package, PackageFile
from .plan import Plan
from .push import repair, send
from .result import TargetResult
from .scripts import SCRIPTS_DIR

_STAGE = r'''set -e
R=$1; L=$2; shift 2
cd "$R"
while [ $# -gt 0 ]; do
  case $1 in
    rm) rm -f "$2";;
    cp) cp "$L/$2" "$2";;
    *) echo "unknown staging step $1" >&2; exit 2;;
  esac
  shift 2
done'''


def device_manifest(want: dict[str, PackageFile], pkg: Package, rid: str, previous: str | None,
                    opts: DeployOptions) -> bytes:
    doc = {
        "schema": 1,
        "hexbuild_version": __version__,
        "release": rid,
        "previous": previous,
        "deployed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **{k: v for k, v in pkg.meta.items() if k not in ("schema", "hexbuild_version", "files")},
        "ndev": opts.ndev or None,
        **({"runtime": opts.runtime} if opts.runtime_files and opts.runtime else {}),
        "scripts": sorted(r[len(SCRIPTS_DIR) + 1:] for r in want if r.startswith(SCRIPTS_DIR + "/")),
        "files": [{"path": r, "size": want[r].size, "sha256": want[r].sha256, "mode": f"{want[r].mode:04o}"}
                  for r in sorted(want)],
    }
    return (json.dumps(doc, indent=1, sort_keys=False) + "\n").encode("utf-8")


def apply_plan(target: Target, lay: Layout, live: Live, plan: Plan, want: dict[str, PackageFile], pkg: Package,
               opts: DeployOptions, progress: ByteProgress, res: TargetResult,
               last: Sequence[tuple[str, list[str]]] = ()) -> bool:
    """Returns whether the switch ran ``last`` (steps after it in the same device call)."""
    rid = plan.release_dir.rsplit("-", 1)[-1]
    if plan.in_place:
        if plan.junk:  # temporary files of a repair that was cut off
            target.remove_in(plan.release_dir, sorted(plan.junk))
        if plan.repair:
            repair(target, plan.release_dir, plan.repair, want, progress, res)
        return False
    R = plan.release_dir
    checkpoint(target, "stage")
    # mkdir and ln run as commands of the staging call itself, not each in an sh of its own: a
    # phone's mkdir, ln and sh are each a process, and the sh per directory made the staging of
    # a 59-file release 22 processes (73-78 ms on the emulated phone, longer than pushing 4 MB)
    dirs = sorted({posixpath.dirname(r) for r in plan.push | plan.link | plan.copy} - {""} | {".hexbuild"})
    steps: list[tuple[str | None, list[str]]] = [
        (None, ["mkdir", "-p", *chunk]) for chunk in batches([R, *(posixpath.join(R, d) for d in dirs)])]
    ops: list[str] = []
    if plan.staged_manifest:
        ops += ["rm", MANIFEST]  # the release is being changed: no longer complete
    for rel in sorted(plan.junk):
        ops += ["rm", rel]
    for rel in sorted(plan.copy):
        ops += ["cp", rel]
    steps += [(_STAGE, [R, live.root or R, *chunk]) for chunk in batches(ops, group=2)]
    by_dir: dict[str, list[str]] = {}
    for rel in sorted(plan.link):
        by_dir.setdefault(posixpath.dirname(rel), []).append(posixpath.join(live.root or R, rel))
    for d, sources in sorted(by_dir.items()):
        # the unchanged files of one directory, hard-linked from the live release by one ln
        steps += [(None, ["ln", "-f", *chunk, posixpath.join(R, d)]) for chunk in batches(sources)]
    # the pushed files' modes and twin links are set in the switch's call: a release is complete
    # only once its manifest is renamed into place there, and a cut-off run's next plan finds any
    # mode or link still missing (plan.fix_mode, plan.push)
    finish: list[tuple[str, list[str]]] = []
    if plan.push and target.caps.push_makes_dirs and not (plan.staged_manifest or plan.junk):
        # a new release directory: its links and copies never touch a pushed name, so the staging
        # call runs beside the push (a device round trip less before the first byte)
        with Beside(target.sh_chain, steps, what="staging the new release"):
            send(target, R, sorted(plan.push), want, progress, res, temp=False, finish=finish)
        checkpoint(target, "linked")
    else:
        target.sh_chain(steps, what="staging the new release")
        checkpoint(target, "linked")
        if plan.push:
            send(target, R, sorted(plan.push), want, progress, res, temp=False, finish=finish)
    if plan.fix_mode:
        by_mode: dict[int, list[str]] = {}
        for rel in sorted(plan.fix_mode):
            by_mode.setdefault(want[rel].mode, []).append(rel)
        finish += target.chmod_steps(R, by_mode)
    checkpoint(target, "pushed")
    # the manifest, written last, makes the release complete: it is renamed into place in the same
    # device call as the switch (a deploy cut before that call finds a release to finish)
    manifest = posixpath.join(R, MANIFEST)
    staged = target.stage_file(manifest, device_manifest(want, pkg, rid, plan.previous, opts))
    checkpoint(target, "manifest")
    legacy = posixpath.basename(plan.previous) if live.kind == "dir" and plan.previous else lay.prefix + "legacy"
    keep = [lay.prefix + rid] + ([plan.previous] if plan.previous else [])
    target.sh_chain([*finish, (RENAME_INTO_PLACE, [staged, manifest]),
                     (SWAP, [lay.parent, lay.name, lay.prefix + rid, lay.link_tmp, legacy, lay.prefix, *keep]),
                     *last],
                    what="switching to the new release")
    checkpoint(target, "swapped")
    return True
