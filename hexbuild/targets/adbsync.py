"""The adb sync service (``sync:``, AOSP SYNC.TXT and file_sync_protocol.h): files to and from
the device over a connection of adbproto's AdbClient.

``SEND`` (v1) carries ``PATH,MODE`` then the raw file in ``DATA`` packets of at most 64 KiB, then
``DONE`` + mtime; the device answers ``OKAY`` or ``FAIL`` + message. ``SND2`` (sync v2, devices
listing ``sendrecv_v2``) carries the path, then ``SND2`` + mode + flags (brotli 1, lz4 2, zstd 4,
dry run 0x80000000: read and discard); with a compression flag the ``DATA`` packets carry one
compressed stream of the whole file. Nothing has to be asked of the transport first: the
server relays the stream, and the device's features (its banner, which ``host-serial:SERIAL:
features`` returns) say what it decodes. Several sync connections may run at once
(``push_lanes``): the server multiplexes them over the device's one transport.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from pathlib import Path
import io
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from .adbproto import SYNC_DATA_MAX, AdbClient, AdbError, Conn

SEND_BATCH = 16  # DATA packets per send (1 MiB): fewer system calls per byte
# files sent whose OKAY has not come back when the next one starts. One: the next file leaves
# while the device still writes the last (at 40 MB/s, 217 MB of libraries: 1.98 s against 2.13 s
# with none, adb push 1.90 s; four gained nothing more), and a dropped link loses at most that one
# file (one a lane: push_lanes), which the next run sends again
IN_FLIGHT = 1
AHEAD_BLOCKS = 32  # compressed blocks (of 1 MiB read each) the compressing thread may be ahead
SYNC_FLAG_BROTLI, SYNC_FLAG_LZ4, SYNC_FLAG_ZSTD, SYNC_FLAG_DRY_RUN = 1, 2, 4, 0x8000_0000


@dataclass
class Upload:
    local: Path
    remote: str
    mode: int = 0o644
    zstd_level: int | None = None  # sync v2 with zstd at this level; None: v1 SEND, raw
    started: float = 0.0  # perf_counter when its request went out
    landed: float = 0.0  # perf_counter when its OKAY came back


def push(client: AdbClient, serial: str, local: Path, remote: str, *, mode: int, timeout: float,
         progress: Callable[..., None] | None = None, zstd_level: int | None = None) -> int:
    """SEND one file; returns the bytes its DATA packets carried (see push_many)."""
    return push_many(client, serial, [Upload(local, remote, mode, zstd_level)], timeout=timeout,
                     progress=progress)[0]


def push_many(client: AdbClient, serial: str, uploads: Iterable[Upload], *, timeout: float,
              progress: Callable[..., None] | None = None,
              sent: Callable[[Upload, int], None] | None = None, ahead: bool = True) -> list[int]:
    """SEND each upload on one sync connection; the bytes each one's DATA packets carried.

    adbd creates missing parent directories and applies the mode. One connection serves them all
    (no transport and ``sync:`` round trips per file); at most ``IN_FLIGHT`` files wait for their
    OKAY while the next one goes, so when the link drops every acknowledged file is whole on the
    device for the next run to keep (adb push's deferred acknowledgements would lose every
    megabyte still in the buffers). ``progress(file_bytes, wire_bytes)`` per batch;
    ``sent(upload, wire)`` once the upload is on the device (its ``started`` and ``landed``
    timed); ``uploads`` may be a generator that decides each file when its turn comes.
    ``timeout`` bounds the time without progress.

    With ``zstd_level``: sync v2 (``SND2``, flag zstd) — the whole file is one zstd frame cut
    into DATA packets of at most 64 KiB, as adb 33+ sends it; only for a device whose features
    list ``sendrecv_v2_zstd``. Without: v1 ``SEND``, raw, which every adbd takes.

    ``ahead=False``: each upload is taken from ``uploads`` only when its turn comes, and its
    frame compressed in this thread (``push_lanes``: a lane holds no file another could send)."""
    wires: list[int] = []
    pending: deque[tuple[Upload, int]] = deque()

    def land(block: bool) -> None:
        """Take the OKAYs that arrived (``block``: wait for the oldest)."""
        while pending and (block or c.readable()):
            sync_status(c)
            up, wire = pending.popleft()
            up.landed = time.perf_counter()
            if sent:
                sent(up, wire)
            block = False

    with client.transport(serial, timeout) as c, (Ahead(uploads) if ahead else nullcontext(_inline(uploads))) as ahead:
        c.request("sync:")
        for up, frame in ahead:
            while len(pending) > IN_FLIGHT:
                land(block=True)
            up.started = time.perf_counter()
            mode = 0o100000 | (up.mode & 0o7777)
            if frame is None:
                spec = f"{up.remote},{mode}".encode("utf-8")
                c.send(b"SEND" + struct.pack("<I", len(spec)) + spec)
                with open(up.local, "rb", buffering=0) as f:
                    wires.append(_send_raw(c, f, timeout, progress, lambda: land(False)))
            else:
                path = up.remote.encode("utf-8")
                c.send(b"SND2" + struct.pack("<I", len(path)) + path
                       + b"SND2" + struct.pack("<II", mode, SYNC_FLAG_ZSTD))
                wires.append(_send(c, frame, timeout, progress, lambda: land(False)))
            c.send(b"DONE" + struct.pack("<I", int(time.time())))
            pending.append((up, wires[-1]))
        while pending:
            land(block=True)
        c.send(b"QUIT" + struct.pack("<I", 0))
    return wires


def push_lanes(client: AdbClient, serial: str, uploads: Iterable[Upload], *, lanes: int, timeout: float,
               progress: Callable[..., None] | None = None,
               sent: Callable[[Upload, int], None] | None = None) -> None:
    """``push_many`` on ``lanes`` sync connections at once, each taking the next upload when it is
    free (given largest first, the largest file has a lane of its own while the others share
    the rest): on a fast link one connection is bound by its round trips (wire.LANES). The
    callbacks are called under one lock; when a lane fails, the others stop at their next batch
    and the first error is raised. One lane is ``push_many`` itself, with its read-ahead."""
    if lanes <= 1:
        push_many(client, serial, uploads, timeout=timeout, progress=progress, sent=sent)
        return
    source = iter(uploads)
    lock = threading.RLock()
    failed = threading.Event()
    errors: list[BaseException] = []

    def take() -> Iterator[Upload]:
        while not failed.is_set():
            with lock:
                up = next(source, None)
            if up is None:
                return
            yield up

    def on_progress(*a: Any) -> None:
        if failed.is_set():
            raise _Stopped
        if progress:
            with lock:
                progress(*a)

    def on_sent(up: Upload, wire: int) -> None:
        if sent:
            with lock:
                sent(up, wire)

    def lane() -> None:
        try:
            push_many(client, serial, take(), timeout=timeout, progress=on_progress, sent=on_sent, ahead=False)
        except BaseException as e:
            failed.set()
            errors.append(e)

    threads = [threading.Thread(target=lane, name=f"hexbuild-lane-{i}", daemon=True) for i in range(lanes)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C in the waiting thread: the lanes stop at their next batch
        failed.set()
        for t in threads:
            t.join()
        raise
    first = next((e for e in errors if not isinstance(e, _Stopped)), None)
    if first is not None:
        raise first


class _Stopped(Exception):
    pass


def _inline(uploads: Iterable[Upload]) -> Iterator[tuple[Upload, Iterator[tuple[int, list[bytes]]] | None]]:
    """``Ahead``'s items with nothing read ahead: the next upload is taken, and its frame
    compressed, in the caller's thread when it asks."""
    for up in uploads:
        if up.zstd_level is None:
            yield up, None
        else:
            with open(up.local, "rb", buffering=0) as f:
                yield up, _zstd_blocks(f, up.zstd_level)


