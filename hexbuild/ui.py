"""Where output goes: machine output on stdout, everything human on stderr.

One process-wide ``UI`` holds the global flags (--json, -v, -q) and what the environment says
(a TTY or not, which CI). Commands never print directly: they call ``ui.info``/``ui.warn``/
``ui.command`` for people and ``ui.result`` for the one machine-readable answer.
Without a TTY there are no spinners or redraws: progress becomes plain timestamped lines.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

_rich_console = None
_warming: threading.Thread | None = None


def warm_rich() -> None:
    """Import rich in a thread of its own, once. A command that will show rich output (a
    terminal's progress bar, a result table) calls this first: the 80-110 ms of rich's imports
    then run while the command waits on its devices, not before its first byte or after its
    last. A later import of the same module waits for this one (the import system's module
    locks), so nothing is imported twice; a failed import is left for that later one to raise."""
    global _warming
    if _warming is not None or "rich.progress" in sys.modules:
        return

    def run() -> None:
        try:
            import rich.progress  # noqa: F401  (it brings rich.console, rich.table and rich.text)
        except Exception:
            pass

    _warming = threading.Thread(target=run, name="hexbuild-warm-rich", daemon=True)
    _warming.start()


def _ci_provider(env: dict[str, str] | os._Environ = os.environ) -> str | None:
    if env.get("GITHUB_ACTIONS") == "true":
        return "github"
    if env.get("GITLAB_CI") == "true":
        return "gitlab"
    if env.get("CI", "").lower() in ("1", "true", "yes"):
        return "generic"
    return None


class UI:
    def __init__(self) -> None:
        self.json = False
        self.verbose = 0
        self.quiet = False
        self.ci = _ci_provider()
        self.warnings: list[str] = []
        self.notes: list[str] = []  # facts the user chose (a CPU-only build): said, never counted by --strict
        # each target this command opened → its results' mark ({} for a real device): fidelity.py
        self.fidelity: dict[str, dict[str, Any]] = {}
        self.stamp: Any = None  # fidelity.stamp, set by fidelity.say (ui imports nothing of it)
        self.result_emitted = False  # one JSON document per run: an error after a report adds none
        self._github_groups = 0  # open ::group:: sections (GitHub cannot nest them)

    @property
    def _stderr(self):
        return sys.stderr  # looked up each time: tests and redirections replace it

    # -- environment ---------------------------------------------------------------------
    @property
    def interactive(self) -> bool:
        """Live redraws only on a real terminal, never in CI or with --json."""
        try:
            tty = self._stderr.isatty()
        except (AttributeError, ValueError):
            tty = False
        return tty and self.ci is None and os.environ.get("TERM") != "dumb"

    def console(self):
        """A rich Console on stderr (imported lazily: rich costs start-up time)."""
        global _rich_console
        if _rich_console is None or _rich_console.file is not self._stderr:
            from rich.console import Console

            _rich_console = Console(file=self._stderr, highlight=False, soft_wrap=True,
                                    force_terminal=None if self.interactive else False)
        return _rich_console

    # -- human output (stderr) -------------------------------------------------------------
    def _line(self, text: str, *, stamp: bool = True) -> None:
        # no terminal (CI, a pipe, a log file) is enough: CI=true is not needed for timestamps
        if stamp and not self.interactive:
            text = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(text, file=self._stderr, flush=True)

    def info(self, text: str) -> None:
        if not self.quiet:
            self._line(text)

    def detail(self, text: str) -> None:
        """Shown with -v only."""
        if self.verbose and not self.quiet:
            self._line(text)

    def warn(self, text: str, *, file: str | None = None, line: int | None = None,
             col: int | None = None) -> None:
        self.warnings.append(text)  # still counted by --strict and reported in --json under -q
        if self.quiet:  # -q: only errors on stderr
            return
        if self.ci == "github":
            print(f"::warning{_gh_location(file, line, col)}::{_gh_escape(text)}", file=self._stderr, flush=True)
        else:
            self._line(f"warning: {text}")

    def note(self, text: str) -> None:
        """A fact worth one line that is no warning (the user chose it): not counted by --strict;
        kept off stderr by -q, reported in --json as the warnings are."""
        if text not in self.notes:
            self.notes.append(text)
        if self.quiet:
            return
        if self.ci == "github":
            print(f"::notice::{_gh_escape(text)}", file=self._stderr, flush=True)
        else:
            self._line(f"note: {text}")

    def error(self, text: str, *, hint: str | None = None, file: str | None = None, line: int | None = None,
              col: int | None = None) -> None:
        if self.ci == "github":
            print(f"::error{_gh_location(file, line, col)}::{_gh_escape(text)}", file=self._stderr, flush=True)
        else:
            self._line(f"hexbuild: error: {text}", stamp=False)
        if hint:
            self._line(f"hint: {hint}", stamp=False)

    def command(self, argv: Sequence[str] | str, *, env: dict[str, str] | None = None) -> None:
        """With -v, print every external command exactly as it could be pasted into a shell."""
        if not self.verbose:
            return
        text = argv if isinstance(argv, str) else shlex.join([str(a) for a in argv])
        if env:
            text = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()) + " " + text
        self._line(f"+ {text}")

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A foldable section in CI logs (GitHub ::group::, GitLab section markers). GitHub
        cannot nest groups: a group inside a group is a plain "== title" line there."""
        start = time.monotonic()
        github = self.ci == "github" and self._github_groups == 0
        if github:
            self._github_groups += 1
            print(f"::group::{title}", file=self._stderr, flush=True)
        elif self.ci == "gitlab":
            name = "".join(c if c.isalnum() else "_" for c in title.lower())[:40]
            print(f"\x1b[0Ksection_start:{int(time.time())}:{name}\r\x1b[0K{title}", file=self._stderr, flush=True)
        else:
            self.info(f"== {title}")
        try:
            yield
        finally:
            if github:
                self._github_groups -= 1
                print("::endgroup::", file=self._stderr, flush=True)
            elif self.ci == "gitlab":
                print(f"\x1b[0Ksection_end:{int(time.time())}:{name}\r\x1b[0K", file=self._stderr, flush=True)
            self.detail(f"   {title}: {time.monotonic() - start:.2f}s")

    # -- machine output (stdout) -----------------------------------------------------------
    def result(self, data: Any, human: Any = None) -> None:
        """The command's answer: JSON on stdout with --json, else ``human`` (text or a rich
        renderable, or a callable making one: a table is built only when it is shown) on stdout.
        The document carries every warning and note said so far, and the mark of an emulated NPU's
        results (see ``with_said``)."""
        self.result_emitted = True
        if self.json:
            data = self.with_said(data)
            sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
            sys.stdout.flush()
            return
        if callable(human):
            human = human()
        if human is None:
            return
        if isinstance(human, str):
            sys.stdout.write(human if human.endswith("\n") else human + "\n")
            sys.stdout.flush()
        else:
            from rich.console import Console

            Console(file=sys.stdout, highlight=False, soft_wrap=False,
                    force_terminal=None if sys.stdout.isatty() else False).print(human)

    def with_said(self, data: Any) -> Any:
        """``data`` with every warning said (``warn``) in its ``warnings`` list and every note in
        ``notes``: one rule for every command, whether or not -q kept them off stderr. A list of
        results that each keep their own ``warnings`` (deploy's targets) gets in each the ones no
        result holds (said for them all). A document whose ``warnings`` is a count (verify's,
        inspect's: their checks list them) keeps it. A document made for the virtual NPU gets
        ``emulated`` and ``npu_model`` (hexbuild/fidelity.py)."""
        if self.fidelity and self.stamp is not None:
            data = self.stamp(data)

        def merge(doc: dict, warnings: list[str], notes: list[str]) -> dict:
            own = doc.get("warnings")
            if own is not None and not isinstance(own, list):
                return doc
            out = dict(doc)
            out["warnings"] = list(own or []) + [w for w in warnings if w not in (own or [])]
            if notes or doc.get("notes"):
                have = doc.get("notes") if isinstance(doc.get("notes"), list) else []
                out["notes"] = list(have) + [n for n in notes if n not in have]
            return out

        if isinstance(data, dict):
            return merge(data, self.warnings, self.notes)
        if isinstance(data, list) and data and all(isinstance(d, dict) and isinstance(d.get("warnings"), list)
                                                   for d in data):
            held = {w for d in data for w in d["warnings"]}  # said as "TARGET: text", kept as "text"
            shared = [w for w in self.warnings if not any(w == h or w.endswith(f": {h}") for h in held)]
            return [merge(d, shared, self.notes) for d in data]
        return data

    # -- progress ---------------------------------------------------------------------------
    def progress(self, *, transient: bool = True):
        """A rich Progress on a TTY (made at its first task, rich imported meanwhile: warm_rich);
        a plain-line stand-in elsewhere (same add_task/update API)."""
        if self.interactive and not self.quiet:
            warm_rich()
            return LiveProgress(self, transient)
        return PlainProgress(self)


class LiveProgress:
    """rich's byte Progress, drawn from the first task on: a command that adds it only once it
    knows what to send has spent its probing and planning importing rich beside them."""

    def __init__(self, ui: UI, transient: bool) -> None:
        self.ui, self.transient = ui, transient
        self.live: Any = None
        self._making = threading.Lock()  # deploy's targets add their tasks from threads of their own

    def _bar(self) -> Any:
        """The bar, made and started by the first task's thread."""
        with self._making:
            if self.live is None:
                from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

                live = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                TimeRemainingColumn(), console=self.ui.console(), transient=self.transient)
                live.__enter__()
                self.live = live
        return self.live

    def __enter__(self) -> "LiveProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def add_task(self, description: str, total: float | None = None, **kw: Any) -> int:
        return self._bar().add_task(description, total=total, **kw)

    # a task id comes from add_task, which made the bar: updates (one per batch sent) take no lock
    def update(self, task_id: int, **kw: Any) -> None:
        self.live.update(task_id, **kw)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.live.advance(task_id, advance)

    def remove_task(self, task_id: int) -> None:
        if self.live is not None:
            self.live.remove_task(task_id)


