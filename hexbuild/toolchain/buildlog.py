"""The build's output: saved whole to a log file, shown live, and read back when it fails.

Output arrives in chunks (from the container's log stream or a subprocess pipe). ``BuildLog``
splits it into lines, writes them to ``<build-dir>/hexbuild-build.log`` (through a temporary
name, renamed when the build ends), keeps the last lines for the error message, and turns
Ninja's ``[n/m]`` lines into a progress bar. Known failures are a data table
(hexbuild/data/build_failures.toml) matched against the log.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ui import ui

TAIL_LINES = 20
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class BuildLog:
    def __init__(self, path: Path, *, title: str = "build", echo: bool | None = None):
        self.path = Path(path)
        self.part = self.path.with_name(self.path.name + ".part")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.part, "w", encoding="utf-8", errors="replace")
        self._pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()
        self.tail: deque[str] = deque(maxlen=200)
        self.lines = 0
        self.fed_bytes = 0
        self.echo = ui.verbose > 0 if echo is None else echo
        self.title = title
        self._progress = None
        self._task = None
        self._total = 0
        self._done = 0

    # -- live view -------------------------------------------------------------------------
    def __enter__(self) -> "BuildLog":
        if not self.echo and not ui.quiet:
            self._progress = _step_progress()
            self._progress.__enter__()
            self._task = self._progress.add_task(self.title, total=None)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def feed(self, data: bytes | str) -> None:
        with self._lock:
            text = self._decoder.decode(data) if isinstance(data, bytes) else data
            self.fed_bytes += len(data)
            text = self._pending + text.replace("\r\n", "\n").replace("\r", "\n")
            *lines, self._pending = text.split("\n")
            for line in lines:
                self._line(line)
            if lines:
                self._file.flush()  # so that `tail -f` of the .part file follows the build

    def _line(self, line: str) -> None:
        line = _ANSI.sub("", line)
        self._file.write(line + "\n")
        self.tail.append(line)
        self.lines += 1
        if self.echo:
            print(line, file=sys.stderr, flush=True)
        m = _NINJA.match(line)
        if m and self._progress is not None:
            done, total = int(m.group(1)), int(m.group(2))
            # A sub-build (the HTP ExternalProjects) prints its own, smaller [n/m]; keep the
            # outer build's count.
            if total >= self._total:
                self._total, self._done = total, done
                self._progress.update(self._task, completed=done, total=total)

    def replace(self, data: bytes | str) -> None:
        """Start the log over with the whole output (when the live stream got stuck)."""
        with self._lock:
            self._file.seek(0)
            self._file.truncate()
            self._pending = ""
            self._decoder.reset()
            self.tail.clear()
            self.lines = 0
            self.fed_bytes = 0
            echo, self.echo = self.echo, False  # already shown
        self.feed(data)
        self.echo = echo

    def close(self) -> None:
        with self._lock:
            if self._pending:
                self._line(self._pending)
                self._pending = ""
            if self._progress is not None:
                self._progress.__exit__(None, None, None)
                self._progress = None
            if not self._file.closed:
                self._file.close()
                os.replace(self.part, self.path)

    def text(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "\n".join(self.tail)

    def last(self, n: int = TAIL_LINES) -> list[str]:
        """The last ``n`` lines, or, when Ninja reported a failed step (it keeps building other
        steps, whose output follows), that step's output and the last line."""
        lines = [l for l in self.tail if l.strip()]
        failed = [i for i, l in enumerate(lines) if l.startswith("FAILED: ")]
        if not failed or failed[-1] >= len(lines) - n:
            return lines[-n:]
        start = failed[-1]
        return lines[start:start + n - 2] + ["...", lines[-1]]


def _step_progress() -> Any:
    """Build steps, not bytes: on a terminal a bar with n/m and the elapsed time; elsewhere the
    UI's plain progress lines."""
    if not ui.interactive:
        return ui.progress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=ui.console(), transient=True)


@dataclass(frozen=True)
class KnownFailure:
    id: str
    pattern: re.Pattern[str]
    hint: str
    when: str | None = None


@functools.lru_cache(maxsize=1)
def known_failures() -> tuple[KnownFailure, ...]:
    from ..data import table

    return tuple(KnownFailure(f["id"], re.compile(f["pattern"]), f["hint"], f.get("when"))
                 for f in table("build_failures")["failure"])


def diagnose(log_text: str, *, image_older_than_pin: bool = False) -> KnownFailure | None:
    """The first known failure whose pattern appears in the log (rules in table order)."""
    for rule in known_failures():
        if rule.when == "image-older-than-pin" and not image_older_than_pin:
            continue
        if rule.pattern.search(log_text):
            return rule
    return None
