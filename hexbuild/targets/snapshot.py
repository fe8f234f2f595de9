"""What is at some paths on a device, read by one ``sh`` script: each path's kind (and a link's
target) and, for a directory, its files' sizes, modes and mtimes. The script and its parser are
apart from ``ShellTarget.snapshot`` so that a caller can run the script as one step of a larger
device call (deploy takes its lock and surveys ``<dest>`` in one round trip)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .base import RemoteFile

_SNAPSHOT = r'''for p in "$@"; do
  printf '== %s\n' "$p"
  if [ -L "$p" ]; then printf 'kind link %s\n' "$(readlink "$p")"
  elif [ -d "$p" ]; then echo 'kind dir'
  elif [ -e "$p" ]; then echo 'kind file'
  else echo 'kind missing'; fi
  if [ -d "$p" ]; then echo isdir; (cd "$p" && find . -type f -exec stat -c '%s %a %Y %n' {} +) || exit 1; fi
done'''
# the paths that start with $1 (named, not listed: snapshot(..., like=))
_NAMED_LIKE = r'''for d in "$1"*; do [ -e "$d" ] || [ -L "$d" ] && printf '== %s\nunlisted\n' "$d"; done
shift'''


@dataclass
class Snapshot:
    kind: str  # missing | dir | file | link
    link: str | None = None
    is_dir: bool = False  # a directory, or a link that leads to one
    files: dict[str, RemoteFile] = field(default_factory=dict)
    listed: bool = True  # False: only its name was read (snapshot's ``like``)


def snapshot_step(paths: Sequence[str], *, like: str = "") -> tuple[str, list[str]]:
    """(script, args) that prints what ``parse_snapshot`` reads; with ``like``, also names every
    other path that starts with it (``listed=False``)."""
    return (_NAMED_LIKE + "\n" + _SNAPSHOT, [like, *paths]) if like else (_SNAPSHOT, list(paths))


def parse_snapshot(text: str) -> dict[str, Snapshot]:
    out: dict[str, Snapshot] = {}
    current: Snapshot | None = None
    for line in text.splitlines():
        if line.startswith("== "):
            current = out.setdefault(line[3:], Snapshot("missing"))
        elif current is None:
            continue
        elif line.startswith("kind "):
            kind, _, link = line[5:].partition(" ")
            current.kind, current.link, current.listed = kind, (link if kind == "link" else None), True
        elif line == "isdir":
            current.is_dir = True
        elif line == "unlisted":
            current.kind, current.listed = "unlisted", False
        else:
            parsed = stat_line(line)
            if parsed:
                current.files[parsed.path] = parsed
    return out


def stat_line(line: str) -> RemoteFile | None:
    """One ``stat -c '%s %a %Y %n'`` line of a ``find .`` listing."""
    parts = line.split(" ", 3)
    if len(parts) < 4 or not parts[0].isdigit():
        return None
    size, mode, mtime, name = parts
    rel = name[2:] if name.startswith("./") else name
    try:
        return RemoteFile(rel, int(size), int(mode, 8), None, int(mtime))
    except ValueError:
        return None
