"""What a Linux package needs from the system it lands on, and the runtime it can bring instead.

- The package's OS against what the target runs (``caps.package_oses``): an Android (bionic)
  package on a ``qemu:`` target is refused before anything happens.
- glibc: the package's programs and libraries need GLIBC_x.y versions (the manifest's ``glibc``
  record, else read from the files); a target whose glibc is older cannot start them, so the
  deploy stops before the first byte (DeployFailed, exit 7) and names ``--bundle-runtime``.
- ``--bundle-runtime``: the loader (ld-linux-aarch64.so.1) and every library the package needs
  that it does not carry itself (libc, libm, libstdc++, libgcc_s, … and what those need) travel
  from the sysroot the package was built against under ``runtime/``. The deployed manifest's
  ``runtime`` record tells ``run`` and the launch scripts to start programs through that loader
  with ``--library-path``, so the board's own older glibc is never used.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from ..errors import DeployFailed, UsageError
from ..targets.base import Target
from ..paths import cache_root
from .package import Package, PackageFile

RUNTIME_DIR = "runtime"


def package_os(pkg: Package) -> str | None:
    """android | linux from the manifest, else from the programs' interpreter; None if unknown."""
    return os_of(pkg.meta, {rel: f.local for rel, f in pkg.files.items()})


def os_of(meta: dict, files: dict[str, Path]) -> str | None:
    """``package_os`` of a manifest's metadata and the package's files (path in it → local file)."""
    meta_os = meta.get("os")
    if meta_os in ("android", "linux"):
        return meta_os
    from ..artifacts.elf import NotElf, is_elf, read_elf

    for rel, local in sorted(files.items()):
        if rel.startswith("bin/") and is_elf(local):
            try:
                interp = read_elf(local).interpreter
            except NotElf:
                continue
            if interp:
                return "android" if interp.startswith("/system/") else "linux"
    return None


def check_package_os(pkg: Package, target: Target) -> None:
    os_name = package_os(pkg)
    if os_name and os_name not in target.caps.package_oses:
        why = " (bionic programs need Android's linker, which is not here)" if os_name == "android" else ""
        raise UsageError(f"{target.spec} runs {', '.join(target.caps.package_oses)} packages, not an "
                         f"{os_name} package{why}",
                         hint="build for Linux: hexbuild build --os linux")


def foreign_note(pkg: Package, target: Target) -> str | None:
    """The one line deploy says when the package's programs cannot start where the target runs
    them (an AArch64 package on ``local:`` of an x86-64 machine): still deployed, since local:
    is also a staging tree, but ``run`` will refuse them."""
    from ..artifacts.elf import is_elf

    for rel, f in sorted(pkg.files.items()):
        if rel.startswith("bin/") and is_elf(f.local):
            arch = target.foreign(str(f.local))
            if not arch:
                return None
            from ..targets.local import this_machine

            _, hint = target.foreign_message(rel, arch)  # type: ignore[attr-defined]
            return (f"the package's programs are {arch} and this machine is {this_machine()[0]}: {target.kind}: "
                    f"starts them natively, so they cannot run from here ({hint})")
    return None


_NEEDS_LOCK = threading.Lock()


def glibc_needs(pkg: Package) -> dict[str, dict[str, str]]:
    """{file: {family: version}} — the manifest's record when it has one, else read now."""
    recorded = pkg.meta.get("glibc")
    if isinstance(recorded, dict) and isinstance(recorded.get("files"), dict):
        return {k: v for k, v in recorded["files"].items() if isinstance(v, dict)}
    # deploy checks its targets on threads of its own: the first reads the files and writes the
    # cache, the others then find every file there
    with _NEEDS_LOCK:
        return _read_needs(pkg)


