"""A detached server launched before its command line is parsed, as the same words launched it
last time; taken over by the start only if the start renders that very launch.

Why: on ``qemu:`` (2 cores, the tiny model) the server's process started ~65 ms after the
command did: Python, then Typer's parse and the supervisor's imports side by side (~55 ms each),
then the start's checks and rendering. The server then needs ~0.5 s, so that wait was most of
what a detached start added to starting the server by hand.

A start that reached ready leaves here what it launched (program words, environment, directory,
log, port) under a digest of what it was asked with: the command's words, working directory,
whole environment, this hexbuild and this Python. Nothing but the digest is kept of the
environment. The next pre-forked supervisor with the same digest (prefork.py) launches the same
again before it imports anything else, provided that:
- the files the launch names (the emulator, the sysroot, the program, the model, the install's
  manifest, the local model it was pushed from) are unchanged (inode, size, mtime, mode);
- no record holds the port, and nothing listens on it.

Then the start goes on as without it: parsed, checked, the model pushed if needed, the server
rendered. It takes the launched process over only when what it renders is exactly what was
launched, nothing was pushed, and the process still runs. Anything else (other settings, an
error, Ctrl-C, a command that does not detach) stops the process first: a wrong guess changes
when the server starts, never what runs. Only targets whose server is a plain process of this
machine declare ``TargetCaps.early_start`` (local:, qemu:).

This module is imported by the pre-forked child before anything else: os, sys and built-in
modules only, until a launch is taken over or stopped.
"""

from __future__ import annotations

import marshal
import os
import sys

KEEP = 16  # remembered launches; the least recently used goes first

_key: str | None = None  # this command's digest, once launch() has computed it
_launched: "Launched | None" = None


class Launch:
    """What a start launches: the program's full words (emulator first), the environment it
    adds, its directory, its log (output and errors), the local port it serves."""

    __slots__ = ("argv", "env", "cwd", "log", "port")

    def __init__(self, argv, env, cwd: str, log: str, port: int):
        self.argv, self.env, self.cwd, self.log, self.port = list(argv), dict(env or {}), cwd, log, int(port)

    def to_doc(self) -> dict:
        return {"argv": self.argv, "env": self.env, "cwd": self.cwd, "log": self.log, "port": self.port}

    def __eq__(self, other) -> bool:
        return isinstance(other, Launch) and self.to_doc() == other.to_doc()


class Launched:
    __slots__ = ("launch", "pid", "since")

    def __init__(self, launch: Launch, pid: int, since: str):
        self.launch, self.pid, self.since = launch, pid, since


def launch(argv: list[str]) -> Launched | None:
    """In the pre-forked supervisor, before its imports: the launch remembered for these words,
    launched again when its files and port allow. Never raises: a guess that cannot be made is
    not made."""
    global _key, _launched
    try:
        _key = digest(argv, os.getcwd(), os.environ)
        entry = _plans().get(_key)
        if entry is None or not _unchanged(entry["files"]) or not _port_open(entry["launch"]["port"]):
            return None
        todo = Launch(**entry["launch"])
        pid = _spawn(todo)
    except Exception:
        return None
    from ..pids import process_start

    _launched = Launched(todo, pid, process_start(pid) or "")
    return _launched


def pending(port: int) -> bool:
    """A launch made for ``port`` waits to be taken over (it may listen there already)."""
    return _launched is not None and _launched.launch.port == port


def take(rendered: Launch, *, pushed: bool) -> tuple[int, str] | None:
    """(PID, start time) of the early launch when it is ``rendered`` and nothing was pushed since
    it started; otherwise it is stopped, and None: the start launches ``rendered`` itself."""
    global _launched
    early = _launched
    if early is None:
        return None
    from ..pids import running
    from ..ui import ui

    alive = running(early.pid, early.since)
    if early.launch == rendered and not pushed and alive:
        ui.detail(f"taking over PID {early.pid}: launched before the command line was parsed, as the last "
                  "start of these words launched it")
        ui.command(rendered.argv, env=rendered.env or None)
        import threading

        # reaped as soon as it ends, as a start's own launch is (targets/local.py)
        threading.Thread(target=_reap, args=(early.pid,), name=f"reap-{early.pid}", daemon=True).start()
        _launched = None  # the start's own from here (until then an interruption stops it: discard)
        return early.pid, early.since
    discard("something was pushed" if pushed else "it ended" if not alive else "this start renders another launch")
    return None


