"""The virtual NPU's parts, made once into hexbuild's cache and kept outside any install:

- ``qemu-hexagon``: copied out of the kernel check's image (hexbuild's patched build, static);
- the DSP runtime (hexbuild/dsp/vnpu/ with hexbuild/dsp/runtime/): a static Hexagon program, built
  with that image's clang-21;
- the stand-in ``libcdsprpc.so`` (hexbuild/dsp/host/), for AArch64 (the qemu board's host library)
  and for x86-64 (``local:``), built in the open toolchain image (Debian bookworm: its glibc is
  no newer than the programs' own).

The cache key is the two images' ids and the sources' contents: a changed source or image makes
new parts, an unchanged one finds them again without an engine call beyond one image lookup.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentMissing
from ..paths import cache_root
from ..ui import ui

ARCHES = ("aarch64", "x86_64")


@dataclass(frozen=True)
class VnpuParts:
    root: Path

    @property
    def qemu(self) -> Path:
        return self.root / "qemu-hexagon"

    @property
    def runtime(self) -> Path:
        return self.root / "vnpu-runtime"

    def host_lib_dir(self, arch: str) -> Path:
        return self.root / arch

    def complete(self) -> bool:
        return self.qemu.is_file() and self.runtime.is_file() and all(
            (self.host_lib_dir(a) / "libcdsprpc.so").is_file() for a in ARCHES)


def dsp_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "dsp"


def sources_digest() -> str:
    h = hashlib.sha256()
    root = dsp_dir()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".c", ".h", ".sh", ".map", ".py"):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# What makes each image, for the line that says one is missing (the parts are made from them).
IMAGE_FIX = {"kernel": "hexbuild toolchain kernels (minutes, once: qemu-hexagon with hexbuild's HVX patches and "
                       "LLVM 21)",
             "open": "hexbuild toolchain open (minutes, once)"}


def _image_id(client, which: str, make: bool) -> str:
    """The id of the kernel check's image or the open toolchain's, imported from hexbuild's cached
    root filesystem when the engine lacks it; built only when ``make`` (a run does not build an
    image behind the user's back: its line names the command that does)."""
    from ..kernels import image as kimage
    from ..toolchain import open_image, recipe_image

    mod = kimage if which == "kernel" else open_image
    attrs = mod.find(client)
    if attrs is not None:
        return attrs["Id"]
    if make or recipe_image.rootfs_tarball(mod.recipe(), mod.cache_dir()).is_file():
        made = kimage.ensure_kernel_image(client) if which == "kernel" else open_image.ensure_open_image(client)
        return made.id
    what = "the kernel check's image" if which == "kernel" else "the open toolchain image"
    raise EnvironmentMissing(f"the virtual NPU's parts (qemu-hexagon, its DSP runtime, libcdsprpc.so) are not made, "
                             f"and {what} ({mod.image_ref()}) they are made from is not on the Docker engine",
                             hint=IMAGE_FIX[which])


def ensure_parts(*, client=None, make_images: bool = True) -> VnpuParts:
    """The parts for the current sources and images, made if missing (the images too, unless
    ``make_images`` is off: then a missing image is EnvironmentMissing naming the command)."""
    from ..toolchain.engine import DockerEngine

    engine = None
    if client is None:
        try:
            engine = DockerEngine.connect()
        except EnvironmentMissing as e:
            raise EnvironmentMissing(f"the virtual NPU's parts (qemu-hexagon, its DSP runtime, libcdsprpc.so) are "
                                     f"found and made with the Docker engine: {e.message}",
                                     hint="start the Docker engine (e.g. systemctl start docker) or point DOCKER_HOST "
                                          "at one: the parts are made once, into hexbuild's cache") from None
        client = engine.client
    try:
        kid, oid = _image_id(client, "kernel", make_images), _image_id(client, "open", make_images)
        key = hashlib.sha256(f"{kid}\0{oid}\0{sources_digest()}".encode()).hexdigest()[:16]
        parts = VnpuParts(cache_root() / "vnpu" / key)
        if parts.complete():
            return parts
        from ..kernels.image import QEMU_BIN, image_ref as kernel_ref
        from ..toolchain.open_image import image_ref as open_ref

        ui.info(f"making the virtual NPU's parts (qemu-hexagon, the DSP runtime, libcdsprpc.so) into {parts.root}")
        part = parts.root.with_name(parts.root.name + f".part-{secrets.token_hex(3)}")
        part.mkdir(parents=True)
        try:
            _run(client, kernel_ref(), part, [
                "sh", "-c", f"set -e; cp {QEMU_BIN} /out/qemu-hexagon; "
                + " ".join(_q(a) for a in _runtime_argv())])
            _run(client, open_ref(), part, [
                # Debian's cross layout (/usr/aarch64-linux-gnu) is found by clang's driver itself
                "env", "CC_X86_64=clang", "CC_AARCH64=clang --target=aarch64-linux-gnu -fuse-ld=lld",
                "sh", "/dsp/host/build.sh", "/out"])
            shutil.rmtree(parts.root, ignore_errors=True)
            part.rename(parts.root)
        finally:
            shutil.rmtree(part, ignore_errors=True)
        if not parts.complete():
            raise EnvironmentMissing(f"making the virtual NPU's parts left {parts.root} incomplete")
        return parts
    finally:
        if engine is not None:
            engine.close()


def _runtime_argv() -> list[str]:
    from ..dsp.build import vnpu_runtime_argv
    from ..kernels.image import CLANG

    return vnpu_runtime_argv("/out/vnpu-runtime", dsp="/dsp", clang=CLANG)


def _run(client, image: str, out: Path, command: list[str]) -> None:
    """One container: hexbuild/dsp read-only at /dsp, ``out`` at /out, no network, this user."""
    name = f"hexbuild-vnpu-{secrets.token_hex(4)}"
    ui.command(["docker", "run", "--rm", "--network", "none", "-v", f"{dsp_dir()}:/dsp:ro", "-v", f"{out}:/out",
                image, *command])
    c = client.containers.create(image, command, name=name, network_mode="none", working_dir="/out",
                                 user=f"{os.getuid()}:{os.getgid()}", environment={"HOME": "/tmp"},
                                 volumes={str(dsp_dir()): {"bind": "/dsp", "mode": "ro"},
                                          str(out): {"bind": "/out", "mode": "rw"}})
    try:
        c.start()
        rc = c.wait(timeout=900)["StatusCode"]
        log = c.logs().decode(errors="replace")
    finally:
        c.remove(force=True)
    if rc != 0:
        tail = "\n".join(log.strip().splitlines()[-8:])
        raise EnvironmentMissing(f"making the virtual NPU's parts failed in {image} (exit {rc}):\n{tail}",
                                 hint="a bug in hexbuild's DSP sources; rerun with -v for the command")


def _q(word: str) -> str:
    import shlex

    return shlex.quote(word)
