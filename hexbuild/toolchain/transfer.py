"""Copy mode: the checkout goes in and the package comes out through the Docker API, for engines
that cannot see this machine's files (a remote ``DOCKER_HOST``, Docker-in-Docker in CI).

The checkout lives in a named volume per checkout (``hexbuild-src-<hash>``) mounted at
/workspace, so the build directory, kept there, stays incremental between builds. Each build:

1. the checkout is packed into one tar (``put_archive``) at /tmp/hexbuild-src.tar in the
   created container — without ``.git``, the build and install directories and ``*.gguf``
   models, which the build does not read;
2. the build script empties /workspace except the build directory and unpacks it (file times
   kept, so Ninja rebuilds only what changed; files deleted here disappear there too);
3. after the build, ``<install-dir>.hexbuild-partial`` comes back with ``get_archive`` and is
   unpacked here (only regular files, directories and links inside it), where the usual move
   into place, verification and manifest follow.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from ..errors import BuildFailed
from ..ui import ui
from .engine import VOLUME_MARKER

SRC_TAR = "/tmp/hexbuild-src.tar"
EXCLUDED_SUFFIXES = (".gguf",)


def volume_name(root: Path) -> str:
    return "hexbuild-src-" + hashlib.sha256(str(root).encode()).hexdigest()[:12]


def unpack_lines(build_dir: str) -> list[str]:
    """Shell lines that make /workspace a copy of the archive, keeping the build directory."""
    keep = PurePosixPath(build_dir).parts[0]
    return [f"find . -mindepth 1 -maxdepth 1 ! -name {shlex.quote(keep)} ! -name {VOLUME_MARKER} -exec rm -rf {{}} +",
            f"tar -xf {SRC_TAR}", f"rm -f {SRC_TAR}"]


def source_archive(root: Path, *, exclude: Iterable[str], include: Iterable[str] = (), uid: int = 0,
                   gid: int = 0) -> Path:
    """The checkout as one uncompressed tar in a temporary file, wrapped in the outer tar that
    ``put_archive`` unpacks into /tmp. ``exclude``: paths relative to the root; ``include``:
    files to add even under an excluded directory."""
    excluded = {PurePosixPath(e) for e in exclude} | {PurePosixPath(".git")}
    inner = tempfile.NamedTemporaryFile(prefix="hexbuild-src-", suffix=".tar", delete=False)

    def owned(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid, ti.gid, ti.uname, ti.gname = uid, gid, "", ""
        return ti

    try:
        with tarfile.open(fileobj=inner, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for dirpath, dirnames, filenames in os.walk(root):
                rel_dir = PurePosixPath(os.path.relpath(dirpath, root).replace(os.sep, "/"))
                dirnames[:] = sorted(d for d in dirnames if _rel(rel_dir, d) not in excluded)
                for name in sorted(filenames):
                    rel = _rel(rel_dir, name)
                    if rel in excluded or name.endswith(EXCLUDED_SUFFIXES):
                        continue
                    tar.add(os.path.join(dirpath, name), arcname=str(rel), recursive=False, filter=owned)
                for d in dirnames:
                    tar.add(os.path.join(dirpath, d), arcname=str(_rel(rel_dir, d)), recursive=False, filter=owned)
            for rel in include:
                if (root / rel).is_file():
                    tar.add(str(root / rel), arcname=rel, recursive=False, filter=owned)
        inner.close()
        outer = Path(inner.name + ".outer")
        with tarfile.open(outer, mode="w") as tar:
            tar.add(inner.name, arcname=PurePosixPath(SRC_TAR).name, filter=owned)
        return outer
    finally:
        inner.close()
        os.unlink(inner.name)


def _rel(base: PurePosixPath, name: str) -> PurePosixPath:
    return PurePosixPath(name) if str(base) == "." else base / name


def copy_in(api: Any, container: str, archive: Path) -> None:
    size = archive.stat().st_size
    ui.detail(f"copying the checkout into {container} ({size / 1e6:.1f} MB)")
    with open(archive, "rb") as f:
        if not api.put_archive(container, str(PurePosixPath(SRC_TAR).parent), f):
            raise BuildFailed(f"the Docker engine did not accept the checkout archive for {container}")


def copy_out(api: Any, container: str, path: str, dest_parent: Path) -> None:
    """Unpack ``path`` (a directory in the container) under ``dest_parent`` on this machine."""
    from docker.errors import NotFound

    try:
        stream, _ = api.get_archive(container, path)
    except NotFound:
        raise BuildFailed(f"the install step left nothing at {path} in the build container") from None
    dest_parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as tmp:
        for chunk in stream:
            tmp.write(chunk)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp, mode="r:") as tar:
            top = PurePosixPath(path).name
            members = [m for m in tar.getmembers() if PurePosixPath(m.name).parts[:1] == (top,)
                       and (m.isfile() or m.isdir() or m.issym() or m.islnk())]
            _extract(tar, members, dest_parent)


def _extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):  # refuses absolute names, '..' and links out of dest
        tar.extractall(dest, members=members, filter="data")
        return
    root = dest.resolve()  # pragma: no cover - Python without extraction filters
    for m in members:
        target = (dest / m.name).resolve()
        if not target.is_relative_to(root) or (m.issym() and not (target.parent / m.linkname).resolve().is_relative_to(root)):
            raise BuildFailed(f"the package archive has an entry outside the package: {m.name}")
    tar.extractall(dest, members=members)
