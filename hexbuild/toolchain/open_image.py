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
<<<<<<< HEAD
    return recipe_image.ensure(client, recipe(), cache=cache or cache_dir(), method=method, rebuild=rebuild)
=======
    if method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    start = time.monotonic()
    rec = recipe()
    cache = cache or cache_dir()
    tarball = cache / f"open-arm64-linux-{rec.tag}.tar"

    def done(status: str, how: str | None) -> OpenImage:
        attrs = find(client, rec)
        if attrs is None:
            raise EnvironmentMissing(f"{rec.image} is not on the Docker engine after making it")
        if status == "created":  # a new image of this recipe: qemu: targets extract its runtime
            from .sysroot import forget_image

            forget_image(rec.image)
        return OpenImage(rec.image, REPOSITORY, rec.tag, rec.hash, status, how, time.monotonic() - start,
                         attrs["Id"], rec.packages, str(tarball) if tarball.is_file() else None)

    if not rebuild and find(client, rec) is not None:
        return done("reused", None)
    if tarball.is_file() and method != "dockerfile" and not rebuild:
        _import(client, tarball, rec)
        return done("created", "cache")
    if method == "auto":
        method = "dockerfile" if _has_network(client) else "rootfs"
        ui.detail(f"the engine {'has' if method == 'dockerfile' else 'has no'} bridge network: {method}")
    if method == "dockerfile":
        _docker_build(client, rec)
    else:
        build_rootfs(rec, tarball)
        _import(client, tarball, rec)
    return done("created", method)


def _has_network(client: Any) -> bool:
    try:
        return bool(client.api.networks(names=["bridge"]))
    except Exception:
        return False


def _docker_build(client: Any, rec: Recipe) -> None:
    from docker.errors import APIError, BuildError

    ui.info(f"building {rec.image} from the Dockerfile (debian:{SUITE} + {len(rec.packages)} packages)")
    with tempfile.TemporaryDirectory(prefix="hexbuild-open-recipe-") as tmp:
        rec.write(Path(tmp))
        ui.command(["docker", "build", "--label", f"{RECIPE_LABEL}={rec.hash}", "-t", rec.image, tmp])
        try:
            for chunk in client.api.build(path=tmp, tag=rec.image, labels={RECIPE_LABEL: rec.hash}, rm=True,
                                          forcerm=True, pull=True, decode=True):
                if "error" in chunk:
                    raise BuildError(chunk["error"], [])
                line = str(chunk.get("stream") or "").rstrip()
                if line.startswith("Step "):
                    ui.info(f"  {line}")
                elif line:
                    ui.detail(f"  {line}")
        except (APIError, BuildError) as e:
            raise EnvironmentMissing(f"docker build of {rec.image} failed: {str(e).splitlines()[0]}",
                                     hint="an engine without a network cannot pull debian:bookworm or run apt: "
                                          "use --method rootfs (as root, with debootstrap)") from None


# -- the root filesystem way ---------------------------------------------------------------------
def debian_mirror(sources: Path = Path("/etc/apt")) -> str | None:
    """This machine's Debian mirror for the suite, from its apt sources (deb822 files first, then
    sources.list); security mirrors are skipped."""
    for f in sorted((sources / "sources.list.d").glob("*.sources")):
        uris = suites = None
        for line in [*f.read_text(errors="replace").splitlines(), ""]:
            key, _, value = line.partition(":")
            if not line.strip():  # end of a stanza
                if uris and suites and SUITE in suites.split() and "security" not in uris:
                    return uris.split()[0]
                uris = suites = None
            elif key.strip() == "URIs":
                uris = value.strip()
            elif key.strip() == "Suites":
                suites = value.strip()
    try:
        for line in (sources / "sources.list").read_text(errors="replace").splitlines():
            parts = line.split()
            opts = [p for p in parts if p.startswith("[")]
            parts = [p for p in parts if p not in opts]
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE and "security" not in parts[1]:
                return parts[1]
    except OSError:
        pass
    return None


def _debootstrap(dirs: list[str] | None = None) -> str:
    for d in dirs if dirs is not None else [*os.environ.get("PATH", "").split(":"), "/usr/sbin", "/sbin"]:
        p = Path(d) / "debootstrap"
        if d and p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise EnvironmentMissing("debootstrap is not installed: the engine has no network, so hexbuild builds the "
                             "image's root filesystem here", hint="apt-get install debootstrap (as root)")
>>>>>>> main


def build_rootfs(rec: Recipe, tarball: Path) -> Path:
    """debootstrap + install.sh in a chroot, written to ``tarball`` (atomically)."""
    return recipe_image.build_rootfs(rec, tarball)
