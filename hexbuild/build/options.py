"""What a build is asked to do: ``BuildOptions`` (from settings and flags) and the checks of
single values that need no checkout."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError

OSES = ("android", "linux")
BUILD_TYPES = {"release": "Release", "debug": "Debug", "relwithdebinfo": "RelWithDebInfo"}
DEFAULT_DIRS = {"android": ("build-snapdragon", "pkg-snapdragon/llama.cpp"),
                "linux": ("build-snapdragon-linux", "pkg-snapdragon-linux/llama.cpp")}
# vendor: the image the checkout pins (NDK, Hexagon SDK); open: `hexbuild toolchain open`
# (Debian's clang, Linux only, no NPU libraries).
TOOLCHAINS = ("vendor", "open")
# Variables hexbuild sets in the container; passthrough may not replace them.
RESERVED_ENV = ("HOME", "CCACHE_DIR", "CMAKE_BUILD_PARALLEL_LEVEL")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
_TARGET = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._\-/:]*[a-z0-9_\-]?(?::[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?"
                    r"(?:@sha256:[0-9a-f]{64})?$")


@dataclass
class BuildOptions:
    source: Path
    os: str = "android"
    build_type: str = "release"
    preset: str = ""
    build_dir: str = ""
    install_dir: str = ""
    jobs: int = 0
    htp: list[str] = field(default_factory=list)
    cmake_args: list[str] = field(default_factory=list)
    engine: str = "docker"
    image: str = ""
    pull: str = "missing"
    user: str = ""
    env_passthrough: list[str] = field(default_factory=list)
    cache_volume: str = "hexbuild-ccache"
    keep_container: bool = False
    transfer: str = "auto"
    toolchain: str = "vendor"
    targets: list[str] = field(default_factory=list)  # CMake targets (--build-target); [] = the default
    force: bool = False  # --force: build even when nothing changed since the last build

    @classmethod
    def from_settings(cls, s: Any) -> "BuildOptions":
        return cls(source=Path(s["source"]).expanduser(), os=s["build.os"], build_type=s["build.build_type"],
                   preset=s["build.preset"], build_dir=s["build.build_dir"], install_dir=s["build.install_dir"],
                   jobs=s["build.jobs"], htp=list(s["build.htp"]), cmake_args=list(s["build.cmake_args"]),
                   engine=s["build.engine"], image=s["build.image"], pull=s["build.pull"], user=s["build.user"],
                   env_passthrough=list(s["build.env_passthrough"]), cache_volume=s["build.cache_volume"],
                   keep_container=bool(s["build.keep_container"]), transfer=s["build.transfer"],
                   toolchain=s["build.toolchain"], targets=parse_targets(s["build.build_targets"]))


def parse_targets(values: list[str]) -> list[str]:
    """``["a,b", "c", "a"]`` → ``["a", "b", "c"]`` (order kept); UsageError for what is not a
    CMake target name."""
    out: list[str] = []
    for value in values:
        for item in str(value).split(","):
            item = item.strip()
            if not item:
                continue
            if not _TARGET.match(item):
                raise UsageError(f"--build-target {item!r} is not a CMake target name")
            if item not in out:
                out.append(item)
    return out


def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")



def _passthrough(names: list[str], env: Any = os.environ) -> tuple[dict[str, str], list[str]]:
    """``NAME`` (the host's value, if set) or ``NAME=VALUE``; returns (values, names not set)."""
    out: dict[str, str] = {}
    unset: list[str] = []
    for item in names:
        name, sep, value = item.partition("=")
        if not _ENV_NAME.match(name):
            raise UsageError(f"build.env_passthrough: {item!r} is not NAME or NAME=VALUE")
        if name in RESERVED_ENV:
            raise UsageError(f"build.env_passthrough: {name} is set by hexbuild and cannot be passed through")
        if sep:
            out[name] = value
        elif name in env:
            out[name] = env[name]
        else:
            unset.append(name)
    return out, unset

