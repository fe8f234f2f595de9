"""Where a bisect builds: its own git worktree of the checkout, and a build directory kept
between bisects, so a step rebuilds only what differs from the last build.

Layout, under ``~/.cache/hexbuild/bisect/<checkout hash>/``:

    lock                     one bisect per checkout at a time (flock)
    worktree/                the worktree (a detached HEAD), removed when the bisect ends
    keep/<build-dir>/        the build directory, moved out of the worktree at the end
    keep/<build-dir>.stamps  path -> (blob, mtime) of every tracked file as that build dir saw it

Within one bisect, ``git checkout`` rewrites only the files that differ between two steps, so
ninja recompiles just those. A new worktree, though, has every file written now: before the
first build, each file whose content (its blob) is the one the kept build directory saw gets
that file's mtime back, so ninja judges exactly as it did then, and a file with other content
keeps its new mtime and is rebuilt. The first bisect of a checkout starts from a copy of the
checkout's own build directory of that name, when it has one (stamped from the checkout's
unmodified files). The compiler cache (ccache volume) is shared by every step anyway.

Ctrl-C and SIGTERM: the worktree is removed on the way out (with SIGINT ignored while that
runs); a bisect that was killed outright leaves a worktree the next one removes first.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import UsageError
from ..paths import atomic_write, cache_root
from ..ui import ui
from .gitrepo import Repo, worktree_add, worktree_checkout, worktree_remove


def workspace_root(repo: Repo) -> Path:
    key = hashlib.sha256(str(repo.top).encode()).hexdigest()[:16]
    return cache_root() / "bisect" / key


class Workspace:
    def __init__(self, repo: Repo, *, root: Path | None = None) -> None:
        self.repo = repo
        self.base = root or workspace_root(repo)
        self.path = self.base / "worktree"
        self.keep = self.base / "keep"
        self.head: str | None = None
        self.build_dirs: set[str] = set()
        self._lock_fd: int | None = None

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> "Workspace":
        self.base.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.base / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(f"another hexbuild bisect of {self.repo.top} is running",
                             hint="wait for it, or stop it (Ctrl-C removes its worktree)") from None
        self._lock_fd = fd
        if self.path.exists() or (self.base / "worktree.dirs").exists():
            ui.info(f"removing the worktree an earlier bisect left at {self.path}")
            self._teardown(self._left_dirs())
        return self

    def __exit__(self, *exc: object) -> None:
        with _sigint_ignored():
            try:
                self._teardown(self.build_dirs)
            finally:
                if self._lock_fd is not None:
                    os.close(self._lock_fd)
                    self._lock_fd = None

    def _left_dirs(self) -> set[str]:
        try:
            return set(json.loads((self.base / "worktree.dirs").read_text()))
        except (OSError, ValueError):
            return set()

    def _teardown(self, build_dirs: set[str]) -> None:
        """Keep the build directories (with the stamps they saw), remove the worktree."""
        for rel in sorted(build_dirs):
            inside = self.path / rel
            if inside.is_dir():
                self._stamp(rel)
                kept = self.keep / rel
                shutil.rmtree(kept, ignore_errors=True)
                kept.parent.mkdir(parents=True, exist_ok=True)
                os.replace(inside, kept)
        worktree_remove(self.repo, self.path)
        (self.base / "worktree.dirs").unlink(missing_ok=True)
        self.head = None

    # -- the worktree --------------------------------------------------------------------------
    def checkout(self, sha: str) -> Path:
        """The worktree at ``sha`` (made on first use)."""
        if self.head is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            worktree_add(self.repo, self.path, sha)
        elif self.head != sha:
            worktree_checkout(self.path, sha)
        self.head = sha
        return self.path

    def use_build_dir(self, rel: str) -> str:
        """Bring the kept build directory ``rel`` (or a copy of the checkout's own) into the
        worktree, with the mtimes it saw; returns how it started: kept, copied or new."""
        if rel in self.build_dirs:
            return "in use"
        self.build_dirs.add(rel)
        atomic_write(self.base / "worktree.dirs", json.dumps(sorted(self.build_dirs)))
        inside, kept, theirs = self.path / rel, self.keep / rel, self.repo.top / rel
        how = "new"
        if kept.is_dir() and not inside.exists():
            inside.parent.mkdir(parents=True, exist_ok=True)
            os.replace(kept, inside)
            stamps, how = self._read_stamps(rel), "kept"
        elif (theirs / "CMakeCache.txt").is_file() and not inside.exists():
            ui.info(f"starting from a copy of {theirs} (only what differs from it is rebuilt)")
            _copy_tree(theirs, inside)
            stamps, how = self._checkout_stamps(), "copied"
        else:
            stamps = {}
        if stamps:
            restored = self._restore(stamps)
            ui.detail(f"{rel}: {restored} files have the mtimes that build directory saw")
        return how

    def _restore(self, stamps: dict[str, list]) -> int:
        n = 0
        for path, blob in self.repo.tracked_blobs(self.path).items():
            seen = stamps.get(path)
            if seen and seen[0] == blob:
                try:
                    os.utime(self.path / path, ns=(seen[1], seen[1]), follow_symlinks=False)
                    n += 1
                except OSError:
                    pass
        return n

    def _stamp(self, rel: str) -> None:
        try:
            stamps = _stamps_of(self.repo, self.path)
            atomic_write(self.keep / f"{rel}.stamps", json.dumps(stamps))
        except Exception as e:  # noqa: BLE001 — no stamps only means a slower next build
            ui.detail(f"could not stamp {rel}: {e}")
            (self.keep / f"{rel}.stamps").unlink(missing_ok=True)

    def _read_stamps(self, rel: str) -> dict[str, list]:
        try:
            data = json.loads((self.keep / f"{rel}.stamps").read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _checkout_stamps(self) -> dict[str, list]:
        return _stamps_of(self.repo, self.repo.top, clean_only=True)


def _stamps_of(repo: Repo, root: Path, *, clean_only: bool = False) -> dict[str, list]:
    out = {}
    for path, blob in repo.tracked_blobs(root, clean_only=clean_only).items():
        try:
            out[path] = [blob, os.stat(root / path, follow_symlinks=False).st_mtime_ns]
        except OSError:
            continue
    return out


def _copy_tree(src: Path, dst: Path) -> None:
    """A copy that keeps mtimes (and shares blocks where the filesystem can: cp --reflink)."""
    import subprocess

    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    cp = subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(part)], capture_output=True, text=True)
    if cp.returncode != 0:
        shutil.rmtree(part, ignore_errors=True)
        shutil.copytree(src, part, symlinks=True)
    os.replace(part, dst)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """A second Ctrl-C must not cut the clean-up of the first one short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