class Ahead:
    """The uploads, with each zstd frame compressed by a thread of its own up to ``AHEAD_BLOCKS``
    blocks ahead of the link, and on into the next file while this one's tail is still going
    out: the link no longer waits while zstd finishes a file's last jobs and fills the next
    file's first (at 20 MB/s, 0.1-0.2 s at each large file). Iterating gives (upload, its
    frame's blocks, or None for a raw upload, which the caller reads from the file itself)."""

    def __init__(self, uploads: Iterable[Upload]) -> None:
        self._q: queue.Queue = queue.Queue(maxsize=AHEAD_BLOCKS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(iter(uploads),), name="hexbuild-zstd", daemon=True)

    def __enter__(self) -> "Ahead":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():  # a producer blocked on a full queue sees the stop
            self._thread.join(0.05)

    def _put(self, item: tuple) -> None:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue
        raise _Stopped

    def _run(self, uploads: Iterator[Upload]) -> None:
        try:
            for up in uploads:  # the caller's generator decides each file here, a file early
                if up.zstd_level is None:
                    self._put(("raw", up))
                    continue
                self._put(("zstd", up))
                with open(up.local, "rb", buffering=0) as f:
                    for block in _zstd_blocks(f, up.zstd_level):
                        self._put(("block", block))
                self._put(("end", None))
            self._put(("done", None))
        except _Stopped:
            pass
        except BaseException as e:  # raised where the caller reads
            try:
                self._put(("error", e))
            except _Stopped:
                pass

    def _get(self) -> tuple:
        kind, value = self._q.get()
        if kind == "error":
            raise value
        return kind, value

    def __iter__(self) -> Iterator[tuple[Upload, Iterator[tuple[int, list[bytes]]] | None]]:
        while True:
            kind, up = self._get()
            if kind == "done":
                return
            yield up, (None if kind == "raw" else self._frame())

    def _frame(self) -> Iterator[tuple[int, list[bytes]]]:
        while True:
            kind, block = self._get()
            if kind == "end":
                return
            yield block


