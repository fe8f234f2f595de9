"""A gzip writer that compresses on every core and still gives the same bytes everywhere.

Deflate is the slow part of a release tarball (one core does ~40 MB/s). Like pigz, the input is
cut into fixed 1 MiB blocks; each block is deflated on its own thread, primed with the last
32 KiB of the block before it (so the ratio matches plain gzip), and ends with a sync flush so
the pieces join into one valid deflate stream. Block boundaries depend only on the data, never
on the thread count or the sizes passed to write(): the output is reproducible. zlib releases
the GIL while it compresses, so plain threads scale.

The header carries no file name and mtime 0, exactly like ``gzip.GzipFile(filename="", mtime=0)``.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

BLOCK = 1 << 20
WINDOW = 32 * 1024


def _deflate(block: bytes, primer: bytes, level: int) -> bytes:
    if primer:
        c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY, primer)
    else:
        c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
    return c.compress(block) + c.flush(zlib.Z_SYNC_FLUSH)


class ParallelGzipWriter:
    """File-like (write/flush/close): gzip of everything written, into ``fileobj``."""

    def __init__(self, fileobj: BinaryIO, *, level: int = 6, threads: int | None = None):
        self.fileobj = fileobj
        self.level = level
        self.threads = max(1, threads or os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(max_workers=self.threads) if self.threads > 1 else None
        self._pending: deque[Future[bytes]] = deque()
        self._buf = bytearray()
        self._primer = b""
        self._crc = 0
        self._size = 0
        self._closed = False
        xfl = b"\x02" if level == 9 else b"\x04" if level == 1 else b"\x00"
        self.fileobj.write(b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + xfl + b"\xff")

    def write(self, data: bytes) -> int:
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._buf += data
        while len(self._buf) >= BLOCK:
            self._submit(bytes(self._buf[:BLOCK]))
            del self._buf[:BLOCK]
        return len(data)

    def _submit(self, block: bytes) -> None:
        primer, self._primer = self._primer, block[-WINDOW:]
        if self._pool is None:
            self.fileobj.write(_deflate(block, primer, self.level))
            return
        self._pending.append(self._pool.submit(_deflate, block, primer, self.level))
        while len(self._pending) > 2 * self.threads:
            self.fileobj.write(self._pending.popleft().result())

    def tell(self) -> int:
        """Uncompressed bytes written so far (what tarfile expects of a stream)."""
        return self._size

    def flush(self) -> None:
        """Nothing to do: blocks are cut at fixed offsets, never early (that would change the bytes)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._buf:
                self._submit(bytes(self._buf))
                self._buf.clear()
            while self._pending:
                self.fileobj.write(self._pending.popleft().result())
            # A final, empty block closes the deflate stream.
            self.fileobj.write(zlib.compressobj(self.level, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH))
            self.fileobj.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop the threads without writing the rest (an error or Ctrl-C is unwinding)."""
        self._closed = True
        for f in self._pending:
            f.cancel()
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "ParallelGzipWriter":
        return self

    def __exit__(self, exc_type, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
