"""hexbuild deploy: put a package on one or many targets, incrementally and atomically.

Layout on the target (``<dest>`` = /data/local/tmp/llama.cpp by default on Android)::

    <parent>/<name>                        symlink -> .<name>.hexbuild-<id>  (the live install)
    <parent>/.<name>.hexbuild-<id>/        one complete release: the package files, scripts/,
                                           .hexbuild/manifest.json (written last = "complete")
    <parent>/.<name>.hexbuild-<older>/     the previous release, kept for --rollback
    <parent>/.<name>.hexbuild.trash/       older releases, renamed here by the switch and removed
                                           by a process of their own (the switch does not wait)
    <models_dir>/<file>.gguf               models; .hexbuild/models.json caches their hashes

Releases are *siblings* of ``<dest>`` on purpose: ``<dest>/..`` then still resolves to
``<parent>``, so llama.cpp's own scripts (``$basedir/../gguf/$M``) keep working.
``<id>`` is a hash of the release's content (paths, sha256, modes), so deploying the same
package again finds the same release.

Incremental: the device's manifest (what hexbuild installed) is compared with the package's.
A new release is staged beside the live one: unchanged files are *hard links* to the live
release's files (no bytes sent, no space used), files with the same bytes but another mode are
copied on the device, new or changed files are pushed, stale files are simply not carried over.
A release already live is repaired in place instead (missing, resized or re-moded files; with
--verify also files whose on-device sha256 differs), each file replaced by a rename. Nothing is ever written through an existing inode: every pushed
path is removed first or written under a temporary name, so the live release (which shares
inodes with the staged one) never changes under a running process.

Atomic: the switch is one rename(2) of a symlink (``ln -s`` into a temporary directory, then
``mv`` of it into ``<parent>``, which every mv — GNU, toybox — does as one rename; toybox's
``mv -T`` refuses a link that leads to a directory, see layout.SWAP), so a deploy cut off at any point leaves the previous install whole
and live; the half-staged release is found again on the next run (same content id), its
good files are kept (re-hashed on the device) and the job finishes. A plain directory at
``<dest>`` (e.g. from ``adb push``) is adopted: its files are hashed on the device and linked
into the first release, and it is renamed aside as the rollback release (the one moment without
``<dest>`` is between that rename and the symlink rename, in a single device shell command).
``--rollback`` points ``<dest>`` back at the release recorded as previous, once that release
hashes as its manifest says (kept.py: the hard links make a change in place of the live install
reach it too); ``--verify`` checks and repairs that kept release as well.
One deploy at a time per destination: a lock directory beside ``<dest>`` (lock.py) makes a
second deploy wait (``--wait``) or fail naming the holder; stale locks are broken.
Before anything is sent, the probe's device call checks that the device's tools can run these
scripts (targets/tools.py: toybox, GNU and busybox differ). The lock's call runs beside it and
also lists ``<dest>`` and reads its manifest (layout.survey); a deploy the probe's facts refuse
releases the lock, and its answer is the refusal.

Space: before any byte is sent, the bytes to push (package and models) are compared with the
free space where they go; too little is a per-target failure, "not enough space", with the
amount needed — reported, like every per-target failure, as DeployFailed (exit 7).

Many targets run in parallel threads (``deploy.parallel``); each yields a TargetResult; any
failure makes the whole command exit 7 after every target has finished.
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable

# Imported on first use (PEP 562): `hexbuild deploy PKG` loads the package, and starts hashing
# it, before the rest of deploy (targets, plans, scripts) is imported.
_FROM = {"MANIFEST": "layout", "release_id": "layout", "deploy": "many",
         "deploy_one": "one", "DeployOptions": "options", "Package": "package", "PackageFile": "package",
         "default_package": "package", "load_package": "package", "TargetResult": "result",
         "raise_for_failures": "result", "SCRIPTS_DIR": "scripts", "RESERVE": "space"}


def __getattr__(name: str):
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["DeployOptions", "TargetResult", "deploy", "deploy_one", "raise_for_failures", "release_id",
           "Package", "PackageFile", "load_package", "default_package"]

# Tests set this to a callable(target_spec, checkpoint) that raises to cut a deploy at a step.
# It is read from here at every checkpoint (checkpoints.fault), so assigning
# ``hexbuild.deploy.FAULT_HOOK`` takes effect.
FAULT_HOOK: Callable[[str, str], None] | None = None
