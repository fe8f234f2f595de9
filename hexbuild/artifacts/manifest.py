"""The package manifest: build metadata plus every file's size, sha256, mode and ELF identity.

Written by the build as PKG/manifest.json, embedded in release tarballs, and compared against a
device by deploy. No timestamps, sorted entries: the same package gives the same bytes.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import PackageFailed, UsageError
from ..paths import atomic_write
from .elf import NotElf, is_elf, read_elf
from .elf import HTP_NAME, htp_key

SCHEMA = 1
MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"
GENERATED = (MANIFEST, SUMS)  # at the package root: regenerated, never copied
CHUNK = 1 << 20  # the tarball writer's copy buffer
# Keys the manifest always has, in this order; other metadata keys follow, sorted.
META_KEYS = ("os", "llama_cpp", "image", "preset", "build_type", "htp_versions")


@dataclass(frozen=True)
class Entry:
    """One thing in the package: a directory, a regular file or a (relative, internal) symlink."""
    rel: str             # "lib/libggml.so", "/"-separated
    path: Path
    kind: str            # "dir" | "file" | "symlink"
    mode: int            # normalized: 0o755 or 0o644 (the target's, for symlinks)
    link: str | None = None
    target: Path | None = None  # a symlink's resolved file


def require_package_dir(pkg: Path) -> Path:
    """``pkg`` as a Path; UsageError when it is not an existing directory."""
    pkg = Path(pkg)
    if not pkg.is_dir():
        raise UsageError(f"package directory not found: {pkg}" if not pkg.exists() else f"not a directory: {pkg}",
                         hint="pass the install prefix, e.g. pkg-snapdragon/llama.cpp")
    return pkg


def require_llama_package(pkg: Path, *, shown: Path | str | None = None) -> Path:
    """``require_package_dir``, and what makes it a package: an install prefix with lib/ or bin/.
    The one rule deploy, package and release refuse anything else by (an empty or mistaken
    directory would make an empty tarball or an empty release)."""
    pkg = require_package_dir(pkg)
    if not ((pkg / "lib").is_dir() or (pkg / "bin").is_dir()):
        raise UsageError(f"{shown or pkg} is not a llama.cpp package (no lib/ or bin/)",
                         hint="pass the install prefix, e.g. pkg-snapdragon/llama.cpp")
    return pkg


def normal_mode(st_mode: int) -> int:
    """Any execute bit → 0755, else 0644: what ends up on the device does not depend on umasks."""
    return 0o755 if st_mode & 0o111 else 0o644


def scan(pkg: Path) -> list[Entry]:
    """Every entry under ``pkg`` except the generated files, sorted by path. PackageFailed for
    what a tarball or a device cannot hold faithfully: special files, symlinks that dangle,
    leave the package or point at directories."""
    pkg = require_package_dir(pkg)
    root = pkg.resolve()
    out: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(pkg, onerror=_raise):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = path.relative_to(pkg).as_posix()
            if rel in GENERATED:
                continue
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                link = os.readlink(path)
                target = path.resolve()
                if not target.exists():
                    raise PackageFailed(f"{rel}: dangling symlink -> {link}")
                if not target.is_relative_to(root):
                    raise PackageFailed(f"{rel}: symlink points outside the package -> {link}",
                                        hint="copy the file into the package instead")
                if not target.is_file():
                    raise PackageFailed(f"{rel}: symlink to a directory is not supported -> {link}")
                out.append(Entry(rel, path, "symlink", normal_mode(target.stat().st_mode), link, target))
            elif stat.S_ISDIR(st.st_mode):
                out.append(Entry(rel, path, "dir", 0o755))
            elif stat.S_ISREG(st.st_mode):
                out.append(Entry(rel, path, "file", normal_mode(st.st_mode)))
            else:
                raise PackageFailed(f"{rel}: not a regular file, directory or symlink")
    out.sort(key=lambda e: e.rel)
    return out


def _raise(err: OSError) -> None:
    raise PackageFailed(f"cannot read {err.filename}: {err.strerror}")


def elf_summary(path: Path) -> dict[str, Any] | None:
    if not is_elf(path):
        return None
    try:
        return read_elf(path).summary()
    except NotElf:
        return None


def file_records(entries: list[Entry]) -> list[dict[str, Any]]:
    """Records for the files and symlinks. A symlink's size, sha256 and elf are its target's, as
    on a device that copies. The hashes go through the hash cache (a thread per core; sha256
    releases the GIL), so the deploy that follows a build finds them there instead of reading
    every file again (217 MB of libraries: 0.2 s of two cores here)."""
    from .hashcache import HashCache

    files = [e for e in entries if e.kind != "dir"]
    reals = [e.target if e.kind == "symlink" else e.path for e in files]
    try:
        with HashCache() as cache:
            hashed = cache.many(reals)
    except OSError as e:
        rel = next((f.rel for f, r in zip(files, reals) if str(r) == str(e.filename)), e.filename)
        raise PackageFailed(f"cannot read {rel}: {e.strerror or e}") from None
    from concurrent.futures import ThreadPoolExecutor  # not at import: a deploy's start-up does not need it

    workers = min(4, (os.cpu_count() or 1) + 1, max(1, len(files)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        elves = list(pool.map(elf_summary, reals))
    return [{"path": e.rel, "size": size, "sha256": digest, "mode": f"{e.mode:04o}", "symlink": e.link, "elf": elf}
            for e, (size, digest), elf in zip(files, hashed, elves)]


def parse_manifest(raw: bytes | str, shown: Path | str) -> dict[str, Any]:
    """A package manifest's text as a dict, by the one rule every command follows (README's bad
    input rows package-manifest-truncated and package-manifest-newer, both exit 2): what is not a
    JSON object is damaged; a schema above this hexbuild's was written by a newer one, whose
    fields this one could misread. A manifest without ``schema`` (hand-written metadata, or one
    from before the field) is read as schema 1."""
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        schema = doc.get("schema", SCHEMA)
        if isinstance(schema, bool) or not isinstance(schema, int):
            raise ValueError(f"schema is {schema!r}, not a number")
    except (UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"the package's manifest.json is damaged ({str(e).splitlines()[0]}): {shown}",
                         hint="rebuild the package (hexbuild build / hexbuild package), or copy it again") from None
    if schema > SCHEMA:
        raise UsageError(f"the package's manifest.json was written by a newer hexbuild "
                         f"({doc.get('hexbuild_version', '?')}, manifest schema {schema}; this is {__version__}, "
                         f"schema {SCHEMA}): {shown}", hint="upgrade hexbuild (pip install -U hexbuild)")
    return doc


def read_package_manifest(pkg: Path, shown: Path | str | None = None) -> dict[str, Any] | None:
    """PKG/manifest.json by the one rule (``parse_manifest``); None when the package has none.
    ``shown``: how to name the package in a message (the tarball it came from)."""
    path = Path(pkg) / MANIFEST
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise UsageError(f"cannot read the package's manifest.json ({e.strerror or e}): {shown or pkg}") from None
    return parse_manifest(raw, shown or pkg)


def load_meta(pkg: Path, *, shown: Path | str | None = None) -> dict[str, Any]:
    """The build metadata in PKG/manifest.json (without its file list); {} when there is none.
    A damaged or newer manifest is refused (``parse_manifest``)."""
    data = read_package_manifest(pkg, shown) or {}
    return {k: v for k, v in data.items() if k not in ("schema", "hexbuild_version", "files")}


def package_os(pkg: Path, flag: str | None, default: str) -> str:
    """The OS to check or label a package for: the flag, else what its manifest says, else
    the configured default."""
    if flag:
        return flag
    meta_os = load_meta(pkg).get("os")
    return meta_os if meta_os in ("android", "linux") else default


def package_toolchain(pkg: Path) -> str:
    """vendor or open: what built the package (manifests older than the open toolchain: vendor)."""
    value = load_meta(pkg).get("toolchain")
    return value if value in ("vendor", "open") else "vendor"


def htp_versions_of(records: list[dict[str, Any]]) -> list[str]:
    found = {m.group(1) for r in records if r["path"].startswith("lib/")
             and (m := HTP_NAME.match(r["path"][4:]))}
    return sorted(found, key=htp_key)


def assemble(meta: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    manifest: dict[str, Any] = {"schema": SCHEMA, "hexbuild_version": __version__}
    defaults: dict[str, Any] = {"os": None, "llama_cpp": {"revision": None}, "image": {"reference": None, "digest": None},
                                "preset": None, "build_type": None, "htp_versions": htp_versions_of(records)}
    for key in META_KEYS:
        value = meta.get(key)
        manifest[key] = value if value is not None else defaults[key]
    for key in sorted(k for k in meta if k not in META_KEYS and k not in ("schema", "hexbuild_version", "files")):
        manifest[key] = meta[key]
    manifest["files"] = records
    if no_hmx(records) and "hmx" not in (manifest.get("lacks") or []):
        manifest["lacks"] = [*(manifest.get("lacks") or []), "hmx"]
    return manifest


def no_hmx(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """{skel path: units built empty} of the NPU libraries built without HMX (a toolchain that
    cannot assemble it, as hexbuild's toolchain double: the file says so, see elf.NO_HMX_SECTION)."""
    return {r["path"]: r["elf"]["no_hmx"] for r in records if (r.get("elf") or {}).get("no_hmx")}


def build_manifest(pkg: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of ``pkg``. ``meta`` is the build metadata (os, llama_cpp, image, preset,
    build_type, htp_versions, anything else); None reads it from PKG/manifest.json."""
    pkg = Path(pkg)
    entries = scan(pkg)
    if meta is None:
        meta = load_meta(pkg)
    records = file_records(entries)
    if meta.get("os") == "linux":
        meta = {**meta, "glibc": glibc_record(pkg, records)}
    return assemble(meta, records)


def glibc_record(pkg: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """What a Linux package needs from the system's glibc and libstdc++: the highest version of
    each family over all files ("needs") and per file, so deploy can refuse an older board."""
    from .glibc import package_needs, summary

    files = package_needs(pkg, [r["path"] for r in records if (r.get("elf") or {}).get("machine") == "AArch64"])
    return {"needs": summary(files), "files": files}


def dumps(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_manifest(pkg: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write PKG/manifest.json (atomically) and return it; its own entry is never listed."""
    pkg = Path(pkg)
    manifest = build_manifest(pkg, meta)
    atomic_write(pkg / MANIFEST, dumps(manifest), mode=0o644)
    return manifest
