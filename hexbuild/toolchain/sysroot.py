"""The AArch64 glibc runtime that Linux programs run against off the board: ``qemu-aarch64 -L``
for ``qemu:`` targets, and the loader and libraries ``deploy --bundle-runtime`` ships.

By default it is the open toolchain image's own cross runtime (``/usr/aarch64-linux-gnu``:
``lib/ld-linux-aarch64.so.1``, libc, libm, libstdc++, libgcc_s…) — the runtime the programs
were linked against — copied out of a container of that image once (Docker SDK
``get_archive``) into hexbuild's cache, keyed by the image id, and found again without the
engine while the recipe (and so the image's tag) is the same. A directory given with
``--sysroot`` (``linux.sysroot``) is used as it is, e.g. Debian's ``/usr/aarch64-linux-gnu``.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import EnvironmentMissing, UsageError
from ..paths import cache_root
from ..ui import ui

OPEN_IMAGE_REPO = "hexbuild/open-arm64-linux"  # hexbuild.toolchain.open_image.REPOSITORY
IMAGE_RUNTIME = "/usr/aarch64-linux-gnu"
LOADER = "ld-linux-aarch64.so.1"
LIB_DIRS = ("lib", "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib64", "usr/lib")


def loader_of(sysroot: Path) -> Path | None:
    """The AArch64 dynamic loader inside ``sysroot`` (where /lib/ld-linux-aarch64.so.1 maps)."""
    for d in LIB_DIRS:
        p = sysroot / d / LOADER
        if p.exists():
            return p
    return None


def check_sysroot(path: str | Path) -> Path:
    root = Path(path).expanduser()
    if not root.is_dir():
        raise UsageError(f"sysroot not found: {root}", hint="e.g. --sysroot /usr/aarch64-linux-gnu (apt install libc6-arm64-cross)")
    if loader_of(root) is None:
        raise UsageError(f"{root} is not an AArch64 glibc sysroot: no lib/{LOADER} in it",
                         hint="e.g. --sysroot /usr/aarch64-linux-gnu (apt install libc6-arm64-cross)")
    return root.absolute()


def resolve_sysroot(setting: str | None) -> Path:
    """``setting`` checked, or the open image's runtime extracted into the cache."""
    if setting:
        return check_sysroot(setting)
    return image_sysroot()


def _missing(why: str) -> EnvironmentMissing:
    return EnvironmentMissing(
        f"no AArch64 runtime to run Linux programs with: {why}",
        hint="make the open toolchain image with `hexbuild toolchain open`, or pass a sysroot: "
             "--sysroot /usr/aarch64-linux-gnu (apt install libc6-arm64-cross)")


def find_open_image(client) -> tuple[str, str]:
    """(reference, id) of the image the current recipe makes (``hexbuild toolchain open``), else
    the newest local ``hexbuild/open-arm64-linux`` image."""
    from docker.errors import ImageNotFound

    from .open_image import image_ref

    try:
        current = image_ref()
        return current, client.images.get(current).id
    except ImageNotFound:
        pass
    images = client.images.list(name=OPEN_IMAGE_REPO)
    if not images:
        raise _missing(f"the image {OPEN_IMAGE_REPO} is not on the Docker engine")
    newest = max(images, key=lambda i: i.attrs.get("Created", ""))
    tags = [t for t in newest.tags if t.startswith(OPEN_IMAGE_REPO + ":")]
    return (tags[0] if tags else newest.id), newest.id


def image_sysroot() -> Path:
    """The runtime extracted from the open image: found without the Docker engine when the image
    the current recipe makes was extracted before (``sysroots/images.json``: tag → directory),
    else asked of the engine (importing the Docker SDK and two calls: a third of a ``serve``'s
    start on a ``qemu:`` target), extracted if need be, and remembered."""
    from .open_image import image_ref

    current = image_ref()
    known = _remembered().get(current)
    if known:
        root = cache_root() / "sysroots" / known / "aarch64-linux-gnu"
        if loader_of(root) is not None:
            return root
    from .engine import DockerEngine

    try:
        engine = DockerEngine.connect()
    except EnvironmentMissing as e:
        raise _missing(f"the Docker engine is not reachable ({e.message})") from None
    try:
        ref, image_id = find_open_image(engine.client)
        dest = cache_root() / "sysroots" / image_id.split(":")[-1][:16]
        root = dest / "aarch64-linux-gnu"
        if loader_of(root) is None:
            ui.info(f"extracting the AArch64 runtime of {ref} into {dest}")
            _export(engine.client, ref, dest)
            if loader_of(root) is None:
                raise _missing(f"{ref} has no {IMAGE_RUNTIME}/lib/{LOADER}")
        if ref == current:  # a fallback image (another recipe's) is asked for again next time
            _remember(current, dest.name)
        return root
    finally:
        engine.close()


def _index() -> Path:
    return cache_root() / "sysroots" / "images.json"


def _remembered() -> dict[str, str]:
    import json

    try:
        data = json.loads(_index().read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) else {}


def _remember(ref: str, directory: str) -> None:
    import json

    from ..paths import atomic_write

    known = _remembered()
    if known.get(ref) != directory:
        try:
            atomic_write(_index(), json.dumps({**known, ref: directory}), mode=0o644)
        except OSError:  # a read-only cache: the engine is asked again next time
            pass


def forget_image(ref: str) -> None:
    """``ref`` was made again (``hexbuild toolchain open``): its runtime is extracted anew."""
    import json

    from ..paths import atomic_write

    known = _remembered()
    if ref in known:
        known.pop(ref)
        try:
            atomic_write(_index(), json.dumps(known), mode=0o644)
        except OSError:
            pass


def _export(client, ref: str, dest: Path) -> None:
    """Copy IMAGE_RUNTIME out of a (never started) container of ``ref`` into ``dest``, atomically."""
    import secrets  # (here: a qemu: target that finds its runtime extracted imports none of them)
    import shutil
    import tarfile
    import tempfile

    from .transfer import _extract

    name = f"hexbuild-sysroot-{secrets.token_hex(4)}"
    ui.command(["docker", "create", "--name", name, ref, "true"])
    container = client.api.create_container(ref, command=["true"], name=name, network_disabled=True)
    part = dest.with_name(dest.name + f".part-{secrets.token_hex(3)}")
    try:
        ui.command(["docker", "cp", f"{name}:{IMAGE_RUNTIME}", str(part)])
        stream, _ = client.api.get_archive(container["Id"], IMAGE_RUNTIME)
        part.mkdir(parents=True)
        with tempfile.TemporaryFile() as tmp:
            for chunk in stream:
                tmp.write(chunk)
            tmp.seek(0)
            with tarfile.open(fileobj=tmp, mode="r:") as tar:
                members = [m for m in tar.getmembers() if m.isfile() or m.isdir() or m.issym() or m.islnk()]
                # absolute symlinks (rare in the cross runtime) cannot be kept inside a cache dir
                members = [m for m in members if not (m.issym() and m.linkname.startswith("/"))]
                _extract(tar, members, part)
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        part.rename(dest)
    finally:
        shutil.rmtree(part, ignore_errors=True)
        try:
            client.api.remove_container(container["Id"], force=True)
        except Exception:
            pass
