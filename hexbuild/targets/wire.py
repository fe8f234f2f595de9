"""How each file travels over an adb link: one zstd frame (sync v2) or raw (v1 ``SEND``).

adb 33+ compresses every push with zstd when the device lists ``sendrecv_v2_zstd``. That is
right on a USB 2 or wireless link, where the link is the bottleneck and a library shrinks to a
third. It is wrong in two cases, and this module tells them apart per file:

- the bytes do not compress: GGUF weights (quantized blocks, 0.95 of their size at best) and
  anything whose sample saves less than ``MIN_SAVING`` go raw;
- the link is faster than this machine compresses: on a USB 3 link (300 MB/s) zstd level 1 is
  the bottleneck and raw is faster. Before a large push two dry runs (``SND2`` with flag
  0x80000000: the device reads and discards; adbd lists ``sendrecv_v2_dry_run_send``) time the
  link, and above ``FAST_LINK`` files go raw; below it the slower the link, the higher the zstd
  level. Once whole files of both kinds have gone, their times decide. A device's measured link
  is remembered for ``LINK_MEMORY_S``: the next deploy skips the dry runs. Where files go raw
  for the link's speed, they go on ``LANES`` sync connections at once (adbsync.push_lanes).

Small pushes skip the measurement (it would cost more than it can save) and compress as adb
does. Devices without the feature get v1 ``SEND``, as every adbd takes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

ZSTD_LEVEL = 1  # what adb's own ZstdEncoder uses: 300+ MB/s a core, a library to ~0.32
# On a measured link the level follows its speed: the slower the link, the more compression pays
# before it becomes the bottleneck (zstd's worker threads compress while this thread waits on the
# link). 217 MB of real libraries (the benchmark's) go to 0.323 of their size at level 1, 0.300
# at 2, 0.283 at 3, 0.278 at 4, 0.269 at 5, 0.262 at 6 and 0.259 at 7; on 2 idle cores level 3
# compresses them at 218 MB/s, 5 at 101, 6 at 88 and 7 at 64. At 40 MB/s level 2 took 1.88 s
# against 1.98 s at level 1 (adb push 1.89 s) and level 3 2.05 s: compression no longer kept up.
# A 20 MB/s link (USB 2 sharing its bus) carries ~19 MB/s of sync data. The libraries alone went
# over it in 3.28 s at level 5, 3.38 s at 3, 3.55 s at 2 and 3.77 s at 1 (adb push 3.70 s), but a
# whole redeploy, where the device's side and the hashing share the 2 cores, took 3.95-4.06 s at
# level 3, 4.05-4.09 at 4, 4.07-4.16 at 5 and 4.38-4.49 at 6: level 3 is what keeps up. The probe
# reads such a link at 15-19 MB/s and a 40 MB/s one at 33-39.
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
# Two 1 MiB dry runs on one connection read a 20 MB/s link at 19-20 MB/s, a 40 MB/s one at 38-40
# and a 300 MB/s one at 208-232 (a 64 MB push went at 234-266); this sits 2x and 3x from them.
# Estimating both speeds and comparing them was tried first: under a load average of 8-12 on 2
# cores the estimates (compression speed on 128 KiB samples, dry runs of 2 MiB both ways) were off
# by 2-3x and chose wrong at both rates. zstd's fast mode (level -1: 0.37 of the bytes, 1.5x level
# 1's speed) was tried at 300 MB/s too. The libraries alone went over in 0.61 s against 0.83 s raw
# on idle cores, but whole redeploys, where hashing and the device's side share the 2 cores, took
# 1.60-1.69 s against 1.52-1.53 s raw (with a meter that sent the rest raw once the compressed
# stream fell behind the link), and first deploys 1.21-1.26 s against 1.27-1.35 s.
FAST_LINK = 75e6
# sync connections at once on such a link: one is bound by its round trips (217 MB of libraries at
# 300 MB/s: 0.84-0.92 s on one, adb push -Z 0.87-0.91 s; 0.78 s on two, and on three). zstd on
# the two lanes was tried there too: the libraries alone went over in 0.57-0.60 s at level -3 and
# 0.62-0.63 s at -1 on idle cores (both cores 86-91 % busy against 36-42 % raw), but whole
# deploys, alternated in one session, were no faster (1.18 s against 1.45 s for a redeploy that
# hashes first, 1.27 s against 1.22 s for one after a build, 1.33 s against 1.25 s for a first
# deploy), so such a link stays raw.
LANES = 2
LINK_LEVELS = ((27e6, 3), (FAST_LINK, 2))  # (links slower than this, their zstd level)
PROBE_FROM = 16 << 20  # compressible bytes in a push before the probe pays for itself
# whole files' times: compression is kept when its files go this much faster than raw ones
MARGIN = 1.1
OBSERVE_FROM = 4 << 20  # a push this large measures its way (smaller ones are mostly latency)
GGUF_MAGIC = b"GGUF"
# a device's link measured this recently is not measured again: an edit-build-deploy loop pays
# for the two dry runs once (a USB or Wi-Fi link keeps its class for longer than this)
LINK_MEMORY_S = 30 * 60


@dataclass
class Choice:
    level: int | None  # zstd level, or None: raw
    reason: str  # zstd | raw:feature | raw:small | raw:gguf | raw:incompressible | raw:fast-link
    ratio: float | None = None  # the sample's compressed / original size


@dataclass
class WirePolicy:
    """One device's choices for one run; ``probe(data) -> seconds`` times raw dry runs of
    ``data`` (None: the device cannot)."""

    zstd: bool
    probe: Callable[[bytes], float] | None = None  # data -> seconds of the faster of two raw dry runs of it
    min_size: int = MIN_SIZE  # smaller files go raw: compressing them cannot win back its fixed cost
    link_rate: float | None = None  # bytes/s the faster raw dry run went at
    seen: dict[bool, float] = field(default_factory=dict)  # compressed? -> file bytes/s of the last large push
    memory: "LinkMemory | None" = None  # where this device's measured link is kept between runs
    _cctx: object = None

    @classmethod
    def for_features(cls, features: Iterable[str], probe: Callable[[bytes], float] | None,
                     memory: "LinkMemory | None" = None) -> "WirePolicy":
        feats = set(features)
        zstd, can_probe = FEATURE_ZSTD in feats, FEATURE_DRY_RUN in feats
        known = memory.recall() if memory is not None and zstd and can_probe else None
        return cls(zstd=zstd, probe=probe if can_probe else None, link_rate=known, memory=memory)

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
        best = self.probe(data)
        self.link_rate = len(data) / max(best, 1e-4)
        if self.memory is not None:
            self.memory.store(self.link_rate)

    # -- per file ------------------------------------------------------------------------------
    def choose(self, local: Path) -> Choice:
        if not self.zstd:
            return Choice(None, "raw:feature")
        size = _size(local)
        if size < self.min_size:
            return Choice(None, "raw:small")
        if _is_gguf(local):
            return Choice(None, "raw:gguf")
        if self.raw_link():  # before the sample: what it says would not change this
            return Choice(None, "raw:fast-link")
        ratio = self._sample(local, size)
        if ratio > 1 - MIN_SAVING:
            return Choice(None, "raw:incompressible", ratio)
        return Choice(self._level(), "zstd", ratio)

    def raw_link(self) -> bool:
        """Whether compressible files go raw for the link's speed."""
        if len(self.seen) == 2:
            # whole files of both kinds have gone: what they achieved beats any estimate (the
            # compression here shares the CPU with everything else on this machine)
            return self.seen[True] < self.seen[False] * MARGIN
        return self.link_rate is not None and self.link_rate > FAST_LINK

    def lanes(self) -> int:
        """Sync connections to push on at once: ``LANES`` where the files go raw for a fast link
        (one connection is bound by its round trips there), else one."""
        return LANES if self.zstd and self.raw_link() else 1

    def _level(self) -> int:
        if self.link_rate is None:
            return ZSTD_LEVEL
        return next((level for below, level in LINK_LEVELS if self.link_rate < below), ZSTD_LEVEL)

    def observe(self, size: int, seconds: float, compressed: bool) -> None:
        """A file of ``size`` bytes went over in ``seconds`` (to the device's OKAY)."""
        if size >= OBSERVE_FROM and seconds > 0:
            self.seen[compressed] = size / seconds

    def order(self, files: list[Path]) -> list[int]:
        """The order to send ``files`` in. On lanes, largest first: the largest file starts at
        once on a lane of its own while the others share the rest. After a link measurement,
        smallest first, so that whole files' times are known before the large ones go."""
        if self.lanes() > 1:
            return sorted(range(len(files)), key=lambda i: -_size(files[i]))
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

    size = os.fstat(f.fileno()).st_size
    # zstd's own worker threads (one a core) compress while this thread waits on the link
    chunker = zstandard.ZstdCompressor(level=level, write_checksum=checksum, threads=-1).chunker(
        size=size, chunk_size=piece)
    while True:
        data = f.read(block)
        yield len(data), list(chunker.compress(data) if data else chunker.finish())
        if not data:
            return


class LinkMemory:
    """One device's measured link rate, kept in the state directory for ``LINK_MEMORY_S``."""

    def __init__(self, device: str, *, file: Path | None = None) -> None:
        from ..paths import state_root

        self.device = device
        self.file = file or state_root() / "links.json"

    def _read(self) -> dict:
        try:
            data = json.loads(self.file.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def recall(self) -> float | None:
        entry = self._read().get(self.device)
        try:
            rate, at = float(entry[0]), float(entry[1])
        except (TypeError, ValueError, IndexError, KeyError):
            return None
        age = time.time() - at  # a clock set back makes no old entry young again
        return rate if -60 < age < LINK_MEMORY_S and rate > 0 else None

    def store(self, rate: float) -> None:
        from ..paths import atomic_write

        now = time.time()
        data = {k: v for k, v in self._read().items()
                if isinstance(v, list) and len(v) == 2 and now - float(v[1]) < LINK_MEMORY_S}
        data[self.device] = [round(rate), round(now, 1)]
        try:
            atomic_write(self.file, json.dumps(data))
        except OSError:
            pass  # not remembering only costs the next run its two dry runs


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
