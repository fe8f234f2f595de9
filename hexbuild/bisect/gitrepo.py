"""The git a bisect needs, run against the user's checkout without changing it: revisions, the
first-parent history between two of them, subjects, and the blobs of a worktree's files.

Every call runs with hooks off (``core.hooksPath=/dev/null``: a checkout's post-checkout hook
is not ours to run) and with the checkout accepted whoever owns it (``safe.directory``), as
source.py reads revisions."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentMissing, UsageError

GIT_TIMEOUT = 600.0


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]

    def to_json(self) -> dict[str, str]:
        return {"commit": self.sha, "short": self.short, "subject": self.subject}


def git(repo: Path | str, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    argv = ["git", "-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false",
            "-C", str(repo), *args]
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # never another repo's
    full.update(env or {})
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EnvironmentMissing("git is not installed: bisect works in a git worktree of the checkout",
                                 hint="apt install git") from None
    if check and cp.returncode != 0:
        raise UsageError(f"git {' '.join(args[:2])} in {repo} failed: {_last_line(cp.stderr)}")
    return cp


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


class Repo:
    """The user's checkout, read only."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_dir():
            raise UsageError(f"--source {path}: no such directory")
        cp = git(self.path, "rev-parse", "--show-toplevel", check=False)
        if cp.returncode != 0:
            raise UsageError(f"{self.path} is not a git checkout: bisect needs the history to search",
                             hint="point --source at a git clone of llama.cpp")
        self.top = Path(cp.stdout.strip())

    def resolve(self, rev: str, what: str) -> str:
        if not rev or rev.startswith("-"):
            raise UsageError(f"{what} {rev!r} is not a revision")
        cp = git(self.top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
        if cp.returncode != 0 or not cp.stdout.strip():
            raise UsageError(f"{what} {rev!r} is not a commit of {self.top}")
        return cp.stdout.strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        return git(self.top, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0

    def history(self, good: str, bad: str) -> list[Commit]:
        """``good`` and every first-parent commit after it up to ``bad``, oldest first: the
        revisions a bisect orders (a merge that brought a regression in is named as the merge)."""
        if good == bad:
            raise UsageError("--good and --bad are the same commit: there is nothing between them to search")
        if not self.is_ancestor(good, bad):
            raise UsageError(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}",
                             hint="the good revision must come before the bad one in the history")
        out = git(self.top, "rev-list", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good}..{bad}").stdout
        commits = [Commit(good, self.subject(good))]
        for line in out.splitlines():
            if "\0" in line:
                sha, subject = line.split("\0", 1)
                commits.append(Commit(sha, subject))
        first_parent = git(self.top, "rev-parse", "--verify", "--quiet", f"{commits[1].sha}^1", check=False).stdout.strip()
        if first_parent != good:
            raise UsageError(f"--good {good[:12]} is not on the first-parent line of --bad {bad[:12]} (it came in "
                             "through a merge)", hint="bisect follows first parents (llama.cpp merges by squashing): "
                                                  "give the merge's first parent, or the merge, as --good")
        return commits

    def subject(self, sha: str) -> str:
        return git(self.top, "log", "-1", "--format=%s", sha).stdout.strip()

    def tracked_blobs(self, where: Path | None = None, *, clean_only: bool = False) -> dict[str, str]:
        """path -> blob sha of every tracked file of the checkout (or of a worktree of it);
        ``clean_only`` leaves out files that differ from the index (edited, not committed)."""
        root = where or self.top
        blobs = {}
        out = git(root, "ls-files", "-s", "-z").stdout
        for entry in out.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, blob, _stage = meta.split()
            if mode.startswith("100"):  # regular files; links and submodules do not feed the build
                blobs[path] = blob
        if clean_only:
            dirty = git(root, "diff-files", "--name-only", "-z").stdout.split("\0")
            for path in dirty:
                blobs.pop(path, None)
        return blobs


def worktree_add(repo: Repo, path: Path, sha: str) -> None:
    git(repo.top, "worktree", "add", "--detach", "--force", str(path), sha)


def worktree_checkout(path: Path, sha: str) -> None:
    """Switch the worktree to ``sha``: git rewrites only the files that differ, so the build
    directory's outputs stay newer than everything that did not change. Untracked files (the
    build tree and the package) stay."""
    git(path, "checkout", "--detach", "--force", sha)


def worktree_remove(repo: Repo, path: Path) -> None:
    """Remove the worktree and its administrative files in the checkout's .git, so the checkout
    is as it was. Only this worktree's entry is touched (a `git worktree prune` would also drop
    the user's own worktrees whose directories are elsewhere or unmounted)."""
    import shutil

    if (path / ".git").exists():
        git(repo.top, "worktree", "remove", "--force", "--force", str(path), check=False)
    admin = _admin_dir(repo, path)
    if admin is not None:
        shutil.rmtree(admin, ignore_errors=True)
        try:
            admin.parent.rmdir()  # git removes worktrees/ when its last entry goes
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def _admin_dir(repo: Repo, path: Path) -> Path | None:
    common = git(repo.top, "rev-parse", "--git-common-dir").stdout.strip()
    base = (repo.top / common).resolve() / "worktrees"
    if not base.is_dir():
        return None
    want = str(path / ".git")
    for d in base.iterdir():
        try:
            if (d / "gitdir").read_text().strip() == want:
                return d
        except OSError:
            continue
    return None
