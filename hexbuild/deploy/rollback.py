"""``--rollback``: point ``<dest>`` back at the release its manifest records as previous."""

from __future__ import annotations

import posixpath

from ..errors import DeployFailed
from ..targets.base import Target
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
    res.release, res.previous = previous, current
    if opts.dry_run:
        res.plan = {"swap": True, "release": previous, "push": [], "remove": []}
        res.status = "ok"
        return
    target.sh(SWAP, lay.parent, lay.name, previous, lay.link_tmp, lay.prefix + "legacy", "",
              what="switching back to the previous release")
    res.status = "ok"
