"""A client for the adb *server*'s smart-socket protocol (the one `adb` itself speaks to port 5037).

Why not spawn the `adb` binary per call: one TCP connection per operation costs about a
millisecond where a process costs tens; pushes report progress per 64 KiB chunk; every call has
a socket timeout; and the same code runs unchanged over any socket-like stream — a TCP socket
to a local or remote server, or a paramiko ``direct-tcpip`` channel to the server on an SSH host
(adb+ssh). The server still owns USB, auth and the device list, so hexbuild never fights it for
the device (adb_shell's USBErrorBusy class of bugs).

Protocol (AOSP packages/modules/adb/{OVERVIEW,SERVICES,SYNC}.TXT): a request is 4 hex digits of
length plus the service name; the answer is ``OKAY`` or ``FAIL`` + 4-hex length + message.
``host:transport:SERIAL`` binds the socket to one device; the next request (``sync:``,
``shell,v2,raw:CMD``) is then forwarded to that device's adbd. The sync service (files) is
adbsync.py's.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

SYNC_DATA_MAX = 64 * 1024  # the largest sync DATA packet (and shell stdin packet) adbd takes
# shell protocol v2 packet ids (adb/shell_protocol.h)
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN = 0, 1, 2, 3, 4


class AdbError(Exception):
    """The server or the device said no (``FAIL``), or the stream broke."""


class AdbConnectError(AdbError):
    """No adb server answers at the address."""


class AdbTimeout(AdbError):
    pass


class AdbStreamClosed(AdbError):
    """An open stream ended without its end marker: the device (or the server) went away."""


class Stream(Protocol):
    def sendall(self, data: bytes) -> Any: ...
    def recv(self, n: int) -> bytes: ...
    def settimeout(self, t: float | None) -> Any: ...
    def close(self) -> Any: ...


Connector = Callable[[float], Stream]  # timeout -> a fresh connection to the adb server


def tcp_connector(host: str, port: int) -> Connector:
    # getaddrinfo encodes a str host with the idna codec (stringprep, unicodedata: a few ms of
    # imports on every run); an ASCII name or address as bytes needs none of it.
    address = host.encode("ascii") if host.isascii() else host

    def connect(timeout: float) -> Stream:
        try:
            s = socket.create_connection((address, port), timeout=timeout)
        except OSError as e:
            raise AdbConnectError(f"no adb server at {host}:{port} ({e.strerror or e})") from None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s
    return connect


@dataclass
class DeviceEntry:
    serial: str
    state: str  # device | unauthorized | offline | recovery | ...
    attrs: dict[str, str]


def parse_devices_l(text: str) -> list[DeviceEntry]:
    """``adb devices -l`` / ``host:devices-l`` text → entries (header and blank lines skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("List of devices") or line.startswith("*"):
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        serial, rest = parts[0], parts[1:]
        # "no permissions (...)" is a two-word state with an explanation in parentheses
        if rest[0] == "no" and len(rest) > 1 and rest[1] == "permissions":
            state = "no permissions"
            rest = [w for w in rest[2:] if ":" in w and not w.startswith("(")]
        else:
            state, rest = rest[0], rest[1:]
        attrs = dict(w.split(":", 1) for w in rest if ":" in w)
        out.append(DeviceEntry(serial, state, attrs))
    return out


class Conn:
    """One smart-socket connection with a deadline for everything done on it."""

    def __init__(self, stream: Stream, timeout: float):
        self.s = stream
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise AdbTimeout(f"no answer within {self.timeout:g}s")
        self.s.settimeout(left)

    def extend(self, timeout: float) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def send(self, data: bytes) -> None:
        self._arm()
        try:
            self.s.sendall(data)
        except (socket.timeout, TimeoutError):
            raise AdbTimeout(f"no progress within {self.timeout:g}s") from None
        except OSError as e:
            raise AdbError(f"connection to the adb server broke ({e})") from None

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            self._arm()
            try:
                chunk = self.s.recv(n - len(buf))
            except (socket.timeout, TimeoutError):
                raise AdbTimeout(f"no answer within {self.timeout:g}s") from None
            except OSError as e:
                raise AdbStreamClosed(f"connection to the adb server broke ({e})") from None
            if not chunk:
                raise AdbStreamClosed("the adb server closed the connection (device gone?)")
            buf += chunk
        return bytes(buf)

    def readable(self) -> bool:
        """Bytes are waiting to be read (a socket, or a paramiko channel for adb+ssh)."""
        ready = getattr(self.s, "recv_ready", None)
        if ready is not None:
            return bool(ready())
        return bool(select.select([self.s], [], [], 0)[0])

    def recv_some(self, n: int) -> bytes:
        self._arm()
        try:
            return self.s.recv(n)
        except (socket.timeout, TimeoutError):
            raise AdbTimeout(f"no answer within {self.timeout:g}s") from None
        except OSError as e:
            raise AdbError(f"connection to the adb server broke ({e})") from None

    def request(self, service: str) -> None:
        payload = service.encode("utf-8")
        self.send(b"%04x" % len(payload) + payload)
        status = self.recv_exact(4)
        if status == b"OKAY":
            return
        if status == b"FAIL":
            raise AdbError(self.read_string().strip() or "FAIL")
        raise AdbError(f"unexpected answer from the adb server: {status!r}")

    def read_string(self) -> str:
        n = int(self.recv_exact(4), 16)
        return self.recv_exact(n).decode("utf-8", "replace")

    def close(self) -> None:
        try:
            self.s.close()
        except OSError:
            pass

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AdbClient:
    """The adb server reached through ``connector``; ``serial`` selects the device."""

    def __init__(self, connector: Connector, *, timeout: float = 15.0):
        self.connector = connector
        self.timeout = timeout

    def connect(self, timeout: float | None = None) -> Conn:
        t = self.timeout if timeout is None else timeout
        return Conn(self.connector(t), t)

    # -- host services ------------------------------------------------------------------------
    def host_query(self, service: str) -> str:
        with self.connect() as c:
            c.request(service)
            return c.read_string()

    def version(self) -> int:
        return int(self.host_query("host:version"), 16)

    def devices(self) -> list[DeviceEntry]:
        return parse_devices_l(self.host_query("host:devices-l"))

    def connect_device(self, host: str, port: int) -> str:
        """``adb connect HOST:PORT``: the server dials the device's adbd; returns the server's
        answer ("connected to …", "already connected to …" or "failed to connect to …")."""
        return self.host_query(f"host:connect:{host}:{port}")

    def features(self, serial: str) -> set[str]:
        return set(self.host_query(f"host-serial:{serial}:features").strip().split(","))

    def transport(self, serial: str, timeout: float | None = None) -> Conn:
        c = self.connect(timeout)
        try:
            c.request(f"host:transport:{serial}")
        except BaseException:
            c.close()
            raise
        return c

    # -- shell ----------------------------------------------------------------------------------
    def shell_v2(self, serial: str, command: str, *, timeout: float,
                 on_output: Callable[[str, bytes], None] | None = None, stdin: bytes | None = None) -> int:
        """Run ``command`` with ``sh -c`` on the device; stream output; the remote exit code."""
        with self.transport(serial, timeout) as c:
            c.request(f"shell,v2,raw:{command}")
            if stdin:
                for i in range(0, len(stdin), SYNC_DATA_MAX):
                    part = stdin[i:i + SYNC_DATA_MAX]
                    c.send(struct.pack("<BI", ID_STDIN, len(part)) + part)
            c.send(struct.pack("<BI", ID_CLOSE_STDIN, 0))
            while True:
                head = c.recv_exact(5)
                pid, n = struct.unpack("<BI", head)
                data = c.recv_exact(n) if n else b""
                if pid == ID_EXIT:
                    return data[0] if data else 255
                if on_output and pid in (ID_STDOUT, ID_STDERR):
                    on_output("stdout" if pid == ID_STDOUT else "stderr", data)

    def shell_v1(self, serial: str, command: str, *, timeout: float,
                 on_output: Callable[[str, bytes], None] | None = None) -> int:
        """For adbd without shell_v2 (Android < 7): the exit code rides on a sentinel line."""
        marker = b"\x1ehexbuild-rc:"
        with self.transport(serial, timeout) as c:
            c.request(f"shell:{command}; printf '\\036hexbuild-rc:%d\\n' $?")
            data = bytearray()
            while True:
                chunk = c.recv_some(65536)
                if not chunk:
                    break
                data += chunk
        head, sep, tail = bytes(data).rpartition(marker)
        if not sep:
            raise AdbError("the device shell ended without reporting an exit code")
        if on_output and head:
            on_output("stdout", head)
        return int(tail.strip() or b"255")

    # -- ports ----------------------------------------------------------------------------------------
    def forward(self, serial: str, local: str, remote: str) -> None:
        """``adb forward --no-rebind LOCAL REMOTE`` (``tcp:PORT`` specs): the adb server listens
        on this machine's loopback and carries each connection to the device's port."""
        with self.connect() as c:
            c.request(f"host-serial:{serial}:forward:norebind:{local};{remote}")
            # a second status follows once the listener is installed (or could not be)
            status = c.recv_exact(4)
            if status == b"FAIL":
                raise AdbError(c.read_string().strip() or "FAIL")
            if status != b"OKAY":
                raise AdbError(f"unexpected answer from the adb server: {status!r}")

    def kill_forward(self, serial: str, local: str) -> None:
        with self.connect() as c:
            c.request(f"host-serial:{serial}:killforward:{local}")

    def list_forward(self) -> list[tuple[str, str, str]]:
        """(serial, local, remote) for every forward the server holds."""
        out = []
        for line in self.host_query("host:list-forward").splitlines():
            parts = line.split()
            if len(parts) == 3:
                out.append((parts[0], parts[1], parts[2]))
        return out

    def open_tcp(self, serial: str, port: int, *, timeout: float) -> Stream:
        """A byte stream to ``127.0.0.1:PORT`` on the device, carried by the adb server (what a
        forward does per connection, without a listener on the server's host)."""
        c = self.transport(serial, timeout)
        try:
            c.request(f"tcp:{port}")
        except BaseException:
            c.close()
            raise
        c.s.settimeout(None)
        return c.s