def dry_runs(client: AdbClient, serial: str, remote: str, data: bytes, *, runs: int, timeout: float) -> list[float]:
    """Seconds of each of ``runs`` raw sync v2 dry runs of ``data`` (``sendrecv_v2_dry_run_send``:
    the device reads it and discards it), one after the other on one connection: each is timed
    from its SND2 to the device's OKAY, so the connection's own set-up is not in the figure (at
    300 MB/s it made a 1 MiB run read 170-190 MB/s where pushes went at 235-265)."""
    times = []
    with client.transport(serial, timeout) as c:
        c.request("sync:")
        path = remote.encode("utf-8")
        for _ in range(runs):
            t = time.perf_counter()
            c.send(b"SND2" + struct.pack("<I", len(path)) + path + b"SND2" + struct.pack("<II", 0o100644, SYNC_FLAG_DRY_RUN))
            _send_raw(c, io.BytesIO(data), timeout, None, lambda: None)
            c.send(b"DONE" + struct.pack("<I", 0))
            sync_status(c)
            times.append(time.perf_counter() - t)
        c.send(b"QUIT" + struct.pack("<I", 0))
    return times


def push_bytes(client: AdbClient, serial: str, data: bytes, remote: str, *, mode: int, timeout: float) -> None:
    with client.transport(serial, timeout) as c:
        c.request("sync:")
        spec = f"{remote},{0o100000 | (mode & 0o7777)}".encode("utf-8")
        c.send(b"SEND" + struct.pack("<I", len(spec)) + spec)
        for i in range(0, len(data), SYNC_DATA_MAX):
            part = data[i:i + SYNC_DATA_MAX]
            c.send(b"DATA" + struct.pack("<I", len(part)) + part)
        c.send(b"DONE" + struct.pack("<I", int(time.time())))
        sync_status(c)
        c.send(b"QUIT" + struct.pack("<I", 0))


