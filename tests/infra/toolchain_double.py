"""hexbuild's toolchain double: builds docker/Dockerfile.toolchain-fixture on a Docker engine.

The double stands in for the vendor's Snapdragon toolchain images (``arm64-android`` and
``arm64-linux``) with real compilers: hexbuild's open AArch64 Linux toolchain image as the base
(made by hexbuild's own code from the cached root filesystem), LLVM 21 for Hexagon as a
self-contained tree (tests/infra/hexagon_tools.py, imported as an image of its own and copied
into the SDK), and the SDK stand-in of docker/toolchain-fixture/. Everything is local: the build
runs with no network.

The SDK's headers (FastRPC, HAP, AEE, QuRT, the target's C library) are hexbuild's own,
hexbuild/dsp/include, which its DSP runtime and kernel check compile against: one copy. They
reach the double through ``fixture_tree``, which lays out docker/toolchain-fixture/ with each
header where the vendor's SDK keeps it (``header_places``); the image is built from a context
assembled that way (``build_context``), and ``local_sdk`` lays out the same tree. A header the
double must have otherwise is kept in docker/toolchain-fixture/ at its place, with why in its
first comment: the fixture's file wins.

Used by the ``toolchain_images`` test fixture (tests/infra/docker_engine.py), by
scripts/toolchain-double.sh (``python -m tests.infra.toolchain_double``) and by the benchmarks.
The images are rebuilt only when an input changes: a label holds the hash of the build context
(the Dockerfile, docker/toolchain-fixture/ and the headers in their places), the base image's ID
and the tools tree's key.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.infra import hexagon_tools
from tests.infra.docker_engine import DOCKER_DIR, FIXTURE_DOCKERFILE, InfraError, cache_dir

TARGETS = ("arm64-android", "arm64-linux")
CONTEXT_LABEL = "hexbuild.test.context"
TOOLS_REPOSITORY = "hexbuild.test/hexagon-tools"
FIXTURE = DOCKER_DIR / "toolchain-fixture"
HEADERS = DOCKER_DIR.parent / "hexbuild" / "dsp" / "include"
# The target's C library headers (the Hexagon tools' target/hexagon/include); QuRT's are in qurt/,
# the rest are the SDK's own (incs/).
LIBC_HEADERS = frozenset({"assert.h", "inttypes.h", "math.h", "stddef.h", "stdio.h", "stdlib.h", "string.h",
                          "unistd.h"})


def header_places() -> dict[str, Path]:
    """{path under docker/toolchain-fixture/: the header of hexbuild/dsp/include that goes there}."""
    places = {}
    for src in sorted(HEADERS.rglob("*.h")):
        rel = src.relative_to(HEADERS)
        if rel.parts[0] == "qurt":
            places[f"hexagon-sdk/rtos/qurt/compute/include/{rel}"] = src
        elif str(rel) in LIBC_HEADERS:
            places[f"hexagon-tools/target/hexagon/include/{rel}"] = src
        else:
            places[f"hexagon-sdk/incs/{rel}"] = src
    return places


def fixture_tree(dest: Path) -> Path:
    """docker/toolchain-fixture/ laid out in ``dest`` with hexbuild's headers in their places (a
    header the fixture has itself is the double's own: it stays)."""
    shutil.copytree(FIXTURE, dest, symlinks=True)
    for rel, src in header_places().items():
        if not (dest / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def build_context(dest: Path) -> Path:
    """The double's Docker build context in ``dest`` (a context cannot reach outside its
    directory, and the headers live in hexbuild/): the Dockerfile and the fixture tree."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(DOCKER_DIR / FIXTURE_DOCKERFILE, dest / FIXTURE_DOCKERFILE)
    fixture_tree(dest / "toolchain-fixture")
    return dest


def context_hash(context: Path, base_id: str) -> str:
    """Content (and modes) of everything the double is built from: the build context, the base
    image and the tools tree."""
    h = hashlib.sha256()
    for p in sorted(context.rglob("*")):
        if p.is_symlink():
            h.update(str(p.relative_to(context)).encode() + b"\0->" + os.readlink(p).encode() + b"\0")
        elif p.is_file():
            h.update(str(p.relative_to(context)).encode() + b"\0")
            h.update(oct(p.stat().st_mode & 0o777).encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
    h.update(base_id.encode() + b"\0" + hexagon_tools.key().encode())
    return h.hexdigest()[:16]


def _label(client, ref: str) -> str | None:
    import docker.errors

    try:
        img = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    return (img.labels or {}).get(CONTEXT_LABEL, "")


def tools_image(client, cache: Path) -> str:
    """The Hexagon tools tree as an image (files only; the double copies them into its SDK)."""
    import docker.errors

    ref = f"{TOOLS_REPOSITORY}:{hexagon_tools.key()}"
    try:
        client.images.get(ref)
        return ref
    except docker.errors.ImageNotFound:
        pass
    tar = hexagon_tools.tools_tar(cache)
    if not tar.is_file():
        hexagon_tools.ensure(cache)
    api = client.api
    saved, api.timeout = api.timeout, 900
    try:
        api.import_image_from_file(str(tar), repository=TOOLS_REPOSITORY, tag=hexagon_tools.key())
    finally:
        api.timeout = saved
    return ref


def ensure(client, cache: Path | None = None, tags: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Build (or reuse) the double's images; ``tags`` maps a target (arm64-android, arm64-linux) to
    the references to tag it as. Returns {target: the first tag}."""
    import docker.errors

    from tests.infra.real_build import ensure_open_image_on

    cache = cache or cache_dir()
    base = ensure_open_image_on(client, cache)
    tools = tools_image(client, cache)
    out = {}
    with tempfile.TemporaryDirectory(prefix="hexbuild-double-") as tmp:
        context = build_context(Path(tmp))
        want = context_hash(context, client.images.get(base).id)
        for target in TARGETS:
            refs = (tags or {}).get(target) or []
            if not refs:
                continue
            if _label(client, refs[0]) != want:
                try:
                    client.images.build(path=str(context), dockerfile=FIXTURE_DOCKERFILE, target=target, tag=refs[0],
                                        buildargs={"BASE": base, "TOOLS": tools}, labels={CONTEXT_LABEL: want},
                                        network_mode="none", rm=True, forcerm=True, pull=False)
                except docker.errors.BuildError as e:
                    lines = [str(c.get("stream") or c.get("error") or "").rstrip() for c in e.build_log]
                    raise InfraError(f"building the toolchain double ({target}) failed: {e}\n"
                                     + "\n".join(x for x in lines if x)[-3000:]) from None
            img = client.images.get(refs[0])
            for ref in refs[1:]:
                repo, _, tag = ref.rpartition(":")
                if not repo or "/" in tag:
                    repo, tag = ref, "latest"
                img.tag(repo, tag)
            out[target] = refs[0]
    return out


def local_sdk(dest: Path, cache: Path | None = None) -> Path:
    """The double's Hexagon SDK laid out in ``dest`` on this machine, as the image has it (for
    ``--engine local``): the SDK stand-in, LLVM 21's tree (hard links into the test cache) with
    the vendor driver names over it, the QuRT version directories and the target files built by
    its clang. Returns HEXAGON_SDK_ROOT; HEXAGON_TOOLS_ROOT is tools/HEXAGON_Tools/21.1.8 below it."""
    tree = hexagon_tools.ensure(cache)
    tools = dest / "tools" / "HEXAGON_Tools" / "21.1.8" / "Tools"

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    with tempfile.TemporaryDirectory(prefix="hexbuild-double-") as tmp:
        fixture = fixture_tree(Path(tmp) / "toolchain-fixture")
        shutil.copytree(fixture / "hexagon-sdk", dest, symlinks=True)
        shutil.copytree(tree, tools, symlinks=True, copy_function=link, ignore=shutil.ignore_patterns(".complete"))
        shutil.copytree(fixture / "hexagon-tools", tools, symlinks=True, dirs_exist_ok=True)
    for v in ("v68", "v69", "v71", "v73", "v75", "v79"):
        (dest / "rtos" / "qurt" / f"compute{v}").symlink_to("compute")
    cp = subprocess.run([str(tools / "make-target-libs.sh")], capture_output=True, text=True)
    if cp.returncode != 0:
        raise InfraError(f"building the double's Hexagon target files failed: {cp.stderr[-2000:]}")
    return dest


def pinned_tags(source: Path) -> dict[str, list[str]]:
    """The images a checkout pins, per target (what `hexbuild source info` reports)."""
    cp = subprocess.run([sys.executable, "-m", "hexbuild", "source", "info", "--json", "--source", str(source)],
                        capture_output=True, text=True)
    if cp.returncode != 0:
        raise InfraError(f"hexbuild source info --source {source} failed: {cp.stderr.strip()[-500:]}")
    images = json.loads(cp.stdout).get("images") or {}
    tags: dict[str, list[str]] = {}
    for os_name, ref in images.items():
        target = {"android": "arm64-android", "linux": "arm64-linux"}.get(os_name)
        if target and ref and "@" not in ref:
            tags.setdefault(target, []).append(ref)
    if not tags:
        raise InfraError(f"{source} pins no toolchain image (hexbuild source info shows none)")
    return tags


def _main(argv: list[str]) -> int:
    import argparse

    import docker

    from tests.infra.docker_engine import ANDROID_IMAGE, LINUX_IMAGE

    ap = argparse.ArgumentParser(prog="scripts/toolchain-double.sh",
                                 description="Build hexbuild's toolchain double and tag it as the images a checkout "
                                             "pins (default: the test suite's tags), on the engine DOCKER_HOST names.")
    ap.add_argument("--source", type=Path, help="a llama.cpp checkout: tag the double as the images it pins")
    args = ap.parse_args(argv)
    tags = {"arm64-android": [ANDROID_IMAGE], "arm64-linux": [LINUX_IMAGE]}
    try:
        if args.source:
            for target, refs in pinned_tags(args.source).items():
                tags[target] = [*refs, *tags[target]]
        client = docker.from_env(timeout=900)
        made = ensure(client, tags=tags)
    except InfraError as e:
        print(f"toolchain-double: {e}", file=sys.stderr)
        return 3
    except docker.errors.DockerException as e:
        print(f"toolchain-double: cannot use the Docker engine: {e}", file=sys.stderr)
        return 3
    for target, refs in tags.items():
        print(f"{target}: {' '.join(refs)}")
    return 0 if made else 3


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
