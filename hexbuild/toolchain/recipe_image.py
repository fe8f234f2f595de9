"""Images hexbuild makes itself from a recipe of Debian packages (the open AArch64 Linux
toolchain, the kernel check's emulator and compilers).

A recipe is a folder shipped in the wheel (``packages.txt``, ``install.sh``, a ``Dockerfile``, and
whatever else it names), plus inputs fetched at build time (``Recipe.inputs``: files such as a
source tarball, given as name -> bytes). The hash of all of it tags the image,
``<repository>:<hash[:12]>``, and labels it, so a changed recipe makes a new image and an unchanged
one is found again in one API call.

Two ways to make it, the same recipe either way:

- ``dockerfile``: ``docker build`` on an engine whose containers have a network;
- ``rootfs``: the engine has none: ``debootstrap --variant=minbase <suite>`` on this machine from
  the Debian mirror in its own apt sources, install.sh in a chroot (apt reaches the same mirror),
  then ``docker import``. Needs root and debootstrap. The root filesystem tarball is kept under
  hexbuild's cache, so importing it again (a new engine, a pruned image) takes seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EnvironmentMissing, UsageError
from ..ui import human_size, ui

RECIPE_LABEL = "hexbuild.recipe"
METHODS = ("auto", "dockerfile", "rootfs")


@dataclass(frozen=True)
class ImageKind:
    """What differs between hexbuild's recipe images."""

    name: str              # file names: <name>-<tag>.tar
    repository: str        # hexbuild/<name>
    package: str           # the recipe folder as a package (pyproject's package-dir)
    files: tuple[str, ...] # the recipe's own files, in hash order
    suite: str             # the Debian suite debootstrap makes
    title: str             # the image's title label
    command: str           # the hexbuild command that makes it (for hints)
    checkout_dir: str = ""  # the recipe folder in a checkout of hexbuild (see package_root)


@dataclass(frozen=True)
class Recipe:
    kind: ImageKind
    files: dict[str, bytes]
    hash: str                                   # sha256 over the recipe files and inputs
    inputs: dict[str, bytes] = field(default_factory=dict, compare=False)

    @property
    def tag(self) -> str:
        return self.hash[:12]

    @property
    def image(self) -> str:
        return f"{self.kind.repository}:{self.tag}"

    @property
    def packages(self) -> list[str]:
        text = self.files["packages.txt"].decode("utf-8")
        return [w for line in text.splitlines() for w in line.split("#", 1)[0].split()]

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in {**self.files, **self.inputs}.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o755 if name.endswith(".sh") else 0o644)
        return directory


def package_root(package: str, checkout_dir: str) -> Any:
    """A folder shipped as data: the checkout's own ``checkout_dir`` when hexbuild runs from a
    checkout (python -m hexbuild, PYTHONPATH, an editable install), else the copy a wheel ships as
    ``package``. A checkout run beside a wheel installed elsewhere has no such package to import:
    the package-dir mapping exists only in an install."""
    checkout = Path(__file__).resolve().parents[2] / checkout_dir
    if checkout_dir and checkout.is_dir():
        return checkout
    import importlib.util

    # A wheel's copy is a plain folder: found through the import system's spec rather than
    # importlib.resources (whose import and files() were 5 ms of a qemu: serve's start).
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if len(folders) == 1 and Path(folders[0]).is_dir():
        return Path(folders[0])
    import importlib.resources  # a zipped or namespace install

    return importlib.resources.files(package)


def read_recipe(kind: ImageKind, inputs: dict[str, bytes] | None = None,
                input_digests: dict[str, str] | None = None) -> Recipe:
    """The recipe as shipped. ``input_digests`` (name -> sha256) stand in the hash for inputs that
    are fetched only when the image is made, so the tag is known without fetching them."""
    root = package_root(kind.package, kind.checkout_dir)
    files = {name: root.joinpath(name).read_bytes() for name in kind.files}
    h = hashlib.sha256()
    for name in kind.files:
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    for name, digest in sorted((input_digests or {}).items()):
        h.update(f"input {name} {digest}\0".encode())
    return Recipe(kind, files, h.hexdigest(), dict(inputs or {}))


@dataclass
class RecipeImage:
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


def find(client: Any, rec: Recipe) -> dict[str, Any] | None:
    """The engine's copy of the image for this recipe (its inspect answer), or None."""
    from docker.errors import ImageNotFound

    try:
        attrs = client.api.inspect_image(rec.image)
    except ImageNotFound:
        return None
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return attrs if labels.get(RECIPE_LABEL) == rec.hash else None


def rootfs_tarball(rec: Recipe, cache: Path) -> Path:
    return cache / f"{rec.kind.name}-{rec.tag}.tar"


def ensure(client: Any, rec: Recipe, *, cache: Path, method: str = "auto", rebuild: bool = False,
           fetch_inputs: Any = None) -> RecipeImage:
    """Find or make the recipe's image on the engine ``client`` talks to. ``fetch_inputs(rec)``
    returns the recipe with its inputs when they are needed (a build, not a reuse)."""
    if method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    start = time.monotonic()
    tarball = rootfs_tarball(rec, cache)

    def done(status: str, how: str | None) -> RecipeImage:
        attrs = find(client, rec)
        if attrs is None:
            raise EnvironmentMissing(f"{rec.image} is not on the Docker engine after making it")
        return RecipeImage(rec.image, rec.kind.repository, rec.tag, rec.hash, status, how, time.monotonic() - start,
                           attrs["Id"], rec.packages, str(tarball) if tarball.is_file() else None)

    if not rebuild and find(client, rec) is not None:
        return done("reused", None)
    if tarball.is_file() and method != "dockerfile" and not rebuild:
        import_rootfs(client, tarball, rec)
        return done("created", "cache")
    if fetch_inputs is not None:
        rec = fetch_inputs(rec)
    if method == "auto":
        method = "dockerfile" if _has_network(client) else "rootfs"
        ui.detail(f"the engine {'has' if method == 'dockerfile' else 'has no'} bridge network: {method}")
    if method == "dockerfile":
        _docker_build(client, rec)
    else:
        build_rootfs(rec, tarball)
        import_rootfs(client, tarball, rec)
    return done("created", method)


