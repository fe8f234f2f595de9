"""``--verify``: re-hash the live install on the device and repair what drifted."""

from __future__ import annotations

import posixpath

from ..errors import DeployFailed
from ..targets.base import ByteProgress, Target
from .layout import Layout, user_files
from .package import PackageFile
from .plan import matches
from .push import repair
from .result import TargetResult


def verify_install(target: Target, lay: Layout, want: dict[str, PackageFile], progress: ByteProgress,
                   res: TargetResult, *, checked_live: bool, repaired: set[str]) -> None:
    """Re-hash the live install on the device; repair what drifted. ``checked_live``: the live
    release was hashed while planning and its drift already repaired — re-check only that."""
    root = posixpath.join(lay.parent, res.release) if res.release else lay.dest
    res.verified = len(want)
    if checked_live:
        if repaired:
            digests = target.hash_files(root, sorted(repaired))
            still = [r for r in sorted(repaired) if digests.get(r) != want[r].sha256]
            if still:
                raise DeployFailed(f"{len(still)} file(s) still differ after repair on {target.spec}: {', '.join(still[:5])}")
        res.repaired = res.repaired or 0
        return
    files = user_files(target.list_files(root, hashes=True))
    bad = {rel for rel, w in want.items() if not matches(files.get(rel), w)}
    if bad:
        repair(target, root, bad, want, progress, res)
        again = user_files(target.list_files(root, hashes=True))
        still = sorted(rel for rel in bad if not matches(again.get(rel), want[rel]))
        if still:
            raise DeployFailed(f"{len(still)} file(s) still differ after repair on {target.spec}: {', '.join(still[:5])}")
    res.repaired = res.repaired or 0
