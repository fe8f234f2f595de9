"""The open AArch64 Linux toolchain image (`hexbuild toolchain open`), from Debian packages only.

The recipe is docker/open-arm64-linux/ (shipped as ``hexbuild.open_recipe``): ``packages.txt``
(the one package list), ``install.sh`` (installs it, names clang-19 ``clang``) and a
``Dockerfile`` (``FROM debian:bookworm``, runs install.sh). The hash of those files tags the
image, ``hexbuild/open-arm64-linux:<hash>``, and labels it, so a changed recipe makes a new
image and an unchanged one is found again in one API call.

Two ways to make it, the same recipe either way:

- ``dockerfile``: ``docker build`` on an engine whose containers have a network (it has a
  ``bridge`` network);
- ``rootfs``: the engine has none (``--bridge=none``): ``debootstrap --variant=minbase bookworm``
  on this machine from the Debian mirror in its own apt sources, install.sh in a chroot (apt
  reaches the same mirror), then ``docker import``. Needs root and debootstrap. The root
  filesystem tarball is kept under hexbuild's cache, so importing it again (a new engine, a
  pruned image) takes seconds instead of minutes.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..paths import cache_root
from . import recipe_image
from .recipe_image import METHODS, RECIPE_LABEL, Recipe, debian_mirror  # noqa: F401 (this module's API)
from .recipe_image import RecipeImage as OpenImage

REPOSITORY = "hexbuild/open-arm64-linux"
SUITE = "bookworm"
LLVM = "19"
# What Debian's clang needs to build a tree's own arm64-linux preset (which adds -flto): lld for
# the LTO links, and LLVM's ar/ranlib for static archives of LLVM bitcode. The full-LTO links
# (libllama, libllama-common, the server: one after the other, each waiting for the last) generate
# their code in LTO_PARTITIONS threads: libllama's link took 31-33 s against 44-50 s on 2 cores.
# A fixed count, not --jobs: the linker flags are part of the build's configuration.
LTO_PARTITIONS = 4
LINKER_FLAGS = f"-fuse-ld=lld -Wl,--lto-partitions={LTO_PARTITIONS}"
CMAKE_ARGS = (f"-DCMAKE_EXE_LINKER_FLAGS={LINKER_FLAGS}", f"-DCMAKE_SHARED_LINKER_FLAGS={LINKER_FLAGS}",
              f"-DCMAKE_MODULE_LINKER_FLAGS={LINKER_FLAGS}", f"-DCMAKE_AR=/usr/bin/llvm-ar-{LLVM}",
              f"-DCMAKE_RANLIB=/usr/bin/llvm-ranlib-{LLVM}")

KIND = recipe_image.ImageKind(name="open-arm64-linux", repository=REPOSITORY, package="hexbuild.open_recipe",
                              files=("Dockerfile", "install.sh", "packages.txt"), suite=SUITE,
                              title="hexbuild open AArch64 Linux toolchain", command="hexbuild toolchain open",
                              checkout_dir="docker/open-arm64-linux")


@functools.lru_cache(maxsize=1)
def recipe() -> Recipe:
    return recipe_image.read_recipe(KIND)


def image_ref() -> str:
    """The tag the current recipe makes; needs no daemon."""
    return recipe().image


def cache_dir() -> Path:
    return cache_root() / "open-toolchain"


def find(client: Any, rec: Recipe | None = None) -> dict[str, Any] | None:
    """The engine's copy of the image for this recipe (its inspect answer), or None."""
    return recipe_image.find(client, rec or recipe())


def ensure_open_image(client: Any, *, method: str = "auto", rebuild: bool = False,
                      cache: Path | None = None) -> OpenImage:
    """Find or make the open toolchain image on the engine ``client`` talks to."""
    made = recipe_image.ensure(client, recipe(), cache=cache or cache_dir(), method=method, rebuild=rebuild)
    if made.status == "created":  # a new image of this recipe: qemu: targets extract its runtime again
        from .sysroot import forget_image

        forget_image(made.image)
    return made


def build_rootfs(rec: Recipe, tarball: Path) -> Path:
    """debootstrap + install.sh in a chroot, written to ``tarball`` (atomically)."""
    return recipe_image.build_rootfs(rec, tarball)