def _read_needs(pkg: Package) -> dict[str, dict[str, str]]:
    from ..artifacts.glibc import needs
    from ..paths import atomic_write

    # read each distinct file once, and remember it by content across deploys
    cache_file = cache_root() / "glibc-needs.json"
    try:
        cache = json.loads(cache_file.read_text("utf-8"))
        cache = cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        cache = {}
    out, dirty = {}, False
    for rel, f in sorted(pkg.files.items()):
        if not rel.startswith(("bin/", "lib/")):
            continue
        if f.sha256 not in cache:
            cache[f.sha256], dirty = needs(f.local), True
        if cache[f.sha256]:
            out[rel] = cache[f.sha256]
    if dirty:
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(cache_file, json.dumps(dict(list(cache.items())[-5000:])))
        except OSError:
            pass  # a cache that cannot be written only costs time
    return out


def check_glibc(target: Target, pkg: Package, bundled: bool) -> dict[str, Any] | None:
    """Refuse (DeployFailed) a package ``target``'s glibc cannot load, unless it brings its
    own runtime. Returns {"target": have, "package": need} when both are known."""
    from ..artifacts.glibc import summary, too_new

    if pkg.meta.get("os") == "android" or not target.caps.glibc_check:
        return None
    per_file = glibc_needs(pkg)
    need = summary(per_file).get("GLIBC")
    if not need:
        return None
    have = target.glibc_version()
    if not have:
        return {"target": None, "package": need}
    bad = too_new(per_file, have)
    if bad and not bundled:
        first = next(iter(bad))
        raise DeployFailed(
            f"the package needs glibc {need} ({first} needs GLIBC_{bad[first]}"
            + (f", and {len(bad) - 1} more file(s)" if len(bad) > 1 else "")
            + f"); {target.spec} has glibc {have}",
            hint="ship the package's own runtime: hexbuild deploy --bundle-runtime (or build against glibc "
                 f"{have} or older)")
    return {"target": have, "package": need}


def bundle(pkg: Package, sysroot: Path) -> tuple[dict[str, PackageFile], dict[str, Any]]:
    """(runtime/ files, the manifest's ``runtime`` record) for ``pkg`` from ``sysroot``: the
    loader and the closure of the package's DT_NEEDED libraries the package does not carry."""
    from ..artifacts.elf import NotElf, is_elf, read_elf
    from ..artifacts.glibc import sysroot_version
    from ..toolchain.sysroot import LIB_DIRS, loader_of

    loader = loader_of(sysroot)
    if loader is None:
        raise UsageError(f"{sysroot} has no ld-linux-aarch64.so.1 to bundle")
    carried = {Path(r).name for r in pkg.files if r.startswith("lib/")}

    def find(name: str) -> Path | None:
        for d in LIB_DIRS:
            p = sysroot / d / name
            if p.exists():
                return p
        return None

    todo: list[str] = []
    for rel, f in pkg.files.items():
        if rel.startswith(("bin/", "lib/")) and is_elf(f.local):
            try:
                todo += list(read_elf(f.local).needed)
            except NotElf:
                continue
    chosen: dict[str, Path] = {}
    missing: list[str] = []
    while todo:
        name = todo.pop()
        if name in carried or name in chosen or name == loader.name:
            continue
        found = find(name)
        if found is None:
            missing.append(name)
            continue
        chosen[name] = found.resolve()
        try:
            todo += list(read_elf(chosen[name]).needed)
        except NotElf:
            pass
    if missing:
        raise UsageError(f"--bundle-runtime: {', '.join(sorted(set(missing)))} not found in {sysroot}",
                         hint="point --sysroot at the runtime the package was built against")
    files = {}
    for name, path in [(loader.name, loader.resolve()), *sorted(chosen.items())]:
        data = path.read_bytes()
        rel = f"{RUNTIME_DIR}/{name}"
        files[rel] = PackageFile(rel, len(data), hashlib.sha256(data).hexdigest(), 0o755, path)
    record = {"loader": f"{RUNTIME_DIR}/{loader.name}", "library_dir": RUNTIME_DIR,
              "glibc": sysroot_version(sysroot), "libraries": sorted(chosen)}
    return files, record
