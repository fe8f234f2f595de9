"""A program left running on a target after the command that started it returns (llama-server
for ``hexbuild serve``): started detached with its output in a log file on the device, watched
through one long-lived command that streams the log and ends when the program does, and
stopped by its PID.

On a device all of it is small POSIX sh (Android's mksh/toybox, Linux's dash/coreutils) with data
passed as positional arguments, never pasted into the script. On this machine (``local:``,
``qemu:``, ``qemu+npu:``) the program is started, its log read and its end seen from Python: no
shell, tail or sleep process beside a server that is starting.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import deque
from typing import Callable, Sequence

from .. import pids
from ..errors import HexbuildError, RemoteFailed

# Printed by WATCH on stderr once the program is gone: a stream that ends without it was cut.
EXITED_MARK = "\x1ehexbuild: the program exited"
TAIL_MARK = "\x1ehexbuild: tail"  # WATCH's tail, on stderr: TAIL_MARK PID START
TEXT_LIMIT = 4 << 20  # bytes of log kept for the start-up checks
LOCAL_FOLLOW_POLL = 0.05  # seconds between looks at a local log that has not grown

# The program ignores SIGHUP (inherited across exec), so closing the session that started it
# (adb shell, SSH exec) does not end it; its stdin is /dev/null and its output goes to the log.
# Printed: its PID and its start time (clock ticks after boot), which identify it later even if
# the PID is reused — shell builtins only (a phone's toybox may lack tr, grep or cut).
STAT = r"""stat_of() {
  s=
  [ -r "/proc/$1/stat" ] && read -r s < "/proc/$1/stat" 2>/dev/null
  s=${s##*") "}
  set -- $s
  state=${1:-}; start=${20:-}
}
"""

START = STAT + r"""log=$1; shift
mkdir -p "${log%/*}" || exit 1
trap '' HUP
"$@" </dev/null >"$log" 2>&1 &
pid=$!
stat_of "$pid"
echo "$pid $start"
"""

# "Running": the PID exists, was started when recorded, and is not a zombie (exited, not yet
# reaped: its parent is gone and the device's init is slow, or no init at all).
RUNNING = STAT + r"""running() {
  stat_of "$1"
  [ -n "$state" ] && [ "$state" != Z ] && { [ -z "$2" ] || [ "$start" = "$2" ]; }
}
"""

# It says which tail it runs (PID and start time), so that a stop can end it at once rather
# than wait for the loop's next look (a second) and leave tail behind when the session is cut.
WATCH = RUNNING + r"""pid=$1; log=$2; mark=$3; since=$4; tailmark=$5
tail -n +1 -f "$log" 2>/dev/null & t=$!
stat_of "$t"
printf '%s %s %s\n' "$tailmark" "$t" "$start" >&2
while running "$pid" "$since"; do sleep 1; done
sleep 1
kill "$t" 2>/dev/null
wait "$t" 2>/dev/null
printf '\n%s\n' "$mark" >&2"""

# On a device: checked every 10 ms for a tenth of a second (llama-server exits within a few tens
# of ms on SIGTERM, and `serve stop` waits for it), then every 50 ms; SIGKILL after 10 s. (On
# this machine: hexbuild/pids.py, the same steps in Python.)
STOP = RUNNING + r"""pid=$1; since=$2
running "$pid" "$since" || exit 0
kill -TERM "$pid" 2>/dev/null || exit 0
i=0
while running "$pid" "$since"; do
  i=$((i + 1))
  if [ "$i" -gt 208 ]; then kill -KILL "$pid" 2>/dev/null; break; fi
  if [ "$i" -le 10 ]; then sleep 0.01; else sleep 0.05; fi
done
exit 0"""

# The log from byte FROM on (at most MOST bytes, when given): what the watcher's stream had not
# brought; then the watcher's tail (PID, start time), when given, is ended.
REST = RUNNING + r"""log=$1; from=$2; most=$3
if [ -r "$log" ]; then
  if [ -n "$most" ]; then tail -c "+$from" "$log" | head -c "$most"; else tail -c "+$from" "$log"; fi
fi
[ -n "$4" ] && running "$4" "$5" && kill "$4" 2>/dev/null
exit 0"""

def start(target, argv: Sequence[str], *, env: dict[str, str], cwd: str, log: str) -> tuple[int, str]:
    """Start ``argv`` on the target in the background: (its PID there, its start time)."""
    if target.caps.this_machine:
        return target.start_detached(argv, env=env, cwd=cwd, log=log)
    res = target.capture(["sh", "-c", START, "sh", log, *argv], env=env, cwd=cwd)
    out = res.out.strip().splitlines()
    words = out[-1].split() if out else []
    if res.rc != 0 or not words or not words[0].isdigit():
        why = (res.err.strip() or res.out.strip() or f"exit code {res.rc}").splitlines()[-1]
        raise RemoteFailed(f"cannot start {argv[0]} on {target.spec}: {why}")
    return int(words[0]), (words[1] if len(words) > 1 else "")


def stop(target, pid: int, since: str, *, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after 10 s; nothing when the PID is gone or is another process."""
    if target.caps.this_machine:  # its end seen at once (a pidfd), not by sh looking every 10 ms
        pids.stop(pid, since, timeout=timeout)
        return
    target.capture(["sh", "-c", STOP, "sh", str(pid), since], timeout=timeout)


def log_rest(target, log: str, offset: int, *, limit: int | None = None,
             end_tail: tuple[int, str] | None = None) -> bytes:
    """The device log from byte ``offset`` on, at most ``limit`` bytes (a local file is read here);
    then the tail ``end_tail`` names (PID, start time), if it still runs, is ended."""
    if target.caps.this_machine:
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                data = f.read(-1 if limit is None else limit)
        except (FileNotFoundError, NotADirectoryError):
            data = b""
        if end_tail is not None:
            _end_local(*end_tail)
        return data
    pid, since = end_tail if end_tail is not None else ("", "")
    return target.capture(["sh", "-c", REST, "sh", log, str(offset + 1), "" if limit is None else str(limit),
                           str(pid), since]).stdout


def _end_local(pid: int, since: str) -> None:
    if pids.running(pid, since):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:  # gone already
            pass


def cut_stream(target, watcher: "Watcher", log: str) -> bytes:
    """After a stop: what the watcher's stream had not brought yet (the stream is frozen first),
    and its tail ended, instead of waiting for the watch loop's next look, a second away. The
    stream is waited for (3 s at most) when it has not said which tail it runs."""
    if target.caps.this_machine:  # the log is read here: what the follower had not read yet
        offset = watcher.freeze()
        watcher.stop()
        return log_rest(target, log, offset)
    if watcher.tail_process is None:
        watcher.done.wait(3.0)
        return b""
    return log_rest(target, log, watcher.freeze(), end_tail=watcher.tail_process)


class Watcher:
    """Streams the device log to ``sink`` from a thread; ``done`` is set when the stream ends,
    ``exited`` tells whether it ended because the program did (else the link was cut)."""

    def __init__(self, target, pid: int, since: str, log: str, sink: Callable[[bytes], None], *,
                 keep_lines: int = 40):
        self.target, self.pid, self.since, self.log, self.sink = target, pid, since, log, sink
        self.tail: deque[str] = deque(maxlen=keep_lines)
        self.text = bytearray()  # everything, for the start-up checks
        self.exited = False
        self.error: HexbuildError | None = None
        self.done = threading.Event()
        self.received = 0  # bytes of the log the stream brought: its first ``received`` bytes
        self.tail_process: tuple[int, str] | None = None  # WATCH's tail: (PID, start time)
        self._frozen = False
        self._partial = b""
        self._err = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._read_lock = threading.Lock()
        self._file = None
        if target.caps.this_machine:
            try:
                self._file = open(log, "rb")  # the start made it
            except OSError as e:
                raise RemoteFailed(f"cannot read the log {log}: {e.strerror or e}") from None
        run = self._follow_local if target.caps.this_machine else self._run
        threading.Thread(target=run, name=f"watch-{pid}", daemon=True).start()

    def stop(self) -> None:
        """End a local follower (one on a device ends with the program, or with its tail)."""
        self._stop.set()

    def _on_output(self, stream: str, data: bytes) -> None:
        if stream == "stderr":
            self._err += data
            if EXITED_MARK.encode() in self._err:
                self.exited = True
            if self.tail_process is None and TAIL_MARK.encode() in self._err:
                words = self._err.split(TAIL_MARK.encode(), 1)[1].split(b"\n", 1)
                if len(words) == 2 and len(words[0].split()) == 2 and words[0].split()[0].isdigit():
                    pid, since = words[0].split()
                    self.tail_process = (int(pid), since.decode())
            return
        with self._lock:
            if self._frozen:
                return
            self.received += len(data)
            if len(self.text) < TEXT_LIMIT:
                self.text += data
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()
            for line in lines:
                self.tail.append(line.decode("utf-8", "replace").rstrip("\r"))
            self.sink(data)  # under the lock: what freeze() counted is written before what follows it

    def _run(self) -> None:
        try:
            self.target.run(["sh", "-c", WATCH, "sh", str(self.pid), self.log, EXITED_MARK, self.since, TAIL_MARK],
                            timeout=10 * 365 * 86400.0, on_output=self._on_output)
        except HexbuildError as e:
            self.error = e
        except Exception as e:  # a transport that breaks in its own words
            self.error = RemoteFailed(f"{type(e).__name__}: {e}")
        finally:
            if self._partial:
                self.tail.append(self._partial.decode("utf-8", "replace"))
            self.done.set()

    def _follow_local(self) -> None:
        """The log of a program on this machine, read here as it grows: no shell, tail or sleep
        beside a server that is starting (on 2 cores, they slowed its start)."""
        try:
            while not self._stop.is_set():
                if self.catch_up():
                    continue
                if not pids.running(self.pid, self.since):
                    self.catch_up()  # what it wrote as it ended
                    self.exited = True
                    return
                self._stop.wait(LOCAL_FOLLOW_POLL)
        except OSError as e:
            self.error = RemoteFailed(f"cannot read the log {self.log}: {e.strerror or e}")
        finally:
            with self._read_lock:
                if self._file is not None:
                    self._file.close()
            if self._partial:
                self.tail.append(self._partial.decode("utf-8", "replace"))
            self.done.set()

    def catch_up(self) -> bool:
        """A local log: pass on at once what it holds now (rather than at the follower's next
        look), so that a stream read after /health said ready has the lines before it. Whether
        there was anything; a device's stream cannot be hurried and has nothing."""
        got = False
        with self._read_lock:
            if self._file is None or self._file.closed:
                return False
            while data := self._file.read(65536):
                self._on_output("stdout", data)
                got = True
        return got

    def freeze(self) -> int:
        """Pass nothing more on (the caller reads the rest itself): how many bytes were passed."""
        with self._lock:
            self._frozen = True
            return self.received

    def startup_text(self) -> str:
        with self._lock:
            return self.text.decode("utf-8", "replace")

    def last_lines(self, n: int = 15) -> list[str]:
        lines = [l for l in self.tail if l.strip()]
        return lines[-n:]
