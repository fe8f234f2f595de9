"""One deploy at a time per destination: a lock directory beside ``<dest>``.

``<parent>/.<name>.hexbuild.lock/`` is made with ``mkdir`` (atomic on every filesystem and every
mkdir: exactly one of two racing deploys creates it) and holds ``owner``: this machine's host
name, this process's pid, a random token and the device's clock at creation. Its name is
outside the release prefix (``.<name>.hexbuild-``), so the switch's clean-up never touches it.

A second deploy to the same destination waits (``--wait`` seconds, with a progress line) and
then fails with exit 7 naming the holder. A lock is *stale*, and broken with a warning, when
its holder ran on this machine and that pid is gone, or when it is older than ``--stale-lock``
by the device's own clock (so clocks that disagree between machines do not matter). The lock is
released (only when the token is still ours) on success, failure and Ctrl-C. Each target has
its own lock, so ``deploy --all`` never waits on another device.
"""

from __future__ import annotations

import os
import posixpath
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Sequence

from ..errors import DeployFailed, RemoteFailed
from ..targets.base import Target
from ..targets.posix import step_command
from ..ui import ui
from .layout import Layout

POLL_S = 0.5
_THEN = "--hexbuild-lock-then--"  # where the output of the steps after the lock starts
_HELD_RC = 3  # _TRY's exit when another deploy holds the lock: the steps after it do not run
_HELD: set[str] = set()  # tokens of the locks this process holds now
REPORT_EVERY_S = 5.0

# Builtins where a shell has them (echo; mksh's and bash's $EPOCHREALTIME), so that taking
# the lock starts one program (mkdir) and releasing it one (rm).
_TRY = r'''L=$1; shift
P=${L%/*}
if [ ! -d "$P" ]; then
  top=$P; d=${P%/*}
  while [ -n "$d" ] && [ ! -d "$d" ]; do top=$d; d=${d%/*}; done
  mkdir -p "$P" && echo "madedir=$top"
fi
now=${EPOCHREALTIME%.*}
[ -n "$now" ] || now=$(date +%s)
# a lock released between a failed mkdir and the look at it is taken on the next try
got= held=
for i in 1 2 3; do
  if mkdir "$L" 2>/dev/null; then got=1; break; fi
  if [ -d "$L" ]; then held=1; break; fi
done
if [ -n "$got" ]; then
  { for x in "$@"; do echo "$x"; done; echo "started=$now"; } > "$L/owner" || exit 1
  echo acquired
  exit 0
fi
[ -n "$held" ] || { echo "cannot create $L" >&2; exit 1; }
echo held
echo "now=$now"
[ -f "$L/owner" ] && while IFS= read -r line; do echo "$line"; done < "$L/owner"
[ -f "$L/owner" ] || echo "made=$(stat -c %Y "$L" 2>/dev/null)"
exit 3'''
# remove the lock only while it still carries the expected token (ours, or a stale holder's)
_REMOVE = r'''L=$1; tok=$2
[ -d "$L" ] || exit 0
ours=$3
[ -f "$L/owner" ] && while IFS= read -r line; do [ "$line" = "token=$tok" ] && ours=1; done < "$L/owner"
[ -n "$ours" ] || exit 3
rm -rf "$L" || exit 1
# directories the lock created, while nothing else was put in them
top=$4; d=${L%/*}
while [ -n "$top" ] && rmdir "$d" 2>/dev/null && [ "$d" != "$top" ]; do d=${d%/*}; done
exit 0'''


@dataclass
class Holder:
    host: str = "?"
    pid: int | None = None
    token: str = ""
    started: int | None = None  # device clock, seconds
    age_s: float | None = None

    def describe(self) -> str:
        since = f", for {self.age_s:.0f}s" if self.age_s is not None else ""
        return f"host {self.host} pid {self.pid if self.pid is not None else '?'}{since}"


def lock_path(lay: Layout) -> str:
    return posixpath.join(lay.parent, f".{lay.name}.hexbuild.lock")


