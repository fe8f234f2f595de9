"""Release tarballs: the package under ``llama.cpp/`` plus manifest.json and SHA256SUMS.

Reproducible: sorted members, one fixed mtime (SOURCE_DATE_EPOCH or 0), uid/gid 0 with no
names, modes normalized to 0755/0644, symlinks kept, gzip header without time or file name,
compressed on every core in fixed blocks (pgzip.py) so the bytes do not depend on the machine.
Written to a temporary file beside the output and renamed: never a partial tarball.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import PackageFailed, UsageError
from ..paths import written_through_part
from .manifest import (CHUNK, MANIFEST, SUMS, Entry, assemble, dumps, file_records, load_meta, scan)
from .pgzip import ParallelGzipWriter

TOP = "llama.cpp"
GZIP_LEVEL = 6  # level 9 costs about twice the time for well under 1 % on binaries


@dataclass(frozen=True)
class PackageResult:
    path: Path
    sha256: str
    size: int
    manifest: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "size": self.size, "sha256": self.sha256,
                "files": len(self.manifest["files"])}


def default_name(os_name: str | None, revision: str | None, *, cpu_only: bool = False) -> str:
    """llama.cpp-<os>-<revision>-hexagon.tar.gz; a package without the Hexagon backend (the open
    toolchain's, artifacts/npu.py) is -cpu.tar.gz: its name must not promise the NPU."""
    rev = revision or "unknown"
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        rev = rev[:12]
    rev = re.sub(r"[^A-Za-z0-9._+-]", "_", rev)
    return f"llama.cpp-{os_name or 'unknown'}-{rev}-{'cpu' if cpu_only else 'hexagon'}.tar.gz"


def is_cpu_only(pkg: Path, meta: dict[str, Any]) -> bool:
    """The one rule (artifacts/npu.py) over the package directory's metadata and files."""
    from .npu import CPU, npu_support

    files = [{"path": e.rel} for e in scan(pkg) if e.kind != "dir"]
    return npu_support({**meta, "files": files}) == CPU


def source_date_epoch(env: dict[str, str] | os._Environ = os.environ) -> int:
    value = env.get("SOURCE_DATE_EPOCH", "").strip()
    if not value:
        return 0
    if not value.isdigit():
        raise UsageError(f"SOURCE_DATE_EPOCH must be a non-negative integer, got {value!r}")
    return int(value)


def sha256sums(records: list[dict[str, Any]]) -> bytes:
    """``sha256sum -c`` input: two spaces, paths relative to the top directory."""
    return "".join(f"{r['sha256']}  {r['path']}\n" for r in sorted(records, key=lambda r: r["path"])).encode()


def check_package(pkg: Path, out: Path) -> list[Entry]:
    """The package's entries, or what write_package refuses (one line, exit 2 or 6) before any
    of it is written: names SHA256SUMS cannot hold, no file at all, an output inside it."""
    pkg, out = Path(pkg), Path(out)
    entries = scan(pkg)
    for e in entries:
        if "\n" in e.rel or "\\" in e.rel:
            raise PackageFailed(f"{e.rel!r}: file names with newlines or backslashes cannot be listed in SHA256SUMS")
    if not any(e.kind != "dir" for e in entries):
        raise UsageError(f"package {pkg} has no files", hint="pass the install prefix of a build, e.g. "
                         "pkg-snapdragon/llama.cpp")
    if out.resolve().is_relative_to(pkg.resolve()):
        raise UsageError(f"output {out} is inside the package {pkg}", hint="write the tarball elsewhere (-o)")
    return entries


def write_package(pkg: Path, out: Path, meta: dict[str, Any] | None = None, *,
                  entries: list[Entry] | None = None) -> PackageResult:
    """Write the release tarball of ``pkg`` to ``out``. ``meta`` as for build_manifest (None:
    read PKG/manifest.json); ``entries``: check_package's, when the caller checked first."""
    pkg, out = Path(pkg), Path(out)
    if entries is None:
        entries = check_package(pkg, out)
    manifest = assemble(load_meta(pkg) if meta is None else meta, file_records(entries))
    manifest_bytes = dumps(manifest)
    manifest_record = {"path": MANIFEST, "sha256": hashlib.sha256(manifest_bytes).hexdigest()}
    generated = {MANIFEST: manifest_bytes, SUMS: sha256sums(manifest["files"] + [manifest_record])}
    mtime = source_date_epoch()

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PackageFailed(f"cannot write {out}: {e.strerror or e}") from None
    try:
        with written_through_part(out, mode=0o666 & ~_umask()) as raw:
            sink = _HashingWriter(raw)
            _write_tar(sink, entries, manifest["files"], generated, mtime)
            raw.flush()
            os.fsync(raw.fileno())
    except BaseException as e:
        err = e.error if isinstance(e, _WriteError) else e
        if isinstance(err, OSError):
            raise PackageFailed(f"cannot write {out}: {err.strerror or err}") from None
        raise
    return PackageResult(out, sink.hash.hexdigest(), sink.size, manifest)


class _SourceError(PackageFailed):
    """A package file could not be read, or changed while it was being packed."""


class _WriteError(Exception):
    """Writing the tarball failed (disk full, file too large): kept apart from read errors."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


def _write_tar(sink: "_HashingWriter", entries: list[Entry], records: list[dict[str, Any]],
               generated: dict[str, bytes], mtime: int) -> None:
    by_path = {r["path"]: r for r in records}
    members: list[tuple[str, Entry | bytes]] = [(e.rel, e) for e in entries]
    members += list(generated.items())
    members.sort(key=lambda m: m[0])
    gz = ParallelGzipWriter(sink, level=GZIP_LEVEL)  # type: ignore[arg-type]
    with gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT, copybufsize=CHUNK) as tar:  # type: ignore[call-overload]
        tar.addfile(_info(TOP, tarfile.DIRTYPE, 0o755, mtime))
        for rel, item in members:
            name = f"{TOP}/{rel}"
            if isinstance(item, bytes):
                ti = _info(name, tarfile.REGTYPE, 0o644, mtime, size=len(item))
                tar.addfile(ti, io.BytesIO(item))
            elif item.kind == "dir":
                tar.addfile(_info(name, tarfile.DIRTYPE, 0o755, mtime))
            elif item.kind == "symlink":
                ti = _info(name, tarfile.SYMTYPE, 0o777, mtime)
                ti.linkname = item.link or ""
                tar.addfile(ti)
            else:
                rec = by_path[rel]
                ti = _info(name, tarfile.REGTYPE, item.mode, mtime, size=rec["size"])
                try:
                    with open(item.path, "rb") as f:
                        reader = _CheckedReader(f)
                        tar.addfile(ti, reader)
                        reader.finish(rel, rec)
                except _WriteError:
                    raise
                except OSError as e:  # open/read of the source, or the file shrank
                    raise _SourceError(f"cannot read {rel}: {e.strerror or e}") from None


def _info(name: str, type_: bytes, mode: int, mtime: int, size: int = 0) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = type_
    ti.mode = mode
    ti.mtime = mtime
    ti.size = size
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


class _HashingWriter:
    """The tarball's bytes on their way to disk: counted and hashed once, as written."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        try:
            return self.f.write(data)
        except OSError as e:
            raise _WriteError(e) from e

    def flush(self) -> None:
        try:
            self.f.flush()
        except OSError as e:
            raise _WriteError(e) from e


class _CheckedReader:
    """Hashes what tarfile reads, so a file changed since it was hashed is caught."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.hash = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.hash.update(data)
        return data

    def finish(self, rel: str, rec: dict[str, Any]) -> None:
        if self.f.read(1) or self.hash.hexdigest() != rec["sha256"]:
            raise _SourceError(f"{rel} changed while it was being packed", hint="package after the build has finished")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
