"""The kernel check's image: Debian sid's LLVM 21 for Hexagon and a qemu-hexagon built from
Debian's QEMU source with hexbuild's patches (docker/kernel-check/, qemu-hexagon-hvx/).

The QEMU source is the one Debian serves (the orig tarball and Debian's patch series), pinned here
by version and sha256, fetched from this machine's Debian mirror (its apt sources name it) or from
a directory given in HEXBUILD_QEMU_SOURCE (for a machine without one), and kept in hexbuild's
cache. hexbuild's patches and the pinned digests are part of the recipe's hash: a changed patch
makes a new image. Building it needs neither the vendor image nor any SDK.
"""

from __future__ import annotations

import functools
import hashlib
import os
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import EnvironmentMissing
from ..paths import cache_root
from ..toolchain import recipe_image
from ..toolchain.recipe_image import Recipe, RecipeImage
from ..ui import ui

REPOSITORY = "hexbuild/kernel-check"
QEMU_VERSION = "10.2.2"
# Debian's source package qemu 1:10.2.2+ds-1: file -> sha256 (from its .dsc)
QEMU_SOURCE = {
    "qemu_10.2.2+ds.orig.tar.xz": "be05230fe47a6937cd29f28f562932c8125f9c93c2a82c625198f7a4aa601dfb",
    "qemu_10.2.2+ds-1.debian.tar.xz": "ddf75aceab4f8f77374f3cb34fc97b41514895aeb293ce8b2ddd5e072bb0f5c0",
}
QEMU_POOL = "pool/main/q/qemu"
QEMU_BIN = "/opt/hexbuild/bin/qemu-hexagon"
CLANG = "clang-21"
LLD = "ld.lld-21"

KIND = recipe_image.ImageKind(name="kernel-check", repository=REPOSITORY, package="hexbuild.kernel_recipe",
                              files=("Dockerfile", "install.sh", "packages.txt"), suite="sid",
                              title="hexbuild kernel check (LLVM 21 for Hexagon, qemu-hexagon with HVX patches)",
                              command="hexbuild toolchain kernels", checkout_dir="docker/kernel-check")


def patches() -> dict[str, bytes]:
    """hexbuild's QEMU patches, in the order they apply."""
    root = recipe_image.package_root("hexbuild.qemu_hvx", "qemu-hexagon-hvx").joinpath("patches")
    names = sorted(p.name for p in root.iterdir() if p.name.endswith(".patch"))
    return {name: root.joinpath(name).read_bytes() for name in names}


@functools.lru_cache(maxsize=1)
def recipe() -> Recipe:
    """The recipe with the patches as inputs; the QEMU tarballs are counted by their pinned
    digests and fetched only when the image is made."""
    inputs = {f"qemu/patches/{name}": data for name, data in patches().items()}
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in inputs.items()}
    digests.update({f"qemu/{name}": sha for name, sha in QEMU_SOURCE.items()})
    return recipe_image.read_recipe(KIND, inputs, digests)


def image_ref() -> str:
    return recipe().image


def cache_dir() -> Path:
    return cache_root() / "kernel-check"


def qemu_source(cache: Path | None = None) -> dict[str, bytes]:
    """Debian's QEMU source files, checked against the pinned digests."""
    cache = (cache or cache_dir()) / "qemu-source"
    cache.mkdir(parents=True, exist_ok=True)
    given = os.environ.get("HEXBUILD_QEMU_SOURCE")
    mirror = None
    out: dict[str, bytes] = {}
    for name, sha in QEMU_SOURCE.items():
        path = cache / name
        if given:
            path = Path(given) / name
        if not (path.is_file() and _sha256(path) == sha):
            if given:
                raise EnvironmentMissing(f"{path} is missing or is not Debian's {name} (sha256 differs)",
                                         hint=f"HEXBUILD_QEMU_SOURCE names a directory holding {', '.join(QEMU_SOURCE)}")
            mirror = mirror or recipe_image.debian_mirror(suite=None)
            if not mirror:
                raise EnvironmentMissing("no Debian mirror in this machine's apt sources to fetch QEMU's source from",
                                         hint="download Debian's qemu " f"{QEMU_VERSION} source files "
                                              f"({', '.join(QEMU_SOURCE)}) into a directory and set "
                                              "HEXBUILD_QEMU_SOURCE to it")
            _download(f"{mirror.rstrip('/')}/{QEMU_POOL}/{name}", path, sha)
        out[name] = path.read_bytes()
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, path: Path, sha: str) -> None:
    ui.info(f"fetching {path.name} from the Debian mirror")
    ui.command(["curl", "-fLo", str(path), url])
    part = path.with_name(path.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(part, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise EnvironmentMissing(f"cannot fetch {path.name} from the Debian mirror: {e}",
                                 hint="set HEXBUILD_QEMU_SOURCE to a directory holding Debian's QEMU source "
                                      "files") from None
    if _sha256(part) != sha:
        part.unlink(missing_ok=True)
        raise EnvironmentMissing(f"{path.name} from the Debian mirror is not the pinned one (sha256 differs)")
    os.replace(part, path)


def with_source(rec: Recipe, cache: Path | None = None) -> Recipe:
    inputs = dict(rec.inputs)
    inputs.update({f"qemu/{name}": data for name, data in qemu_source(cache).items()})
    return Recipe(rec.kind, rec.files, rec.hash, inputs)


def find(client: Any) -> dict[str, Any] | None:
    return recipe_image.find(client, recipe())


def ensure_kernel_image(client: Any, *, method: str = "auto", rebuild: bool = False,
                        cache: Path | None = None) -> RecipeImage:
    """Find or make the kernel check's image (minutes, once: QEMU is compiled)."""
    cache = cache or cache_dir()
    return recipe_image.ensure(client, recipe(), cache=cache, method=method, rebuild=rebuild,
                               fetch_inputs=lambda rec: with_source(rec, cache))


def rootfs_tarball(cache: Path | None = None) -> Path:
    return recipe_image.rootfs_tarball(recipe(), cache or cache_dir())


def build_rootfs(cache: Path | None = None) -> Path:
    """The image's root filesystem as a tarball in ``cache`` (what the rootfs method imports)."""
    cache = cache or cache_dir()
    return recipe_image.build_rootfs(with_source(recipe(), cache), rootfs_tarball(cache))
