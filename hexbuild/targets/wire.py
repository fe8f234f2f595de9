"""How each file travels over an adb link: one zstd frame (sync v2) or raw (v1 ``SEND``).

adb 33+ compresses every push with zstd when the device lists ``sendrecv_v2_zstd``. That is
right on a USB 2 or wireless link, where the link is the bottleneck and a library shrinks to a
third. It is wrong in two cases, and this module tells them apart per file:

- the bytes do not compress: GGUF weights (quantized blocks, 0.95 of their size at best) and
  anything whose sample saves less than ``MIN_SAVING`` go raw;
- the link is faster than this machine compresses: on a USB 3 link (300 MB/s) zstd level 1 on
  a loaded laptop core is the bottleneck, and raw is faster. Before a large push the link is
  measured once with a dry-run ``SND2`` (the device reads and discards the bytes; adbd lists
  ``sendrecv_v2_dry_run_send``), compression speed is measured on each file's sample, and a
  file is compressed only where the estimate says it arrives sooner.

Small pushes skip the measurement (it would cost more than it can save) and compress as adb
does. Devices without the feature get v1 ``SEND``, as every adbd takes.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

ZSTD_LEVEL = 1  # what adb's own ZstdEncoder uses: 300+ MB/s a core, a library to ~0.35
FEATURE_ZSTD = "sendrecv_v2_zstd"
FEATURE_DRY_RUN = "sendrecv_v2_dry_run_send"
MIN_SAVING = 0.10  # a sample that shrinks less than this goes raw
MIN_SIZE = 64 * 1024  # one DATA packet either way: nothing to win
SAMPLE_SLICE = 128 * 1024  # three slices (start, middle, end) make a file's sample
PROBE_BYTES = 2 << 20  # the dry-run push that measures the link (a shaper's burst skews less)
PROBE_FROM = 16 << 20  # compressible bytes in a push before the probe pays for itself
# compressing shares this machine's CPU with the adb server (and, for a virtual device, with
# adbd): ask for a clear win before giving up raw's simplicity
MARGIN = 1.1
OBSERVE_FROM = 4 << 20  # a push this large measures its way (smaller ones are mostly latency)
RATES_KEPT = 30  # the compression speed is the median of the last samples (the load changes)
GGUF_MAGIC = b"GGUF"


@dataclass
class Choice:
    level: int | None  # zstd level, or None: raw
    reason: str  # zstd | raw:feature | raw:small | raw:gguf | raw:incompressible | raw:fast-link
    ratio: float | None = None  # the sample's compressed / original size


@dataclass
class WirePolicy:
    """One device's choices for one run; ``probe(nbytes) -> seconds`` pushes ``nbytes`` as a
    dry run (None when the device cannot)."""

    zstd: bool
    probe: Callable[[int], float] | None = None
    min_size: int = MIN_SIZE  # smaller files go raw: compressing them cannot win back its fixed cost
    link_rate: float | None = None  # raw bytes/s the link carried in the probe
    rates: list[float] = field(default_factory=list)  # zstd level-1 bytes/s measured on samples
    seen: dict[bool, float] = field(default_factory=dict)  # compressed? -> file bytes/s of the last large push
    _cctx: object = None

    @classmethod
    def for_features(cls, features: Iterable[str], probe: Callable[[int], float] | None) -> "WirePolicy":
        feats = set(features)
        return cls(zstd=FEATURE_ZSTD in feats, probe=probe if FEATURE_DRY_RUN in feats else None)

    # -- before a push --------------------------------------------------------------------------
    def expect(self, files: Iterable[Path]) -> None:
        """A push of ``files`` is about to start: measure the link when it is large enough."""
        if not self.zstd or self.probe is None or self.link_rate is not None:
            return
        total = 0
        for f in files:
            size = _size(f)
            if size >= MIN_SIZE and not _is_gguf(f):
                total += size
        if total < PROBE_FROM:
            return
        empty = self.probe(0)  # the round trip alone, taken off the measurement below
        full = self.probe(PROBE_BYTES)
        self.link_rate = PROBE_BYTES / max(full - empty, 1e-4)

    # -- per file ------------------------------------------------------------------------------
    def choose(self, local: Path) -> Choice:
        if not self.zstd:
            return Choice(None, "raw:feature")
        size = _size(local)
        if size < self.min_size:
            return Choice(None, "raw:small")
        if _is_gguf(local):
            return Choice(None, "raw:gguf")
        ratio = self._sample(local, size)
        if ratio > 1 - MIN_SAVING:
            return Choice(None, "raw:incompressible", ratio)
        if len(self.seen) == 2:
            # whole files of both kinds have gone: what they achieved beats any estimate (the
            # compression here shares the CPU with everything else on this machine)
            if self.seen[True] < self.seen[False] * MARGIN:
                return Choice(None, "raw:fast-link", ratio)
        elif self.link_rate is not None and self.rates:
            compress = statistics.median(self.rates)
            # pipelined: the slower of compressing and carrying the smaller stream
            zstd_s = max(1 / compress, ratio / self.link_rate) * MARGIN
            if zstd_s >= 1 / self.link_rate:
                return Choice(None, "raw:fast-link", ratio)
        return Choice(ZSTD_LEVEL, "zstd", ratio)

    def observe(self, size: int, seconds: float, compressed: bool) -> None:
        """A file of ``size`` bytes went over in ``seconds`` (to the device's OKAY)."""
        if size >= OBSERVE_FROM and seconds > 0:
            self.seen[compressed] = size / seconds

    def order(self, files: list[Path]) -> list[int]:
        """The order to send ``files`` in: after a link measurement, smallest first, so the
        first files show what compression achieves on this link before the large ones go."""
        if self.link_rate is None:
            return list(range(len(files)))
        return sorted(range(len(files)), key=lambda i: _size(files[i]))

    def _sample(self, local: Path, size: int) -> float:
        """compressed/original of three slices; each slice's compression speed joins ``rates``."""
        import zstandard

        if self._cctx is None:
            self._cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        cctx: zstandard.ZstdCompressor = self._cctx  # type: ignore[assignment]
        raw = packed = 0
        with open(local, "rb") as f:
            for at in sorted({0, max(0, size // 2 - SAMPLE_SLICE // 2), max(0, size - SAMPLE_SLICE)}):
                f.seek(at)
                chunk = f.read(SAMPLE_SLICE)
                t = time.perf_counter()
                out = cctx.compress(chunk)
                dt = time.perf_counter() - t
                raw += len(chunk)
                packed += len(out)
                if len(chunk) == SAMPLE_SLICE and dt > 0:
                    self.rates.append(len(chunk) / dt)
        del self.rates[:-RATES_KEPT]
        return packed / raw if raw else 1.0


def zstd_frame(f: BinaryIO, level: int, piece: int, *, checksum: bool = False,
               block: int = 1 << 20) -> Iterator[tuple[int, list[bytes]]]:
    """The whole of ``f`` as one zstd frame: per ``block`` read, (the bytes read, the frame's
    pieces ready so far — each exactly ``piece`` bytes but the last)."""
    import zstandard

    size = os.fstat(f.fileno()).st_size
    chunker = zstandard.ZstdCompressor(level=level, write_checksum=checksum).chunker(size=size, chunk_size=piece)
    while True:
        data = f.read(block)
        yield len(data), list(chunker.compress(data) if data else chunker.finish())
        if not data:
            return


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _is_gguf(path: Path) -> bool:
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False
