"""A look at the adb wire between the adb server and a real adbd, for the sync tests.

``AdbWireProxy`` sits on the TCP link between the (real) adb server and a (real) adbd: the server
connects to the proxy (``adb connect 127.0.0.1:PROXY``), the proxy to adbd. It reads the adb
messages (24-byte header, payload) both ways and changes one thing when asked: the ``features=``
list of adbd's ``CNXN`` banner, from which the server learns what the device speaks. Dropping
``sendrecv_v2*`` there makes the device an older phone for every client (the server reports
what the banner said; adbd itself is untouched) — no older adbd exists on this machine, so the
emulation sits at the lowest layer possible.

It also parses the sync streams the server forwards to adbd (``sync:`` services) and records
every file request: v1 ``SEND`` or v2 ``SND2`` with its flags, the path, and the bytes its
``DATA`` packets carried — what was on the wire, independent of what hexbuild reports.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

import pytest

A_CNXN, A_OPEN, A_WRTE, A_CLSE = 0x4E584E43, 0x4E45504F, 0x45545257, 0x45534C43
V2_FEATURES = ("sendrecv_v2", "sendrecv_v2_brotli", "sendrecv_v2_lz4", "sendrecv_v2_zstd",
               "sendrecv_v2_dry_run_send")
# sync requests whose length word is followed by that many bytes of path
_PATH_REQUESTS = {b"SEND", b"SND2", b"RECV", b"RCV2", b"STAT", b"STA2", b"LST2", b"LIST", b"LIS2"}


@dataclass
class SyncSend:
    version: int  # 1: SEND, 2: SND2
    path: str
    flags: int = 0  # SND2's flags (zstd 4, dry run 0x80000000)
    data_bytes: int = 0  # the DATA payloads: what the link carried for the file
    max_data: int = 0  # the largest DATA payload
    done: bool = False
    stream: int = 0  # the sync connection it went on (the server's local id)


@dataclass
class _SyncStream:
    buf: bytearray = field(default_factory=bytearray)
    current: SyncSend | None = None
    id: int = 0


class AdbWireProxy:
    def __init__(self, upstream_port: int, *, drop_features: tuple[str, ...] = (), host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.drop = set(drop_features)
        self.sends: list[SyncSend] = []  # finished (DONE)
        self.begun: list[SyncSend] = []  # every SEND/SND2 that started, finished or not
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    def file_sends(self) -> list[SyncSend]:
        """The finished SEND/SND2 requests that wrote a file (dry runs left out)."""
        with self.lock:
            return [s for s in self.sends if s.done and not s.flags & 0x8000_0000]

    def dry_runs(self) -> list[SyncSend]:
        """The finished SND2 dry runs (the device read and discarded their DATA)."""
        with self.lock:
            return [s for s in self.sends if s.done and s.flags & 0x8000_0000]

    def _serve(self) -> None:
        while not self.closed:
            try:
                down, _ = self.sock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            self._conns += [down, up]
            streams: dict[int, _SyncStream] = {}
            threading.Thread(target=self._pump, args=(down, up, streams, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, streams, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, streams: dict[int, _SyncStream], to_device: bool) -> None:
        try:
            while True:
                head = _read(src, 24)
                if head is None:
                    break
                cmd, arg0, arg1, length, _, magic = struct.unpack("<6I", head)
                data = _read(src, length) if length else b""
                if data is None:
                    break
                if not to_device and cmd == A_CNXN and self.drop:
                    data = self._rewrite_banner(data)
                    head = struct.pack("<6I", cmd, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF, magic)
                if to_device:
                    self._observe(cmd, arg0, data, streams)
                dst.sendall(head + data)
        except OSError:
            pass  # the other side, or close(), ended the connection while bytes were in flight
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _rewrite_banner(self, data: bytes) -> bytes:
        banner = data.rstrip(b"\0").decode("utf-8", "replace")
        parts = []
        for part in banner.split(";"):
            if part.startswith("features=") or "::features=" in part:
                key, _, value = part.rpartition("features=")
                kept = [f for f in value.split(",") if f not in self.drop]
                part = key + "features=" + ",".join(kept)
            parts.append(part)
        return ";".join(parts).encode("utf-8")

    # -- the sync streams the server opens on the device ---------------------------------------
    def _observe(self, cmd: int, local_id: int, data: bytes, streams: dict[int, _SyncStream]) -> None:
        if cmd == A_OPEN and data.rstrip(b"\0") == b"sync:":
            streams[local_id] = _SyncStream(id=local_id)
        elif cmd == A_WRTE and local_id in streams:
            st = streams[local_id]
            st.buf += data
            self._parse(st)
        elif cmd == A_CLSE:
            streams.pop(local_id, None)

    def _parse(self, st: _SyncStream) -> None:
        buf = st.buf
        while len(buf) >= 8:
            ident, n = bytes(buf[:4]), struct.unpack("<I", buf[4:8])[0]
            if ident in _PATH_REQUESTS:
                extra = 12 if ident == b"SND2" else 8 if ident == b"RCV2" else 0
                if len(buf) < 8 + n + extra:
                    return
                path = bytes(buf[8:8 + n]).decode("utf-8", "replace")
                if ident == b"SEND":
                    st.current = SyncSend(1, path.rsplit(",", 1)[0], stream=st.id)
                elif ident == b"SND2":
                    _, _, flags = struct.unpack("<4sII", buf[8 + n:8 + n + 12])
                    st.current = SyncSend(2, path, flags, stream=st.id)
                if ident in (b"SEND", b"SND2"):
                    with self.lock:
                        self.begun.append(st.current)
                del buf[:8 + n + extra]
            elif ident == b"DATA":
                if len(buf) < 8 + n:
                    return
                if st.current is not None:
                    st.current.data_bytes += n
                    st.current.max_data = max(st.current.max_data, n)
                del buf[:8 + n]
            elif ident == b"DONE":
                if st.current is not None:
                    st.current.done = True
                    with self.lock:
                        self.sends.append(st.current)
                    st.current = None
                del buf[:8]
            else:  # QUIT and anything else: no payload
                del buf[:8]

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        for s in self._conns:
            try:
                s.close()
            except OSError:
                pass


def _read(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


# -- fixtures -----------------------------------------------------------------------------------------
@pytest.fixture
def wire_device(make_device, adb_server):
    """wire_device(drop_features=(), **make_device kwargs) → (VirtualDevice, AdbWireProxy): a real
    adbd reached by the adb server through the proxy, whose serial is ``proxy.serial``."""
    made: list[AdbWireProxy] = []

    def make(drop_features: tuple[str, ...] = (), **kw):
        dev = make_device(**kw)
        proxy = AdbWireProxy(dev.port, drop_features=drop_features, host=dev.address)
        made.append(proxy)
        adb_server("connect", proxy.serial)
        adb_server.wait_state(proxy.serial, "device")
        return dev, proxy

    yield make
    for proxy in made:
        adb_server("disconnect", proxy.serial, check=False)
        proxy.close()
