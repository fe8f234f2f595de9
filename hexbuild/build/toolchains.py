"""What differs between the two toolchains a build can use; everything else is one code path.

- ``vendor``: the image the checkout pins for the OS (the NDK and the Hexagon SDK), every HTP
  version the revision builds, all CMake targets unless ``--build-target`` names some.
- ``open``: ``hexbuild toolchain open``'s image (Debian's clang 19), Linux only, the revision's
  own ``arm64-linux-snapdragon-*`` preset with the Hexagon backend off (no SDK), plus what
  Debian's clang needs for the preset's ``-flto`` (lld, llvm-ar/ranlib), curl/OpenSSL off where
  the tree has those options, and by default only the programs hexbuild runs. The package has
  no NPU libraries: its manifest says so (``lacks``) and it runs on the CPU only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .options import _IMAGE, BuildOptions

# The programs hexbuild runs (run completion|cli|bench|server, perplexity) and the backend test.
DEFAULT_OPEN_TARGETS = ("llama-completion", "llama-cli", "llama-bench", "llama-perplexity", "test-backend-ops",
                        "llama-server")
OPEN_DIRS = ("build-open-linux", "pkg-open-linux/llama.cpp")
# What an open package lacks, in the manifest's words.
OPEN_LACKS = ("htp",)
_OPTION = re.compile(r"^\s*option\s*\(\s*([A-Za-z0-9_]+)", re.MULTILINE)


@dataclass
class ToolchainChoice:
    name: str                     # vendor | open
    image: str | None
    image_source: str | None
    image_pinned: str | None
    cmake_args: list[str] = field(default_factory=list)  # before the user's --cmake-arg
    targets: list[str] = field(default_factory=list)     # [] = all
    targets_source: str = "all"   # all | --build-target | default
    npu: bool = True              # builds the NPU libraries
    lacks: list[str] = field(default_factory=list)


def choose(options: BuildOptions, facts: Any, root: Path) -> ToolchainChoice:
    if options.toolchain == "open":
        return _open(options, root)
    image = image_source = image_pinned = None
    if options.engine == "docker":
        image_pinned = (facts.images or {}).get(options.os)
        if options.image:
            image, image_source = options.image, "--image"
        elif image_pinned:
            image, image_source = image_pinned, (facts.image_sources or {}).get(options.os) or "the checkout"
        else:
            raise UsageError(f"the checkout pins no toolchain image for {options.os}",
                             hint="pass --image with the toolchain image to use (or set build.image), "
                                  "or --toolchain open for a Linux build without the NPU libraries")
        _check_image(image)
    return ToolchainChoice("vendor", image, image_source, image_pinned, targets=list(options.targets),
                           targets_source="--build-target" if options.targets else "all",
                           cmake_args=tests_args(root, options.targets))


def tests_args(root: Path, targets: list[str]) -> list[str]:
    """A test program asked for by name (test-backend-ops) is built and installed: the tree's
    presets leave its tests off."""
    if not any(t.startswith("test-") for t in targets):
        return []
    args = ["-DLLAMA_BUILD_TESTS=ON"]
    if "LLAMA_TESTS_INSTALL" in cmake_options(root):
        args.append("-DLLAMA_TESTS_INSTALL=ON")
    return args


def _open(options: BuildOptions, root: Path) -> ToolchainChoice:
    from ..toolchain import open_image

    if options.os != "linux":
        raise UsageError(f"--toolchain open builds Linux programs only, not {options.os}",
                         hint="use --os linux, or the vendor toolchain (the NDK and the Hexagon SDK) for Android")
    if options.htp:
        raise UsageError("--htp: the open toolchain builds no NPU libraries (the Hexagon backend is off)",
                         hint="drop --htp, or use --toolchain vendor")
    image = image_source = None
    if options.engine == "docker":
        image, image_source = (options.image, "--image") if options.image else \
            (open_image.image_ref(), "hexbuild toolchain open")
        _check_image(image)
    tree_options = cmake_options(root)
    if options.targets:
        targets, source = list(options.targets), "--build-target"
    else:
        targets, source = [t for t in DEFAULT_OPEN_TARGETS if tree_has_target(root, t)], "default"
    args = ["-DGGML_HEXAGON=OFF", *open_image.CMAKE_ARGS]
    args += [f"-D{name}=OFF" for name in ("LLAMA_CURL", "LLAMA_OPENSSL") if name in tree_options]
    args += tests_args(root, targets)
    return ToolchainChoice("open", image, image_source, None, cmake_args=args, targets=targets,
                           targets_source=source, npu=False, lacks=list(OPEN_LACKS))


def _check_image(image: str) -> None:
    if not _IMAGE.match(image):
        raise UsageError(f"--image {image!r} is not an image reference (NAME[:TAG][@sha256:DIGEST])")


def cmake_options(root: Path) -> set[str]:
    """The ``option(NAME ...)`` names of the tree's top-level CMakeLists.txt."""
    try:
        return set(_OPTION.findall((root / "CMakeLists.txt").read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return set()


def tree_has_target(root: Path, name: str) -> bool:
    """Whether the tree defines the default target ``name`` (a revision without it is built
    without it, rather than failing on `ninja: unknown target`): named in a CMakeLists.txt under
    tools/, examples/ or tests/, or a tests/<name>.cpp that llama_build_and_test turns into one."""
    if (root / "tests" / f"{name}.cpp").is_file():
        return True
    word = re.compile(rf"(?<![A-Za-z0-9_.-]){re.escape(name)}(?![A-Za-z0-9_.-])")
    for sub in ("tools", "examples"):
        for f in (root / sub).rglob("CMakeLists.txt"):
            try:
                if word.search(f.read_text(encoding="utf-8", errors="replace")):
                    return True
            except OSError:
                continue
    return False
