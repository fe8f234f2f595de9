"""sha256 of local files, remembered across runs: multi-GB packages and models are hashed once,
not on every deploy, and a build's manifest (which hashes every file it lists) leaves the hashes
for the deploy that follows. Keyed by (size, mtime, ctime, inode). A file modified less than one
timestamp tick before it was hashed is never cached (the "racy git" rule): a rewrite in that same
tick could leave all four unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Sequence

from ..paths import atomic_write, cache_root


def sha256_file(path: Path) -> tuple[int, str]:
    """(size, hex sha256), read in 1 MiB chunks into one buffer."""
    h = hashlib.sha256()
    buf = bytearray(1 << 20)  # one buffer, read into: no allocation per chunk
    view = memoryview(buf)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            size += n
    return size, h.hexdigest()


class HashCache:
    """sha256 of local files, remembered across runs in ~/.cache/hexbuild/sha256.json."""

    # the tick, with room to spare: on a filesystem whose timestamps are whole seconds (FAT's
    # are even ones) two seconds; on one with finer timestamps (ext4, xfs, btrfs, tmpfs, overlay)
    # they come from the kernel's coarse clock, which moves every jiffy (1-10 ms), so a tenth of a
    # second. A file's ctime tells them apart: nothing but the filesystem sets it (a tarball's
    # whole-second mtime says nothing of the filesystem). Before, two seconds for every file meant
    # that a build's hashes, taken right after its install step, were never kept.
    RACY_S = 2.0
    RACY_FINE_S = 0.1
    MAX_ENTRIES = 20000

    def __init__(self) -> None:
        self.file = cache_root() / "sha256.json"
        self.data = self._read()
        self.new: dict[str, list] = {}  # what this instance learnt: merged into the file on save

    def _read(self) -> dict:
        try:
            data = json.loads(self.file.read_text("utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def __enter__(self) -> "HashCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.save()

    def one(self, path: Path) -> tuple[int, str]:
        return self.many([path])[0]

    def many(self, paths: Sequence[Path]) -> list[tuple[int, str]]:
        # the moment before the stats: a rewrite after it lands in a later tick than the stamp's
        # unless the stamp itself is that recent (see _racy)
        before = time.time_ns()
        stats = [p.stat() for p in paths]
        keys = [str(Path(p).resolve()) for p in paths]
        stamps = [[st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] for st in stats]
        out: list[tuple[int, str] | None] = []
        todo = []
        first: dict[str, int] = {}  # a library's symlinked names resolve to one file: hashed once
        for i, (key, stamp) in enumerate(zip(keys, stamps)):
            hit = self.data.get(key)
            if isinstance(hit, list) and len(hit) == 5 and hit[:4] == stamp:
                out.append((stamp[0], hit[4]))
            else:
                out.append(None)
                if key not in first:
                    first[key] = i
                    todo.append(i)
        if todo:
            from concurrent.futures import ThreadPoolExecutor  # 7 ms of imports a cached package skips

            # a thread per core, not one more: a deploy waits for the largest file, and a third
            # thread on two cores slowed it (217 MB: 263-274 ms with three, 186-214 ms with two)
            workers = min(4, (os.cpu_count() or 1), len(todo))
            todo.sort(key=lambda i: -stamps[i][0])  # the largest first: no big file left for last
            with ThreadPoolExecutor(max_workers=workers) as pool:  # sha256 releases the GIL
                results = list(pool.map(lambda i: sha256_file(paths[i]), todo))
            for i, (size, digest) in zip(todo, results):
                out[i] = (size, digest)
                if not self._racy(stamps[i], before) and size == stamps[i][0]:
                    self.data[keys[i]] = self.new[keys[i]] = [*stamps[i], digest]
            for i, o in enumerate(out):
                if o is None:
                    out[i] = out[first[keys[i]]]
        return [o for o in out if o is not None]

    def _racy(self, stamp: list[int], before: int) -> bool:
        """Modified within a timestamp tick of ``before`` (ns, just before the file's stat): a
        rewrite while or after it was hashed could keep its stamp. Not to be cached."""
        _, mtime, ctime, _ = stamp
        tick = self.RACY_FINE_S if ctime % 1_000_000_000 else self.RACY_S
        return before - max(mtime, ctime) < tick * 1e9

    def save(self) -> None:
        if not self.new:
            return
        # another instance (a deploy hashes its package and its models at once) may have saved
        # since this one read the file: what it learnt is kept
        self.data = {**self._read(), **self.new}
        if len(self.data) > self.MAX_ENTRIES:  # forget files that are gone
            self.data = {k: v for k, v in self.data.items() if os.path.exists(k)}
        try:
            atomic_write(self.file, json.dumps(self.data))
        except OSError:
            pass  # a cache that cannot be written only costs time
        self.new = {}
