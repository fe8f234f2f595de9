"""``--rollback``: point ``<dest>`` back at the release its manifest records as previous, once
that release is checked against its own manifest (kept.py: a change in place of the live
install reaches it through the hard links the releases share)."""

from __future__ import annotations

import json
import posixpath

from ..errors import DeployFailed
from ..targets.base import Target
from .kept import describe, differing, read_kept
from .layout import MANIFEST, SWAP, Layout, manifest_of
from .options import DeployOptions
from .result import TargetResult


def rollback(target: Target, lay: Layout, res: TargetResult, opts: DeployOptions) -> None:
    here = target.snapshot([lay.dest])[lay.dest]
    kind, link = here.kind, here.link or ""
    if kind != "link":
        raise DeployFailed(f"nothing to roll back on {target.spec}: {lay.dest} is not an install hexbuild made")
    current = posixpath.basename(link.rstrip("/"))
    manifest = manifest_of(target.read_file(posixpath.join(lay.parent, current, MANIFEST)))
    previous = (manifest or {}).get("previous")
    if not previous or not str(previous).startswith(lay.prefix) or "/" in str(previous):
        raise DeployFailed(f"nothing to roll back to on {target.spec}: no previous install is recorded")
    if target.dest_kind(posixpath.join(lay.parent, previous))[0] != "dir":
        raise DeployFailed(f"the previous install {previous} on {target.spec} is gone")
    kept = read_kept(target, lay, previous)  # None: an adopted directory, which has no manifest
    if kept is not None:
        bad = differing(target, posixpath.join(lay.parent, previous), kept)
        if bad:
            raise DeployFailed(f"{describe(previous, bad)}; rolling back would make them live",
                               hint="deploy --verify of the current package repairs the files the releases share; "
                                    "a deploy of that release's own package repairs all of them")
    res.release, res.previous = previous, current
    if opts.dry_run:
        res.plan = {"swap": True, "release": previous, "push": [], "remove": []}
        res.status = "ok"
        return
    if kept is not None and kept.get("previous") != current:
        # the release left behind is kept: record it, so a second --rollback goes forward again
        # and a redeploy that repairs this release in place keeps it
        kept["previous"] = current
        target.write_file(posixpath.join(lay.parent, previous, MANIFEST),
                          (json.dumps(kept, indent=1) + "\n").encode("utf-8"))
    target.sh(SWAP, lay.parent, lay.name, previous, lay.link_tmp, lay.prefix + "legacy", "",
              what="switching back to the previous release")
    res.status = "ok"
