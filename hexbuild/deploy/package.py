"""The package to deploy: an install prefix (or a release tarball), its files, modes, hashes and
build metadata."""

from __future__ import annotations

import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .hashcache import HashCache


@dataclass
class PackageFile:
    path: str
    size: int
    sha256: str
    mode: int
    local: Path


@dataclass
class Package:
    root: Path
    files: dict[str, PackageFile]
    meta: dict[str, Any]
    _tmp: tempfile.TemporaryDirectory | None = None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files.values())

    def listing(self) -> dict[str, Any]:
        """The metadata with the file list, as a manifest reader (artifacts/npu.py) takes it."""
        return {**self.meta, "files": [{"path": p} for p in self.files]}

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def load_package(path: Path) -> Package:
    """A package directory (the install prefix) or a release tarball from ``hexbuild package``.

    Files, modes and metadata come from the artifacts module (``scan``/``assemble``, the same
    records ``build_manifest`` makes, without the ELF details deploy does not use); hashes come
    through a cache keyed by (size, mtime, ctime, inode), so a redeploy after one library
    changed re-hashes that library, not the whole gigabyte. Files modified in the last two
    seconds are never served from the cache (the "racy git" rule)."""
    from ..artifacts.manifest import assemble, load_meta, scan

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
    if not ((root / "lib").is_dir() or (root / "bin").is_dir()):
        if tmp is not None:
            tmp.cleanup()
        raise UsageError(f"{path} is not a llama.cpp package (no lib/ or bin/)",
                         hint="pass the install prefix, e.g. pkg-snapdragon/llama.cpp")
    try:
        meta = load_meta(root, shown=path)  # the one rule for a damaged or newer manifest
        entries = [e for e in scan(root) if e.kind != "dir"]
        with HashCache() as cache:
            digests = cache.many([e.target if e.kind == "symlink" else e.path for e in entries])
        records = [{"path": e.rel, "size": size, "sha256": digest, "mode": f"{e.mode:04o}"}
                   for e, (size, digest) in zip(entries, digests)]
        manifest = assemble(meta, records)
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    files = {}
    for rec in manifest["files"]:
        rel = rec["path"]
        if "\n" in rel or rel.startswith(".hexbuild/") or rel == ".hexbuild":
            raise UsageError(f"package file name not allowed: {rel!r}")
        files[rel] = PackageFile(rel, int(rec["size"]), rec["sha256"], int(str(rec["mode"]), 8), root / rel)
    if not files:
        if tmp is not None:
            tmp.cleanup()
        raise UsageError(f"package {path} has no files")
    return Package(root, files, {k: v for k, v in manifest.items() if k != "files"}, tmp)


def _extract(tarball: Path, into: Path) -> Path:
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