def discard(why: str = "the start did not take it over") -> None:
    """The early launch, if not taken over, stopped: the start failed or did not happen."""
    global _launched
    early = _launched
    if early is not None:
        from ..ui import ui

        ui.detail(f"stopping PID {early.pid}, launched before the command line was parsed: {why}")
        _stop(early)
        _launched = None  # (not before: an interruption of the stop leaves it to the next discard)


def remember(done: Launch, files: list[str]) -> None:
    """After ready: ``done`` is what these words launch, while ``files`` and the files its words
    name stay as they are now. Nothing is kept when this command computed no digest (a start that
    was not pre-forked). A cache: a failure to write it is not the start's."""
    if _key is None:
        return
    try:
        named = [w if os.path.isabs(w) else os.path.join(done.cwd, w) for w in [*done.argv, *files] if w]
        sigs = [[p, s] for p in dict.fromkeys(named) if (s := _signature(p)) is not None and len(p) < 4096]
        plans = _plans()
        plans.pop(_key, None)
        plans[_key] = {"launch": done.to_doc(), "files": sigs}
        while len(plans) > KEEP:
            plans.pop(next(iter(plans)))
        from ..paths import atomic_write

        atomic_write(_plans_path(), marshal.dumps(plans))
    except (OSError, ValueError):
        pass


def digest(argv: list[str], cwd: str, environ) -> str:
    """What a command is asked with, as a digest: its words, directory, whole environment (only
    this digest of it is kept), this hexbuild and this Python."""
    from .. import __file__ as package, __version__

    material = marshal.dumps((__version__, package, sys.executable, sys.version, list(argv), cwd,
                              sorted(environ.items())))
    try:
        from _sha2 import sha256  # Python 3.12+: CPython's own, without hashlib loading OpenSSL (3-5 ms)
    except ImportError:
        try:
            from _sha256 import sha256  # 3.10, 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(material).hexdigest()


def _plans_path() -> str:
    # paths.cache_root(), without pathlib (9 ms before the launch)
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                        "hexbuild", "serve-early-starts")


def _plans() -> dict:
    """The remembered launches, oldest first; none when the file is missing, unreadable, or not
    the user's own and private (it names programs to run)."""
    try:
        fd = os.open(_plans_path(), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return {}
        with os.fdopen(fd, "rb") as f:
            fd = -1
            plans = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    finally:
        if fd >= 0:
            os.close(fd)
    return plans if isinstance(plans, dict) else {}


def _signature(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode]


def _unchanged(files) -> bool:
    return all(_signature(path) == sig for path, sig in files)


def _port_open(port: int) -> bool:
    """No record holds ``port`` and nothing listens on it (as targets/forward.check_port_free
    binds; _socket rather than socket, whose enums cost 3 ms here)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    if os.path.lexists(os.path.join(state, "hexbuild", "servers", f"{port}.json")):
        return False
    import _socket

    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        s.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _spawn(todo: Launch) -> int:
    """The launch as targets/local.py's start_detached makes it (a session of its own, in its
    directory, stdin from /dev/null, output and errors to the log, the signals Python ignores
    restored), without the subprocess module (11 ms here). A fork, as this process has one
    thread; not posix_spawn, whose glibc leaves its two internal signals ignored in the program.
    A program that cannot start exits 127: the start finds the launch ended, and starts anew."""
    import _signal

    if "/" not in todo.argv[0]:
        raise ValueError("a program found through PATH is not launched early")
    env = dict(os.environ)
    env.update(todo.env)
    os.makedirs(os.path.dirname(todo.log) or ".", exist_ok=True)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.chdir(todo.cwd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            log = os.open(todo.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            os.dup2(log, 1)
            os.dup2(log, 2)
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
                _signal.signal(sig, _signal.SIG_DFL)
            os.execve(todo.argv[0], todo.argv, env)
        finally:
            os._exit(127)
    return pid


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _stop(early: Launched) -> None:
    from ..pids import stop

    stop(early.pid, early.since, kill_after=5.0, timeout=10.0)
    try:
        os.waitpid(early.pid, os.WNOHANG)
    except ChildProcessError:
        pass