class DeployLock:
    """``with DeployLock(target, lay, wait=10, stale=3600):`` — held for the block."""

    def __init__(self, target: Target, lay: Layout, *, wait: float, stale: float):
        self.target, self.path, self.wait, self.stale = target, lock_path(lay), wait, stale
        self.token = secrets.token_hex(8)
        self.held = False
        self.waited_s = 0.0
        self.made_dir = ""  # the topmost directory taking the lock created (removed again when empty)

    def __enter__(self) -> "DeployLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self, then: Sequence[tuple[str, Sequence[str]]] = (), what: str = "", *,
                timeout: float | None = None, once: bool = False) -> bytes | None:
        """Take the lock, waiting as the options say. ``then``: ``sh`` steps (script, args) run in
        the device call that takes it (a round trip fewer); their output is returned, and a
        failure of theirs is raised with the lock held (``release`` removes it). ``once``: one
        try, None when another deploy holds the lock (nothing waits, nothing is broken)."""
        t0 = time.monotonic()
        last_report = None
        while True:
            holder, out = self._try(then, what, timeout)
            if holder is None:
                self.waited_s = round(time.monotonic() - t0, 3)
                return out
            if once:
                return None
            why = self._stale(holder)
            if why:
                ui.warn(f"{self.target.spec}: breaking the stale deploy lock {self.path} ({holder.describe()}: {why})")
                self._remove(holder.token, ownerless=not holder.token)
                continue
            waited = time.monotonic() - t0
            if waited >= self.wait:
                raise DeployFailed(  # the target's result names the target (raise_for_failures)
                    f"another deploy holds {self.path} ({holder.describe()})",
                    hint=f"wait for it to finish, or give --wait SECONDS (waited {waited:.0f}s); "
                         f"a lock whose holder is gone or older than --stale-lock ({self.stale:g}s) is broken")
            if last_report is None or time.monotonic() - last_report >= REPORT_EVERY_S:
                ui.info(f"{self.target.spec}: waiting for another deploy to {posixpath.dirname(self.path)} "
                        f"({holder.describe()}); up to {self.wait - waited:.0f}s more")
                last_report = time.monotonic()
            time.sleep(min(POLL_S, max(0.05, self.wait - waited)))

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        _HELD.discard(self.token)
        try:
            self._remove(self.token)
        except Exception as e:  # the device went away: the next deploy finds the lock stale
            ui.warn(f"{self.target.spec}: could not release the deploy lock {self.path}: {e}")

    def release_step(self) -> tuple[str, list[str]]:
        """The release as a step of the caller's last device call (a deploy's switch: one round
        trip fewer); ``released()`` once that call has run. It never fails the call: a lock that
        is no longer ours stays where it is."""
        return "(\n" + _REMOVE + "\n) || true", [self.path, self.token, "", self.made_dir]

    def released(self) -> None:
        self.held = False
        _HELD.discard(self.token)

    # -- device calls ---------------------------------------------------------------------------
    def _try(self, then: Sequence[tuple[str, Sequence[str]]], what: str,
             timeout: float | None) -> tuple[Holder | None, bytes]:
        fields = [f"host={socket.gethostname()}", f"pid={os.getpid()}", f"token={self.token}"]
        what = f"taking the deploy lock {self.path}" + (f" and {what}" if what else "")
        line = " && ".join(step_command(script, args)
                           for script, args in [(_TRY, [self.path, *fields]), (None, ["echo", _THEN]), *then])
        res = self.target.sh(line, what=what, check=False, timeout=timeout)
        head, _, out = res.stdout.partition(f"\n{_THEN}\n".encode())
        lines = head.decode("utf-8", "replace").splitlines()
        if lines and lines[0].startswith("madedir="):
            self.made_dir = lines.pop(0)[len("madedir="):]
        if lines and lines[0] == "acquired":
            self.held = True
            _HELD.add(self.token)
        if res.rc != 0 and not (res.rc == _HELD_RC and lines[:1] == ["held"]):
            last = (res.err.strip() or res.out.strip()).splitlines()[-1:] or [f"exit code {res.rc}"]
            raise RemoteFailed(f"{what} failed on {self.target.spec}: {last[0]}")
        if self.held:
            return None, out
        kv = dict(line.partition("=")[::2] for line in lines[1:] if "=" in line)
        holder = Holder(host=kv.get("host") or "?", token=kv.get("token", ""))
        holder.pid = int(kv["pid"]) if kv.get("pid", "").isdigit() else None
        now = int(kv["now"]) if kv.get("now", "").isdigit() else None
        born = kv.get("started") or kv.get("made") or ""
        holder.started = int(born) if born.isdigit() else None
        if now is not None and holder.started is not None:
            holder.age_s = max(0.0, float(now - holder.started))
        return holder, b""

    def _stale(self, h: Holder) -> str | None:
        if h.age_s is not None and h.age_s > self.stale:
            return f"older than --stale-lock {self.stale:g}s"
        if h.host == socket.gethostname() and h.pid is not None:
            if h.pid != os.getpid() and not _alive(h.pid):
                return "its process is gone"
            if h.pid == os.getpid() and h.token not in _HELD:
                return "left behind by this process (the device went away before it was released)"
        if not h.token and h.age_s is not None and h.age_s > 30:
            return "it has no owner record"  # a holder cut off between mkdir and writing owner
        return None

    def _remove(self, token: str, *, ownerless: bool = False) -> None:
        made = self.made_dir if token == self.token else ""
        res = self.target.sh(_REMOVE, self.path, token, "1" if ownerless else "", made, check=False,
                             what=f"removing the deploy lock {self.path}")
        if res.rc not in (0, 3):
            raise DeployFailed(f"cannot remove the deploy lock {self.path}: "
                               f"{(res.err or res.out).strip() or res.rc}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
