"""The build plan: everything a build will do, decided from the options and the checkout,
without side effects (``--dry-run`` needs nothing else)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..toolchain import commands as cmds
from ..toolchain.presets import PresetsPlan, plan_presets
from .options import _USER, BUILD_TYPES, DEFAULT_DIRS, OSES, TOOLCHAINS, BuildOptions, _check_choice, _passthrough
from .toolchains import OPEN_DIRS, ToolchainChoice, choose


@dataclass
class BuildPlan:
    options: BuildOptions
    facts: Any                      # hexbuild.source.SourceFacts
    root: Path
    os: str
    build_type: str
    preset: str
    preset_source: str              # "revision" | "--preset"
    cmake_build_type: str | None    # -DCMAKE_BUILD_TYPE=... added to the configure step
    build_dir: str                  # relative to the checkout
    install_dir: str
    htp_versions: list[str]
    htp_all: list[str]
    reset_selection: bool
    image: str | None
    image_source: str | None
    image_pinned: str | None
    presets: PresetsPlan
    jobs: int
    toolchain: ToolchainChoice
    reset_targets: bool = False

    @property
    def targets(self) -> list[str]:
        """The CMake targets to build and install; [] for all."""
        return self.toolchain.targets

    @property
    def build_targets(self) -> list[str]:
        """What `cmake --build --target` gets: the targets, plus the revision's NPU library
        targets (``htp-vNN``, ExternalProjects that only `all` builds), which its
        install(FILES ...) of the skels needs."""
        if not self.targets or not self.toolchain.npu:
            return self.targets
        return [*self.targets, *(f"htp-{v}" for v in self.htp_versions if f"htp-{v}" not in self.targets)]

    @property
    def htp_subset(self) -> list[str] | None:
        return self.htp_versions if self.htp_versions != self.htp_all else None

    @property
    def package(self) -> Path:
        return self.root / self.install_dir

    @property
    def build_path(self) -> Path:
        return self.root / self.build_dir

    @property
    def log_path(self) -> Path:
        return self.build_path / cmds.LOG_NAME

    def commands(self, root: str, *, copy: bool = False) -> list[list[str]]:
        """The configure, build and install commands, run from ``root`` (the checkout as the
        engine sees it). In copy mode the build directory's cache is not visible from here, so
        an earlier HTP or target selection is always reset."""
        reset = self.reset_selection or (copy and self.htp_subset is None)
        reset_targets = self.reset_targets or (copy and not self.targets)
        out = [cmds.configure_argv(preset=self.preset, build_dir=self.build_dir, root=root, htp_subset=self.htp_subset,
                                   reset_selection=reset, build_type=self.cmake_build_type,
                                   cmake_args=[*self.toolchain.cmake_args, *self.options.cmake_args],
                                   targets=self.targets, reset_targets=reset_targets),
               cmds.build_argv(self.build_dir, self.build_targets),
               cmds.install_argv(self.build_dir, self.install_dir)]
        if self.targets:
            out.append(cmds.collect_argv(self.build_dir, self.install_dir, self.targets))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.root), "revision": self.facts.revision, "os": self.os,
                "build_type": self.build_type, "preset": self.preset, "preset_source": self.preset_source,
                "build_dir": self.build_dir, "install_dir": self.install_dir, "package": str(self.package),
                "log": str(self.log_path), "htp_versions": self.htp_versions, "htp_all": self.htp_all,
                "image": self.image, "image_source": self.image_source, "pull": self.options.pull,
                "presets": self.presets.to_json(), "jobs": self.jobs, "engine": self.options.engine,
                "toolchain": self.toolchain.name, "build_targets": self.targets,
                "build_targets_source": self.toolchain.targets_source,
                "toolchain_cmake_args": self.toolchain.cmake_args, "lacks": self.toolchain.lacks}


def plan_build(options: BuildOptions) -> BuildPlan:
    """Everything the build will do, decided from the options and the checkout. No side effects."""
    from ..artifacts.elf import parse_htp_versions
    from ..source import read_source

    _check_choice("--os", options.os, OSES)
    _check_choice("--build-type", options.build_type, tuple(BUILD_TYPES))
    _check_choice("--engine", options.engine, ("docker", "local"))
    _check_choice("--pull", options.pull, ("missing", "always", "never"))
    _check_choice("--transfer", options.transfer, ("auto", "mount", "copy"))
    _check_choice("--toolchain", options.toolchain, TOOLCHAINS)
    facts = read_source(options.source)
    root = Path(facts.path)
    if not facts.hexagon:
        raise UsageError(f"{root} has no ggml/src/ggml-hexagon: this revision predates the Hexagon backend",
                         hint="update the checkout (the backend arrived in October 2025)")

    preset, preset_source, cmake_build_type, build_type = _preset(facts, options)
    build_dir, install_dir = _dirs(root, facts, options)
    toolchain = choose(options, facts, root)

    htp_all = list(facts.htp_versions) if toolchain.npu else []
    if options.htp:
        wanted = parse_htp_versions(options.htp)
        unknown = [v for v in wanted if v not in htp_all]
        if unknown:
            raise UsageError(f"--htp {', '.join(unknown)}: not an HTP version this revision builds "
                             f"(it builds {', '.join(htp_all) or 'none that hexbuild could find'})")
        htp_versions = wanted
        if any("CMAKE_PROJECT_ggml_INCLUDE" in a for a in options.cmake_args) and wanted != htp_all:
            raise UsageError("--htp with fewer versions uses CMAKE_PROJECT_ggml_INCLUDE, which --cmake-arg also sets")
    else:
        htp_versions = htp_all

    if options.user and not _USER.match(options.user):
        raise UsageError(f"--user {options.user!r}: expected UID[:GID] (or NAME[:GROUP])")
    _passthrough(options.env_passthrough)  # validate early, also for --dry-run

    plan = BuildPlan(options=options, facts=facts, root=root, os=options.os, build_type=build_type, preset=preset,
                     preset_source=preset_source, cmake_build_type=cmake_build_type, build_dir=build_dir,
                     install_dir=install_dir, htp_versions=htp_versions, htp_all=htp_all, reset_selection=False,
                     image=toolchain.image, image_source=toolchain.image_source, image_pinned=toolchain.image_pinned,
                     presets=plan_presets(root, facts.presets_file, preset), jobs=options.jobs or (os.cpu_count() or 1),
                     toolchain=toolchain)
    if toolchain.targets and any("CMAKE_PROJECT_INCLUDE=" in a for a in options.cmake_args):
        raise UsageError("--build-target uses CMAKE_PROJECT_INCLUDE, which --cmake-arg also sets")
    plan.reset_selection = plan.htp_subset is None and cmds.cache_has_selection(plan.build_path)
    plan.reset_targets = not plan.targets and cmds.cache_has_selection(plan.build_path, cmds.TARGETS_VARS[1:])
    return plan



def _preset(facts: Any, options: BuildOptions) -> tuple[str, str, str | None, str]:
    if options.preset:
        m = re.search(r"-(release|debug|relwithdebinfo)$", options.preset)
        return options.preset, "--preset", None, m.group(1) if m else options.build_type
    preset = facts.preset_for(options.os, options.build_type)
    if preset is None:
        have = ", ".join(p for p in facts.presets if "snapdragon" in p) or "none"
        raise UsageError(f"this revision has no Snapdragon preset for {options.os} ({options.build_type}); "
                         f"its presets: {have}", hint="pass --preset NAME, or another --os")
    extra = None
    if options.build_type == "relwithdebinfo" and not preset.endswith("-relwithdebinfo"):
        extra = BUILD_TYPES["relwithdebinfo"]
    return preset, "revision", extra, options.build_type


def _dirs(root: Path, facts: Any, options: BuildOptions) -> tuple[str, str]:
    conv = (facts.conventions or {}).get(options.os)
    build_dir, install_dir = (conv["build_dir"], conv["install_dir"]) if conv else DEFAULT_DIRS[options.os]
    if options.toolchain == "open":  # never sharing a CMake cache or a package with a vendor build
        build_dir, install_dir = OPEN_DIRS
    elif options.os == "linux":
        android = (facts.conventions or {}).get("android")
        a_build, a_install = (android["build_dir"], android["install_dir"]) if android else DEFAULT_DIRS["android"]
        if build_dir == a_build:
            build_dir = f"{build_dir}-linux"
        if install_dir == a_install:
            install_dir = DEFAULT_DIRS["linux"][1]
    build_dir = _inside(root, options.build_dir or build_dir, "--build-dir")
    install_dir = _inside(root, options.install_dir or install_dir, "--install-dir")
    b, i = root / build_dir, root / install_dir
    if b == i or b in i.parents or i in b.parents:
        raise UsageError(f"--build-dir {build_dir} and --install-dir {install_dir} must not contain each other")
    return build_dir, install_dir


def _inside(root: Path, value: str, flag: str) -> str:
    """A directory under the checkout (the only thing mounted into the container), relative."""
    p = Path(value).expanduser()
    full = (p if p.is_absolute() else root / p).resolve()
    try:
        rel = full.relative_to(root)
    except ValueError:
        raise UsageError(f"{flag} {value}: must be inside the checkout {root} (only the checkout is mounted "
                         "into the build container)") from None
    if str(rel) in ("", "."):
        raise UsageError(f"{flag} {value}: must be a directory below the checkout, not the checkout itself")
    return rel.as_posix()