class PlainProgress:
    """Progress for logs: one line when a task starts, at each 25 %, and when it finishes."""

    def __init__(self, ui: UI) -> None:
        self.ui = ui
        self.tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        tid = len(self.tasks)
        self.tasks[tid] = {"description": description, "total": total, "completed": 0.0, "mark": 0}
        return tid

    def update(self, task_id: int, *, completed: float | None = None, advance: float | None = None,
               total: float | None = None, description: str | None = None, **_: Any) -> None:
        t = self.tasks[task_id]
        if description is not None:
            t["description"] = description
        if total is not None:
            t["total"] = total
        if completed is not None:
            t["completed"] = completed
        if advance is not None:
            t["completed"] += advance
        if t["total"]:
            mark = int(4 * t["completed"] / t["total"])
            if mark > t["mark"]:
                t["mark"] = mark
                self.ui.info(f"{t['description']}: {min(100, 25 * mark)}%")

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def remove_task(self, task_id: int) -> None:
        self.tasks.pop(task_id, None)


def _gh_escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_location(file: str | None, line: int | None, col: int | None) -> str:
    """` file=…,line=…,col=…` for an annotation; property values escape ':' and ',' too."""
    if not file:
        return ""
    def prop(v: object) -> str:
        return _gh_escape(str(v)).replace(":", "%3A").replace(",", "%2C")
    loc = f" file={prop(file)}"
    if line:
        loc += f",line={line}" + (f",col={col}" if col else "")
    return loc


ui = UI()


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def raw_to_stderr(data: bytes) -> None:
    """A program's own output (a server's log as it streams) to stderr as it came, after what
    this process has written there."""
    try:
        sys.stderr.flush()
        sys.stderr.buffer.write(data)  # type: ignore[attr-defined]
    except AttributeError:
        sys.stderr.write(data.decode("utf-8", "replace"))
    sys.stderr.flush()