def _has_network(client: Any) -> bool:
    try:
        return bool(client.api.networks(names=["bridge"]))
    except Exception:
        return False


def _docker_build(client: Any, rec: Recipe) -> None:
    from docker.errors import APIError, BuildError

    ui.info(f"building {rec.image} from the Dockerfile (debian:{rec.kind.suite} + {len(rec.packages)} packages)")
    import tempfile  # here: every qemu: start finds its image through this module, and builds none

    with tempfile.TemporaryDirectory(prefix=f"hexbuild-{rec.kind.name}-recipe-") as tmp:
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
                                     hint=f"an engine without a network cannot pull debian:{rec.kind.suite} or run "
                                          "apt: use --method rootfs (as root, with debootstrap)") from None


# -- the root filesystem way ---------------------------------------------------------------------
def debian_mirror(sources: Path = Path("/etc/apt"), suite: str | None = "bookworm") -> str | None:
    """This machine's Debian mirror, from its apt sources (deb822 files first, then sources.list);
    security mirrors are skipped. ``suite`` None takes the first Debian mirror of any suite (it
    serves the others too)."""
    def wanted(suites: str) -> bool:
        return suite is None or suite in suites.split()

    for f in sorted((sources / "sources.list.d").glob("*.sources")):
        uris = suites = None
        for line in [*f.read_text(errors="replace").splitlines(), ""]:
            key, _, value = line.partition(":")
            if not line.strip():  # end of a stanza
                if uris and suites and wanted(suites) and "security" not in uris:
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
            if len(parts) >= 3 and parts[0] == "deb" and wanted(parts[2]) and "security" not in parts[1]:
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
    kind = rec.kind
    if os.geteuid() != 0:
        raise EnvironmentMissing(f"making {kind.repository} without a network needs root (debootstrap and chroot "
                                 "run here)", hint=f"run `sudo {kind.command}`, or use an engine with a network "
                                                   "(--method dockerfile)")
    debootstrap = _debootstrap()
    mirror = debian_mirror(suite="bookworm" if kind.suite == "bookworm" else None)
    if not mirror:
        raise EnvironmentMissing("no Debian mirror in this machine's apt sources (/etc/apt)",
                                 hint="add a Debian entry to the apt sources, or use --method dockerfile")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    log = tarball.parent / f"{kind.name}-rootfs-build.log"
    log.unlink(missing_ok=True)
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="rootfs-", dir=tarball.parent))
    root.chmod(0o755)  # it becomes the image's "/": mkdtemp's 0700 would lock out every other user
    try:
        with open(log, "wb") as out:
            _step(f"debootstrap --variant=minbase {kind.suite} (from this machine's Debian mirror)",
                  [debootstrap, "--variant=minbase", kind.suite, str(root), mirror], out, log, kind)
            rec.write(root / "tmp" / "hexbuild-recipe")
            if Path("/etc/resolv.conf").is_file():  # apt in the chroot resolves the mirror's name
                shutil.copyfile("/etc/resolv.conf", root / "etc" / "resolv.conf")
            _step(f"install.sh: {' '.join(rec.packages)} (in the chroot)",
                  ["chroot", str(root), "sh", "/tmp/hexbuild-recipe/install.sh"], out, log, kind)
        shutil.rmtree(root / "tmp" / "hexbuild-recipe")
        (root / "etc" / "resolv.conf").unlink(missing_ok=True)
        part = tarball.with_name(tarball.name + ".part")
        _step(f"tar of the root filesystem -> {tarball}",
              ["tar", "-C", str(root), "--numeric-owner", "-cf", str(part), "."], None, log, kind)
        os.replace(part, tarball)
        for old in tarball.parent.glob(f"{kind.name}-*.tar"):
            if old != tarball:
                old.unlink(missing_ok=True)  # an older recipe's: only the current one is kept
    finally:
        shutil.rmtree(root, ignore_errors=True)
        tarball.with_name(tarball.name + ".part").unlink(missing_ok=True)
    return tarball


def _step(title: str, argv: list[str], out: Any, log: Path, kind: ImageKind) -> None:
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
        raise EnvironmentMissing(f"{argv[0]} failed (exit {cp.returncode}) while making {kind.repository}; "
                                 f"log: {log}", hint="check that the Debian mirror in the apt sources is reachable")
    ui.detail(f"  {time.monotonic() - t0:.1f}s")


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


def import_rootfs(client: Any, tarball: Path, rec: Recipe) -> None:
    ui.info(f"importing {tarball.name} ({human_size(tarball.stat().st_size)}) as {rec.image}")
    changes = [f"LABEL {RECIPE_LABEL}={rec.hash}", f'LABEL org.opencontainers.image.title="{rec.kind.title}"',
               "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]']
    ui.command(["docker", "import", *[a for c in changes for a in ("--change", c)], str(tarball), rec.image])
    api = client.api
    saved, api.timeout = api.timeout, 900  # a gigabyte goes through the API in one request
    try:
        api.import_image_from_file(str(tarball), repository=rec.kind.repository, tag=rec.tag, changes=changes)
    finally:
        api.timeout = saved
