"""The supervisor of ``serve --detach``, forked before the command line is parsed.

A detached start is a chain: this process starts, imports Typer and parses the command line;
the supervisor imports what starts a server (server.py, the runner, the target kinds, the open
image's recipe for a ``qemu:`` sysroot) and starts it. On a 2-core machine the two halves need
not wait for each other: when the words say ``serve`` and ``--detach``, ``begin`` forks the
supervisor first (one thread, nothing written yet: a safe fork), and it imports its half on the
other core while this process parses. ``hand`` then gives it the request on a pipe. When the
command does not detach after all (a usage error, ``--help``, ``serve stop``), the pipe closes
with this process and the child exits without a word.

Before its imports, the child launches what the same words launched last time
(early_start.py): the start that follows takes that process over only if it renders the same.

Measured on 2 cores (qemu:, the tiny model): the server's process started 118-130 ms after the
command did when the supervisor was forked after the parse, 95-105 ms with the pre-fork, 10-14 ms
when launched early.
"""

from __future__ import annotations

import os
import sys

# What the supervisor imports before it starts a server. A module missing from this list is
# imported when used, as without a pre-fork: the list is a head start, not a contract. What is
# needed only once the server runs (the dispatch proof's parsers) is not here: it is imported
# while the server starts (server._wait_ready), where it costs less than before the start (beside
# a starting server on 2 cores, work costs the server about half its own time: measured).
WARM = ("hexbuild.serve.daemon", "hexbuild.targets.qemu", "hexbuild.targets.forward", "hexbuild.runner.request",
        "hexbuild.runner.install", "hexbuild.toolchain.sysroot", "hexbuild.toolchain.open_image",
        "hexbuild.deploy.models", "hexbuild.plan.gguf_layout", "hexbuild.serve.probe")


class Waiting:
    """A supervisor forked and waiting for its request. (A plain class: this module is imported
    before the fork, and kept to what the interpreter has loaded already.)"""

    __slots__ = ("pid", "request_w", "ready_r")

    def __init__(self, pid: int, request_w: int, ready_r: int):
        self.pid = pid
        self.request_w = request_w  # this process writes the request here, once
        self.ready_r = ready_r      # the supervisor writes "ready" here, and closes it when it ends


_waiting: Waiting | None = None


def wanted(argv: list[str]) -> bool:
    """The words of a detached serve (a guess, on the raw words: a wrong one costs a child
    that imports and exits)."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    return "serve" in head and "--detach" in head and "--help" not in head and "-h" not in head


def begin(argv: list[str]) -> None:
    global _waiting
    if _waiting is not None or not hasattr(os, "fork") or not wanted(argv):
        return
    if "threading" in sys.modules and sys.modules["threading"].active_count() > 1:
        return  # a fork is safe only with this one thread
    request_r, request_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(request_r)
        os.close(ready_w)
        os.set_inheritable(request_w, False)
        _waiting = Waiting(pid, request_w, ready_r)
        return
    try:  # the child: never returns into the command's code
        os.close(request_w)
        os.close(ready_r)
        os.setsid()  # a terminal's Ctrl-C during the parse is the command's, not the supervisor's
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        close_all_but(request_r, ready_w)
        from . import early_start

        early_start.launch(argv)  # the last start of these words, launched again now
        _warm()
        doc = _read_all(request_r)
        if doc:
            import json

            d = json.loads(doc)
            run_supervisor(d["request"], d["settings"], d["result"], d["log"], int(d.get("verbose") or 0),
                           ready_w)
        early_start.discard()  # the command did not detach
    except BaseException:
        _discard_and_exit(1)
    os._exit(0)


def hand(request: dict, settings: dict, result_file: str, log_path: str,
         verbose: int) -> tuple[int, int] | None:
    """Give the pre-forked supervisor its request: (its PID, the read end of its ready pipe), or
    None when there is none (the caller forks one now)."""
    global _waiting
    w, _waiting = _waiting, None
    if w is None:
        return None
    import json

    doc = json.dumps({"request": request, "settings": settings, "result": result_file, "log": log_path,
                      "verbose": verbose}).encode()
    try:
        with os.fdopen(w.request_w, "wb") as pipe:
            pipe.write(doc)
    except OSError:  # it died while importing: the caller forks another
        os.close(w.ready_r)
        _reap(w.pid)
        return None
    return w.pid, w.ready_r


def cancel() -> None:
    """The command did not detach: the child reads the end of its pipe and exits."""
    global _waiting
    w, _waiting = _waiting, None
    if w is not None:
        for fd in (w.request_w, w.ready_r):
            try:
                os.close(fd)
            except OSError:
                pass
        _reap(w.pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _warm() -> None:
    import importlib

    for name in WARM:
        try:
            importlib.import_module(name)
        except Exception:  # whatever fails here fails again, with its message, where it is used
            pass


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def close_all_but(*keep: int) -> None:
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def run_supervisor(request: dict, settings: dict, result_file: str, log_path: str, verbose: int,
                   ready_w: int) -> None:
    """A forked child becomes the supervisor (daemon.serve), its output in ``log_path``, and exits
    with its code; a traceback, if it comes to that, goes to the log."""
    code = 1
    try:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for fd in (1, 2):
            os.dup2(log, fd)
        os.close(log)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        import signal
        from pathlib import Path

        from ..ui import ui
        from .daemon import serve
        from .request import ServeRequest

        ui.json = ui.quiet = False
        ui.verbose = verbose
        signal.signal(signal.SIGINT, signal.default_int_handler)
        req = ServeRequest.from_json(request, detached=True, stream_log=False)
        code = serve(req, settings, Path(result_file), ready_w)
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        except Exception:
            pass
    finally:
        _discard_and_exit(code)


def _discard_and_exit(code: int) -> None:
    """The supervisor's end: an early launch not taken over is stopped first (early_start.py)."""
    try:
        early = sys.modules.get(__package__ + ".early_start")
        if early is not None:
            early.discard()
    finally:
        os._exit(code)