def stat(client: AdbClient, serial: str, remote: str, *, timeout: float) -> tuple[int, int, int]:
    """(mode, size, mtime); mode 0 when the path does not exist."""
    with client.transport(serial, timeout) as c:
        c.request("sync:")
        p = remote.encode("utf-8")
        c.send(b"STAT" + struct.pack("<I", len(p)) + p)
        ident, mode, size, mtime = struct.unpack("<4sIII", c.recv_exact(16))
        if ident != b"STAT":
            raise AdbError(f"unexpected sync answer {ident!r}")
        c.send(b"QUIT" + struct.pack("<I", 0))
        return mode, size, mtime


def pull_bytes(client: AdbClient, serial: str, remote: str, *, timeout: float) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    mode, _, _ = stat(client, serial, remote, timeout=timeout)
    if mode == 0:
        return None
    with client.transport(serial, timeout) as c:
        c.request("sync:")
        p = remote.encode("utf-8")
        c.send(b"RECV" + struct.pack("<I", len(p)) + p)
        out = bytearray()
        while True:
            ident, n = struct.unpack("<4sI", c.recv_exact(8))
            if ident == b"DATA":
                out += c.recv_exact(n)
            elif ident == b"DONE":
                break
            elif ident == b"FAIL":
                msg = c.recv_exact(n).decode("utf-8", "replace")
                raise AdbError(msg)
            else:
                raise AdbError(f"unexpected sync answer {ident!r}")
        c.send(b"QUIT" + struct.pack("<I", 0))
        return bytes(out)


def _send_raw(c: Conn, f: Any, timeout: float, progress: Callable[..., None] | None,
              between: Callable[[], None]) -> int:
    """A file as DATA packets, read straight into one buffer of SEND_BATCH packets (header, data,
    header, data...) and sent with one call: no copy of the bytes between the file and the socket
    (at 300 MB/s the copies cost a raw push a tenth of its time against adb's own)."""
    step = 8 + SYNC_DATA_MAX
    buf = bytearray(step * SEND_BATCH)
    view = memoryview(buf)
    plain = isinstance(getattr(c, "s", None), socket.socket)  # a paramiko channel wants bytes
    wire = 0
    while True:
        end = packets = 0
        while packets < SEND_BATCH:
            n = f.readinto(view[end + 8:end + step])
            if not n:
                break
            struct.pack_into("<4sI", buf, end, b"DATA", n)
            end += 8 + n
            packets += 1
        if not end:
            return wire
        c.send(view[:end] if plain else bytes(view[:end]))
        c.extend(timeout)
        n = end - 8 * packets
        wire += n
        if progress:
            progress(n, None)
        between()


def _zstd_blocks(f: Any, level: int) -> Iterator[tuple[int, list[bytes]]]:
    from .wire import zstd_frame

    # the frame comes in pieces of exactly SYNC_DATA_MAX bytes: one DATA packet each
    return zstd_frame(f, level, SYNC_DATA_MAX, block=SYNC_DATA_MAX * SEND_BATCH)


def _send(c: Conn, blocks: Iterator[tuple[int, list[bytes]]], timeout: float,
          progress: Callable[..., None] | None, between: Callable[[], None]) -> int:
    """A compressed frame's blocks as DATA packets, several per send (fewer system calls per
    byte); ``progress(file bytes, wire bytes)`` per block."""
    wire = 0
    for nread, pieces in blocks:
        out = bytearray()
        for piece in pieces:
            out += b"DATA" + struct.pack("<I", len(piece))
            out += piece
        if out:
            c.send(out)
            c.extend(timeout)
        n = sum(map(len, pieces))
        wire += n
        if progress and (nread or n):
            progress(nread, n)
        between()
    return wire


def sync_status(c: Conn) -> None:
    ident, n = struct.unpack("<4sI", c.recv_exact(8))
    if ident == b"OKAY":
        return
    if ident == b"FAIL":
        raise AdbError(c.recv_exact(n).decode("utf-8", "replace"))
    raise AdbError(f"unexpected sync answer {ident!r}")
