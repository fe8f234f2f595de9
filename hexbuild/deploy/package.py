"""The package to deploy: an install prefix (or a release tarball), its files, modes, hashes and
build metadata."""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from ..errors import UsageError
from ..artifacts.hashcache import HashCache


class PackageFile:
    """One file to deploy. ``sha256`` may be given as a callable: a package's hashes are computed
    in the background (``Digests``) and the first read of one waits for them."""

    __slots__ = ("path", "size", "_sha256", "mode", "local")

    def __init__(self, path: str, size: int, sha256: str | Callable[[], str], mode: int, local: Path) -> None:
        self.path, self.size, self._sha256, self.mode, self.local = path, size, sha256, mode, local

    @property
    def sha256(self) -> str:
        if callable(self._sha256):
            self._sha256 = self._sha256()
        return self._sha256

    def __repr__(self) -> str:
        return f"PackageFile({self.path!r}, {self.size}, mode={self.mode:o})"


class Digests:
    """The sha256 of a package's files, computed in a thread from the moment it is loaded:
    sha256 releases the GIL, so re-hashing a rebuilt package (0.15 s for 217 MB here) overlaps
    what a deploy does before it needs them (the rest of start-up, the device's probe)."""

    def __init__(self, paths: list[Path]) -> None:
        self._values: list[str] = []
        self._error: BaseException | None = None
        self._known = threading.Event()  # the values (or the error) are there
        self._thread = threading.Thread(target=self._run, args=(paths,), name="hexbuild-hash", daemon=True)
        self._thread.start()

    def _run(self, paths: list[Path]) -> None:
        try:
            with HashCache() as cache:
                self._values = [digest for _, digest in cache.many(paths)]
                # the deploy goes on while the cache file is merged and written (a user's cache
                # of thousands of files takes tens of ms to read back and dump)
                self._known.set()
        except BaseException as e:  # raised where a hash is first read
            if not self._known.is_set():
                self._error = e
        finally:
            self._known.set()

    def join(self) -> None:
        """Until the hashing is over, whatever its outcome, and the cache is saved."""
        self._thread.join()

    def wait(self) -> None:
        self._known.wait()
        if self._error is not None:
            if isinstance(self._error, OSError):
                raise UsageError(f"cannot read a package file: {self._error}") from None
            raise self._error

    def get(self, i: int) -> str:
        self.wait()
        return self._values[i]


@dataclass
class Package:
    root: Path
    files: dict[str, PackageFile]
    meta: dict[str, Any]
    _tmp: tempfile.TemporaryDirectory | None = None
    digests: Digests | None = None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files.values())

    def listing(self) -> dict[str, Any]:
        """The metadata with the file list, as a manifest reader (artifacts/npu.py) takes it."""
        return {**self.meta, "files": [{"path": p} for p in self.files]}

    def close(self) -> None:
        if self.digests is not None:
            self.digests.join()  # it reads files a tarball's temporary directory holds
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def load_package(path: Path) -> Package:
    """A package directory (the install prefix) or a release tarball from ``hexbuild package``.

    Files, modes and metadata come from the artifacts module (``scan``/``assemble``, the same
    records ``build_manifest`` makes, without the ELF details deploy does not use); hashes come
    through a cache keyed by (size, mtime, ctime, inode), so a redeploy after one library
    changed re-hashes that library, not the whole gigabyte. Files modified in the last two
    seconds are never served from the cache (the "racy git" rule). The hashing runs in the
    background (``Digests``): the package is returned as soon as its files are listed."""
    from ..artifacts.manifest import assemble, load_meta, require_llama_package, scan

    path = Path(path).expanduser()
    if not path.exists():
        raise UsageError(f"package not found: {path}", hint="build first (hexbuild build) or pass the install dir")
    tmp = None
    root = path
    if path.is_file():
        if not (path.name.endswith(".tar.gz") or path.name.endswith(".tgz")):
            raise UsageError(f"not a package directory or .tar.gz: {path}")
        tmp = tempfile.TemporaryDirectory(prefix="hexbuild-pkg-")
        root = _extract(path, Path(tmp.name))
    try:
        require_llama_package(root, shown=path)
        meta = load_meta(root, shown=path)  # the one rule for a damaged or newer manifest
        entries = [e for e in scan(root) if e.kind != "dir"]
        for e in entries:
            if "\n" in e.rel or e.rel.startswith(".hexbuild/") or e.rel == ".hexbuild":
                raise UsageError(f"package file name not allowed: {e.rel!r}")
        if not entries:
            raise UsageError(f"package {path} has no files")
        sources = [e.target if e.kind == "symlink" else e.path for e in entries]
        sizes = [os.stat(p).st_size for p in sources]
        records = [{"path": e.rel, "size": size, "mode": f"{e.mode:04o}"} for e, size in zip(entries, sizes)]
        meta = {k: v for k, v in assemble(meta, records).items() if k != "files"}
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    digests = Digests(sources)
    files = {e.rel: PackageFile(e.rel, size, partial(digests.get, i), e.mode, root / e.rel)
             for i, (e, size) in enumerate(zip(entries, sizes))}
    return Package(root, files, meta, tmp, digests)


def _extract(tarball: Path, into: Path) -> Path:
    import tarfile  # a directory package, the usual one, does without it

    try:
        with tarfile.open(tarball, "r:*") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UsageError(f"cannot read package tarball {tarball}: {e}") from None
    entries = [p for p in into.iterdir()]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def default_package(source: Path, install_dir: str = "") -> Path:
    """The install prefix of the last build in ``source``: build.install_dir, else the newest
    ``pkg-*/llama.cpp`` (by its manifest.json, which hexbuild build writes last)."""
    if install_dir:
        return source / install_dir
    found = [p for p in source.glob("pkg-*/llama.cpp") if p.is_dir()]
    if not found:
        raise UsageError(f"no built package in {source} (no pkg-*/llama.cpp)",
                         hint="run hexbuild build first, or pass the package: hexbuild deploy PKG --target ...")

    def built_at(p: Path) -> float:
        m = p / "manifest.json"
        return m.stat().st_mtime if m.is_file() else p.stat().st_mtime

    return max(found, key=built_at)
