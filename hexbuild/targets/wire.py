"""How each file travels over an adb link: one zstd frame (sync v2) or raw (v1 ``SEND``).

adb 33+ compresses every push with zstd when the device lists ``sendrecv_v2_zstd``. That is
right on a USB 2 or wireless link, where the link is the bottleneck and a library shrinks to a
third. It is wrong in two cases, and this module tells them apart per file:

- the bytes do not compress: GGUF weights (quantized blocks, 0.95 of their size at best) and
  anything whose sample saves less than ``MIN_SAVING`` go raw;
- the link is faster than this machine compresses: on a USB 3 link (300 MB/s) zstd level 1 is
  the bottleneck and raw is faster. Before a large push two dry runs (``SND2`` with flag
  0x80000000: the device reads and discards; adbd lists ``sendrecv_v2_dry_run_send``) time the
  link, and above ``FAST_LINK`` files go raw; once whole files of both kinds have gone, their
  times decide.

Small pushes skip the measurement (it would cost more than it can save) and compress as adb
does. Devices without the feature get v1 ``SEND``, as every adbd takes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

ZSTD_LEVEL = 1  # what adb's own ZstdEncoder uses: 300+ MB/s a core, a library to ~0.35
# On a link measured slower than FAST_LINK the link is the bottleneck: level 2 sends 7 % fewer
# bytes (a library to ~0.30) for 16 % more compression, which zstd's worker threads do while this
# thread waits on the link. At 40 MB/s, 217 MB of libraries: 1.88 s against 1.98 s at level 1
# (adb push 1.89 s); level 3 was slower (2.05 s: the compression no longer kept up on 2 cores).
SLOW_LINK_LEVEL = 2
FEATURE_ZSTD = "sendrecv_v2_zstd"
FEATURE_DRY_RUN = "sendrecv_v2_dry_run_send"
MIN_SAVING = 0.10  # a sample that shrinks less than this goes raw
MIN_SIZE = 64 * 1024  # one DATA packet either way: nothing to win
SAMPLE_SLICE = 128 * 1024  # three slices (start, middle, end) make a file's sample
PROBE_BYTES = 1 << 20  # each of the two dry-run pushes that time the link
# Above this raw rate (as the probe reads it) a push goes raw. zstd level 1 runs at 300-430 MB/s
# on one idle core of these machines and at a third of that on a busy one, and the compressed
# stream comes out no faster than the compressor: measured on tbf-shaped links
# (benchmarks/deploy_link.py) it beats raw at 40 MB/s (USB 2) and loses at 300 MB/s (USB 3).
# A 1 MiB probe, its round trip included, reads 33-39 MB/s on the first and 115-190 MB/s on
# the second; this sits 2x from either. Estimating both speeds and comparing them was tried
# first: under a load average of 8-12 on 2 cores the estimates (compression speed on 128 KiB
# samples, dry runs of 2 MiB both ways) were off by 2-3x and chose wrong at both rates.
FAST_LINK = 75e6
PROBE_FROM = 16 << 20  # compressible bytes in a push before the probe pays for itself
# whole files' times: compression is kept when its files go this much faster than raw ones
MARGIN = 1.1
OBSERVE_FROM = 4 << 20  # a push this large measures its way (smaller ones are mostly latency)
GGUF_MAGIC = b"GGUF"


@dataclass
class Choice:
    level: int | None  # zstd level, or None: raw
    reason: str  # zstd | raw:feature | raw:small | raw:gguf | raw:incompressible | raw:fast-link
    ratio: float | None = None  # the sample's compressed / original size


@dataclass
class WirePolicy:
    """One device's choices for one run; ``probe(data, level) -> seconds`` pushes ``data`` as a
    dry run, raw when ``level`` is None (no probe: the device cannot)."""

    zstd: bool
    probe: Callable[[bytes, int | None], float] | None = None  # (data, zstd level) -> seconds of a dry run
    min_size: int = MIN_SIZE  # smaller files go raw: compressing them cannot win back its fixed cost
    link_rate: float | None = None  # bytes/s the faster raw dry run went at
    seen: dict[bool, float] = field(default_factory=dict)  # compressed? -> file bytes/s of the last large push
    _cctx: object = None

    @classmethod
    def for_features(cls, features: Iterable[str], probe: Callable[[bytes, int | None], float] | None) -> "WirePolicy":
        feats = set(features)
        return cls(zstd=FEATURE_ZSTD in feats, probe=probe if FEATURE_DRY_RUN in feats else None)

    # -- before a push --------------------------------------------------------------------------
    def expect(self, files: Iterable[Path]) -> None:
        """A push of ``files`` is about to start: when it is large enough, time the link with two
        raw dry runs of the start of its largest compressible file (the faster counts: on a busy
        machine a run is only ever slowed down)."""
        if not self.zstd or self.probe is None or self.link_rate is not None:
            return
        candidates = [f for f in files if _size(f) >= MIN_SIZE and not _is_gguf(f)]
        if sum(map(_size, candidates)) < PROBE_FROM:
            return
        with open(max(candidates, key=_size), "rb") as fh:
            data = fh.read(PROBE_BYTES)
        best = min(self.probe(data, None) for _ in range(2))
        self.link_rate = len(data) / max(best, 1e-4)

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
        elif self.link_rate is not None and self.link_rate > FAST_LINK:
            return Choice(None, "raw:fast-link", ratio)
        return Choice(SLOW_LINK_LEVEL if self.link_rate is not None else ZSTD_LEVEL, "zstd", ratio)

    def observe(self, size: int, seconds: float, compressed: bool) -> None:
        """A file of ``size`` bytes went over in ``seconds`` (to the device's OKAY)."""
        if size >= OBSERVE_FROM and seconds > 0:
            self.seen[compressed] = size / seconds

    def order(self, files: list[Path]) -> list[int]:
        """The order to send ``files`` in: after a link measurement, smallest first, so that
        whole files' times are known before the large ones go."""
        if self.link_rate is None:
            return list(range(len(files)))
        return sorted(range(len(files)), key=lambda i: _size(files[i]))

    def _sample(self, local: Path, size: int) -> float:
        """compressed/original of three slices (start, middle, end)."""
        import zstandard

        if self._cctx is None:
            self._cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        cctx: zstandard.ZstdCompressor = self._cctx  # type: ignore[assignment]
        raw = packed = 0
        with open(local, "rb") as f:
            for at in sorted({0, max(0, size // 2 - SAMPLE_SLICE // 2), max(0, size - SAMPLE_SLICE)}):
                f.seek(at)
                chunk = f.read(SAMPLE_SLICE)
                raw += len(chunk)
                packed += len(cctx.compress(chunk))
        return packed / raw if raw else 1.0


def zstd_frame(f: BinaryIO, level: int, piece: int, *, checksum: bool = False,
               block: int = 1 << 20) -> Iterator[tuple[int, list[bytes]]]:
    """The whole of ``f`` as one zstd frame: per ``block`` read, (the bytes read, the frame's
    pieces ready so far — each exactly ``piece`` bytes but the last)."""
    import zstandard

    try:
        size = os.fstat(f.fileno()).st_size
    except OSError:  # in memory
        size = len(f.getbuffer())  # type: ignore[attr-defined]
    # zstd's own worker threads (one a core) compress while this thread waits on the link
    chunker = zstandard.ZstdCompressor(level=level, write_checksum=checksum, threads=-1).chunker(
        size=size, chunk_size=piece)
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
