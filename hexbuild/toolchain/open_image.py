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
import hashlib
import importlib.resources
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import EnvironmentMissing, UsageError
from ..paths import cache_root
from ..ui import human_size, ui

REPOSITORY = "hexbuild/open-arm64-linux"
RECIPE_LABEL = "hexbuild.recipe"
RECIPE_FILES = ("Dockerfile", "install.sh", "packages.txt")
SUITE = "bookworm"
METHODS = ("auto", "dockerfile", "rootfs")
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


@dataclass(frozen=True)
class Recipe:
    files: dict[str, bytes]
    hash: str  # sha256 over the recipe files' names and contents

    @property
    def tag(self) -> str:
        return self.hash[:12]

    @property
    def image(self) -> str:
        return f"{REPOSITORY}:{self.tag}"

    @property
    def packages(self) -> list[str]:
        text = self.files["packages.txt"].decode("utf-8")
        return [w for line in text.splitlines() for w in line.split("#", 1)[0].split()]

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (directory / name).write_bytes(data)
            (directory / name).chmod(0o755 if name.endswith(".sh") else 0o644)
        return directory


def _recipe_root() -> Any:
    """The recipe beside this hexbuild: a checkout's own docker/open-arm64-linux/ when hexbuild
    runs from one (python -m hexbuild, PYTHONPATH, an editable install), else the copy a wheel
    ships as hexbuild.open_recipe. A checkout run beside a wheel install elsewhere has no
    hexbuild.open_recipe to import: the package-dir mapping exists only in an install."""
    checkout = Path(__file__).resolve().parents[2] / "docker" / "open-arm64-linux"
    if (checkout / "Dockerfile").is_file():
        return checkout
    return importlib.resources.files("hexbuild.open_recipe")


@functools.lru_cache(maxsize=1)
def recipe() -> Recipe:
    root = _recipe_root()
    files = {name: root.joinpath(name).read_bytes() for name in RECIPE_FILES}
    h = hashlib.sha256()
    for name in RECIPE_FILES:
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return Recipe(files, h.hexdigest())


def image_ref() -> str:
    """The tag the current recipe makes; needs no daemon."""
    return recipe().image


@dataclass
class OpenImage:
    image: str
    repository: str
    tag: str
    recipe_hash: str
    status: str            # created | reused
    method: str | None     # dockerfile | rootfs | cache (imported from the cached root filesystem)
    seconds: float
    id: str
    packages: list[str]
    rootfs_cache: str | None = None

    @property
    def created(self) -> bool:
        return self.status == "created"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "created": self.created, "seconds": round(self.seconds, 3)}


def cache_dir() -> Path:
    return cache_root() / "open-toolchain"


def find(client: Any, rec: Recipe | None = None) -> dict[str, Any] | None:
    """The engine's copy of the image for this recipe (its inspect answer), or None."""
    from docker.errors import ImageNotFound

    rec = rec or recipe()
    try:
        attrs = client.api.inspect_image(rec.image)
    except ImageNotFound:
        return None
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return attrs if labels.get(RECIPE_LABEL) == rec.hash else None


def ensure_open_image(client: Any, *, method: str = "auto", rebuild: bool = False,
                      cache: Path | None = None) -> OpenImage:
    """Find or make the open toolchain image on the engine ``client`` talks to."""
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


def build_rootfs(rec: Recipe, tarball: Path) -> Path:
    """debootstrap + install.sh in a chroot, written to ``tarball`` (atomically)."""
    if os.geteuid() != 0:
        raise EnvironmentMissing("making the open toolchain image without a network needs root (debootstrap and "
                                 "chroot run here)", hint="run `sudo hexbuild toolchain open`, or use an engine "
                                 "with a network (--method dockerfile)")
    debootstrap = _debootstrap()
    mirror = debian_mirror()
    if not mirror:
        raise EnvironmentMissing(f"no Debian {SUITE} mirror in this machine's apt sources (/etc/apt)",
                                 hint=f"add a {SUITE} entry to the apt sources, or use --method dockerfile")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    log = tarball.parent / "rootfs-build.log"
    root = Path(tempfile.mkdtemp(prefix="rootfs-", dir=tarball.parent))
    root.chmod(0o755)  # it becomes the image's "/": mkdtemp's 0700 would lock out every other user
    try:
        with open(log, "wb") as out:
            _step(f"debootstrap --variant=minbase {SUITE} (from this machine's Debian mirror)",
                  [debootstrap, "--variant=minbase", SUITE, str(root), mirror], out, log)
            rec.write(root / "tmp" / "hexbuild-recipe")
            if Path("/etc/resolv.conf").is_file():  # apt in the chroot resolves the mirror's name
                shutil.copyfile("/etc/resolv.conf", root / "etc" / "resolv.conf")
            _step(f"apt-get install {' '.join(rec.packages)} (in the chroot)",
                  ["chroot", str(root), "sh", "/tmp/hexbuild-recipe/install.sh"], out, log)
        shutil.rmtree(root / "tmp" / "hexbuild-recipe")
        (root / "etc" / "resolv.conf").unlink(missing_ok=True)
        part = tarball.with_name(tarball.name + ".part")
        _step(f"tar of the root filesystem -> {tarball}",
              ["tar", "-C", str(root), "--numeric-owner", "-cf", str(part), "."], None, log)
        os.replace(part, tarball)
        for old in tarball.parent.glob("open-arm64-linux-*.tar"):
            if old != tarball:
                old.unlink(missing_ok=True)  # an older recipe's: only the current one is kept
    finally:
        shutil.rmtree(root, ignore_errors=True)
        tarball.with_name(tarball.name + ".part").unlink(missing_ok=True)
    return tarball


def _step(title: str, argv: list[str], out: Any, log: Path) -> None:
    ui.info(title)
    ui.command(argv)
    t0 = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    if "/usr/sbin" not in env["PATH"].split(":"):
        env["PATH"] += ":/usr/sbin:/sbin"
    try:
        cp = subprocess.run(argv, stdout=out or subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, check=False)
    except FileNotFoundError:
        raise EnvironmentMissing(f"{argv[0]} not found") from None
    if cp.returncode != 0:
        tail = _tail(log) if out is not None else (cp.stdout or b"").decode(errors="replace")[-2000:]
        for line in tail.splitlines()[-10:]:
            ui.info(f"  | {line}")
        raise EnvironmentMissing(f"{argv[0]} failed (exit {cp.returncode}) while making the open toolchain image; "
                                 f"log: {log}", hint="check that the Debian mirror in the apt sources is reachable")
    ui.detail(f"  {time.monotonic() - t0:.1f}s")


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


def _import(client: Any, tarball: Path, rec: Recipe) -> None:
    ui.info(f"importing {tarball.name} ({human_size(tarball.stat().st_size)}) as {rec.image}")
    changes = [f"LABEL {RECIPE_LABEL}={rec.hash}",
               'LABEL org.opencontainers.image.title="hexbuild open AArch64 Linux toolchain"',
               "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]']
    ui.command(["docker", "import", *[a for c in changes for a in ("--change", c)], str(tarball), rec.image])
    api = client.api
    saved, api.timeout = api.timeout, 900  # a gigabyte goes through the API in one request
    try:
        api.import_image_from_file(str(tarball), repository=REPOSITORY, tag=rec.tag, changes=changes)
    finally:
        api.timeout = saved
