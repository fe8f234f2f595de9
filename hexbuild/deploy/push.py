"""Sending package files over the wire: into a release being staged, or — to repair the live
release — under temporary names renamed over the old files."""

from __future__ import annotations

import posixpath
import time
from pathlib import Path
from typing import Sequence

from ..targets.base import ByteProgress, Sent, Target
from ..targets.posix import batches
from .checkpoints import checkpoint
from .package import PackageFile
from .result import TargetResult

_RENAME_PAIRS = r'''set -e
cd "$1"
shift
while [ $# -gt 0 ]; do mv -f "$1" "$2"; shift 2; done'''


def send(target: Target, root: str, rels: Sequence[str], want: dict[str, PackageFile],
         progress: ByteProgress, res: TargetResult, *, temp: bool,
         finish: list[tuple[str, list[str]]] | None = None) -> dict[str, str]:
    """Push ``rels`` under ``root`` (to temporary names when ``temp``); {rel: remote name}. The
    files' modes and twin links are set in one device call after the push, or, given ``finish``,
    added to it as steps for the caller's next call (a release's switch)."""
    sent: dict[str, str] = {}
    # a library and its symlinked names in the package (libllama.so -> .so.0 -> .so.0.5.0) are
    # one file: it travels once, and the other names become hard links to it on the device
    first: dict[Path, str] = {}
    twins: list[tuple[str, str]] = []
    for rel in sorted(rels):
        key = want[rel].local.resolve()
        if not temp and key in first:
            twins.append((first[key], rel))
        else:
            first.setdefault(key, rel)
    travel = sorted(set(rels) - {rel for _, rel in twins})
    target.expect_transfer([want[rel].local for rel in travel])
    names = [target.temp_name(posixpath.join(root, rel)) if temp else posixpath.join(root, rel) for rel in travel]

    def on_sent(i: int, how: Sent | None) -> None:  # a target may send in another order
        sent[travel[i]] = names[i]
        res.files_pushed += 1
        if how is not None and how.compressed:
            res.files_compressed += 1
        checkpoint(target, f"pushed:{len(sent)}")

    t0 = time.monotonic()
    try:
        target.send_files([(want[rel].local, name, want[rel].mode) for rel, name in zip(travel, names)], progress,
                          on_sent)
    finally:
        res.push_s = round(res.push_s + time.monotonic() - t0, 3)
    by_mode: dict[int, list[str]] = {}
    for rel, name in sent.items():  # adbd makes an executable 0777 whatever SEND's mode says
        by_mode.setdefault(want[rel].mode, []).append(posixpath.relpath(name, root))
    # their directories hold the first names; one device call with the modes
    steps = [*target.chmod_steps(root, by_mode), *(target.link_steps(root, root, twins) if twins else ())]
    if finish is None:
        target.sh_chain(steps, what="setting file modes")
    else:
        finish += steps
    for src, rel in twins:
        sent[rel] = posixpath.join(root, rel)
        res.files_pushed += 1
    return sent


def repair(target: Target, root: str, rels: set[str], want: dict[str, PackageFile],
           progress: ByteProgress, res: TargetResult, *, counted: bool = True) -> None:
    """Replace drifted files of a release one by one: each arrives under a temporary name and is
    renamed over the old one, so every file is always whole. ``counted``: they are the live
    release's (``res.repaired``), not the kept one's."""
    sent = send(target, root, sorted(rels), want, progress, res, temp=True)
    pairs = [p for rel, name in sorted(sent.items())
             for p in (posixpath.relpath(name, root), rel)]
    for chunk in batches(pairs, group=2):
        target.sh(_RENAME_PAIRS, root, *chunk, what="replacing drifted files")
    if counted:
        res.repaired = (res.repaired or 0) + len(rels)
