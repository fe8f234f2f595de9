"""Where hexbuild keeps what it remembers between runs: one root per kind, from the XDG
variables (their defaults otherwise), so every cache and state file moves together."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hexbuild`` (``~/.cache/hexbuild``): what can be made again."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hexbuild"


def state_root() -> Path:
    """``$XDG_STATE_HOME/hexbuild`` (``~/.local/state/hexbuild``): what records running things."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "hexbuild"


def output_mode() -> int:
    """The mode of a file written for the user (results, logs, charts): what their umask gives a
    new file, as a file their shell writes (0644 under the usual 022). ``atomic_write``'s default,
    0600, is for hexbuild's own caches and state. The umask is read from /proc (setting it to
    read it would race with other threads' files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_PART_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@contextmanager
def written_through_part(path: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file to write ``path``'s bytes to: a part beside it, renamed into place when the block
    ends, removed if anything interrupts it. ``mode`` sets the permission bits (default 0600).
    The part is named before it is created (hidden, 48 random bits): an interruption anywhere
    from its creation on (Ctrl-C, or a serve stop's SIGTERM reaching a starting supervisor) finds
    its name and removes it, where tempfile.mkstemp left a part behind when it came between the
    file's creation and mkstemp's return."""
    tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.part")
    try:
        fd = os.open(tmp, _PART_FLAGS, 0o600)
        with os.fdopen(fd, "wb") as f:
            yield f
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except FileExistsError:  # os.open's: another writer's part, not this one's to remove
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: bytes | str, *, mode: int | None = None) -> None:
    """``data`` into ``path`` through a uniquely named file beside it and one rename, so a reader
    (another hexbuild, a test, a crash's survivor) sees the old file or the new one, never a part;
    on any error the part is removed. ``mode`` sets the permission bits (default 0600, private)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_through_part(path, mode=mode) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
