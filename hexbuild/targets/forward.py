"""A device's TCP port on this machine's loopback (``hexbuild serve``), one way per target kind:

- ``local:`` (and ``qemu:``): the program runs here and listens on the port itself (``DirectPort``).
- ``adb`` / ``adb:SERIAL`` (the local adb server): a real ``adb forward`` held by the adb server
  (``AdbServerForward``), so it is what ``adb forward --list`` shows and outlives no one: the
  server drops it when the device goes away, hexbuild removes it on stop.
- ``adb://`` (a remote adb server) and ``adb+ssh://``: ``adb forward`` would listen on *that*
  server's host, so hexbuild listens here instead and carries every accepted connection through
  the adb server's own ``tcp:PORT`` device service (``ListenerForward``).
- ``ssh://``: hexbuild listens here and opens one SSH ``direct-tcpip`` channel per connection on
  the target's existing SSH session (no ``ssh -L`` process, no port opened on the board).

Every listener binds 127.0.0.1 only.
"""

from __future__ import annotations

import errno
import socket
import threading
from typing import Any, Callable

from ..errors import EnvironmentMissing

Opener = Callable[[], Any]  # → a socket-like stream to the device port (sendall/recv/close)


def check_port_free(port: int) -> None:
    """EnvironmentMissing naming the port (and its holder, when this machine can tell) when
    something already listens on 127.0.0.1:PORT."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # connections closing (TIME_WAIT) do not count
    try:
        s.bind(("127.0.0.1", port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            holder = port_holder(port)
            raise EnvironmentMissing(f"local port {port} is in use" + (f" (by {holder})" if holder else ""),
                                     hint="choose another with --port, or stop what listens there") from None
        raise EnvironmentMissing(f"cannot use local port {port}: {e.strerror or e}") from None
    finally:
        s.close()


def port_holder(port: int) -> str | None:
    """"PID N (name)" of the process listening on TCP ``port``, from /proc (Linux; None elsewhere
    or when the process belongs to another user)."""
    import os

    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    name = open(f"/proc/{pid}/comm").read().strip()
                    return f"PID {pid} ({name})"
        except OSError:
            continue
    return None


class Forward:
    """127.0.0.1:``local_port`` here reaches 127.0.0.1:``remote_port`` on the device."""

    how = "none"

    def __init__(self, local_port: int, remote_port: int):
        self.local_port = local_port
        self.remote_port = remote_port

    def alive(self) -> bool:
        return True

    def close(self) -> None:
        pass


class DirectPort(Forward):
    """The program listens on this machine itself: nothing to carry."""

    how = "direct"


class AdbServerForward(Forward):
    how = "adb forward"

    def __init__(self, client: Any, serial: str, local_port: int, remote_port: int):
        super().__init__(local_port, remote_port)
        self.client, self.serial = client, serial
        client.forward(serial, f"tcp:{local_port}", f"tcp:{remote_port}")

    def alive(self) -> bool:
        try:
            return (self.serial, f"tcp:{self.local_port}", f"tcp:{self.remote_port}") in self.client.list_forward()
        except Exception:
            return False

    def close(self) -> None:
        try:
            self.client.kill_forward(self.serial, f"tcp:{self.local_port}")
        except Exception:  # already gone with its device, or the server restarted: nothing to remove
            pass


class ListenerForward(Forward):
    """A listener here; each accepted connection is joined to a fresh stream from ``opener``
    by two pump threads (one per direction, half-closing the other side at EOF)."""

    def __init__(self, local_port: int, remote_port: int, opener: Opener, *, how: str,
                 healthy: Callable[[], bool] = lambda: True):
        super().__init__(local_port, remote_port)
        self.how = how
        self._opener, self._healthy = opener, healthy
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind(("127.0.0.1", local_port))
        except OSError:
            self._sock.close()
            check_port_free(local_port)
            raise
        self._sock.listen(64)
        self._closed = threading.Event()
        self._conns: set[Any] = set()
        self._lock = threading.Lock()
        self.errors: list[str] = []
        threading.Thread(target=self._accept, name=f"forward-{local_port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                remote = self._opener()
            except Exception as e:  # the device side refused: this connection only
                self.errors.append(str(e))
                client.close()
                continue
            with self._lock:
                self._conns.update((client, remote))
            self._join(client, remote)

    def _join(self, client: Any, remote: Any) -> None:
        finished = []
        lock = threading.Lock()

        def pump(src: Any, dst: Any) -> None:
            clean = False
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        clean = True
                        break
                    dst.sendall(data)
            except Exception:  # a reset on either side ends the whole connection
                pass
            with lock:
                finished.append(clean)
                last = len(finished) == 2
            if clean and not last:
                _half_close(dst)  # the other direction may still have bytes to deliver
                return
            for end in (client, remote):
                _close(end)
            with self._lock:
                self._conns.difference_update((client, remote))

        for src, dst in ((client, remote), (remote, client)):
            threading.Thread(target=pump, args=(src, dst), daemon=True).start()

    def alive(self) -> bool:
        return not self._closed.is_set() and self._healthy()

    def close(self) -> None:
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            _close(c)


def _half_close(s: Any) -> None:
    try:
        if hasattr(s, "shutdown_write"):
            s.shutdown_write()  # a paramiko channel
        else:
            s.shutdown(socket.SHUT_WR)
    except Exception:
        pass


def _close(s: Any) -> None:
    try:
        s.close()
    except Exception:
        pass
