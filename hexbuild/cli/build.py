"""hexbuild build: the Snapdragon build in the checkout's toolchain image."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common


# The build's options, written once: `release` builds through the same settings (build.*), so it
# takes these very options (tests/test_release.py holds the two commands to it).
SOURCE = typer.Option(None, "--source", "-s", help="The llama.cpp checkout (default: current directory).")
BUILD_TYPE = typer.Option(None, "--build-type", help="release, debug or relwithdebinfo.")
PRESET = typer.Option(None, "--preset", help="CMake configure preset (default: the revision's arm64-<os>-snapdragon-<type>).")
BUILD_DIR = typer.Option(None, "--build-dir", help="Build directory inside the checkout (default: the revision's, e.g. build-snapdragon).")
INSTALL_DIR = typer.Option(None, "--install-dir", help="Install prefix inside the checkout (default: the revision's, e.g. pkg-snapdragon/llama.cpp).")
JOBS = typer.Option(None, "--jobs", "-j", help="Parallel compile jobs (default: all cores).")
HTP = typer.Option(None, "--htp", help="NPU library versions to build, e.g. v73,v79 (default: every version the revision builds).")
CMAKE_ARG = typer.Option(None, "--cmake-arg", help="Extra argument for cmake configure (repeatable), e.g. --cmake-arg=-DGGML_OPENCL=ON.")
ENGINE = typer.Option(None, "--engine", help="docker (the toolchain image) or local (this machine or container).")
IMAGE = typer.Option(None, "--image", help="Toolchain image (default: the one the checkout pins; NAME:TAG or NAME@sha256:...).")
PULL = typer.Option(None, "--pull", help="Image pull policy: missing, always or never.")
USER = typer.Option(None, "--user", help="UID:GID inside the container (default: yours; root on a rootless engine).")
TRANSFER = typer.Option(None, "--transfer", help="How the checkout reaches the container: mount, copy (Docker API; remote engines) or auto.")
KEEP_CONTAINER = typer.Option(None, "--keep-container/--no-keep-container", help="Keep the build container afterwards, for docker exec.")
TOOLCHAIN = typer.Option(None, "--toolchain", metavar="vendor|open",
                         help="vendor (the image the checkout pins; default) or open (hexbuild toolchain open: Debian's clang, --os linux, no NPU libraries).")
BUILD_TARGET = typer.Option(None, "--build-target", metavar="NAME",
                            help="Build and install only this CMake target (repeatable or comma-separated; default: all, or with --toolchain open the programs hexbuild runs).")
CACHE_VOLUME = typer.Option(None, "--cache-volume", metavar="NAME|DIR",
                            help="Compiler cache: a named volume (default hexbuild-ccache) or an absolute directory.")
FORCE = typer.Option(False, "--force", help="Build even when nothing changed since the last build (the checkout, the options, the image).")


def build_settings(*, source=None, os_name=None, build_type=None, preset=None, build_dir=None, install_dir=None,
                   jobs=None, htp=None, cmake_arg=None, engine=None, image=None, pull=None, user=None, transfer=None,
                   keep_container=None, toolchain=None, build_target=None, cache_volume=None) -> dict:
    """The build flags as the settings they set (None: not given)."""
    return {"source": source, "build.os": os_name, "build.build_type": build_type, "build.preset": preset,
            "build.build_dir": build_dir, "build.install_dir": install_dir, "build.jobs": jobs,
            "build.htp": htp or None, "build.cmake_args": cmake_arg or None, "build.engine": engine,
            "build.image": image, "build.pull": pull, "build.user": user, "build.keep_container": keep_container,
            "build.transfer": transfer, "build.toolchain": toolchain, "build.build_targets": build_target or None,
            "build.cache_volume": cache_volume}


def build(
    source: Optional[str] = SOURCE,
    os_name: Optional[str] = typer.Option(None, "--os", help="Target OS: android or linux."),
    build_type: Optional[str] = BUILD_TYPE,
    preset: Optional[str] = PRESET,
    build_dir: Optional[str] = BUILD_DIR,
    install_dir: Optional[str] = INSTALL_DIR,
    jobs: Optional[int] = JOBS,
    htp: Optional[List[str]] = HTP,
    cmake_arg: Optional[List[str]] = CMAKE_ARG,
    engine: Optional[str] = ENGINE,
    image: Optional[str] = IMAGE,
    pull: Optional[str] = PULL,
    user: Optional[str] = USER,
    transfer: Optional[str] = TRANSFER,
    keep_container: Optional[bool] = KEEP_CONTAINER,
    toolchain: Optional[str] = TOOLCHAIN,
    build_target: Optional[List[str]] = BUILD_TARGET,
    cache_volume: Optional[str] = CACHE_VOLUME,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, the container spec and the docker run line; run nothing."),
    force: bool = FORCE,
) -> None:
    """Build llama.cpp's Hexagon backend and install a verified package with its manifest."""
    from ..build import BuildOptions, dry_run as plan_only, run_build
    from ..ui import ui

    s = common.settings(**build_settings(
        source=source, os_name=os_name, build_type=build_type, preset=preset, build_dir=build_dir,
        install_dir=install_dir, jobs=jobs, htp=htp, cmake_arg=cmake_arg, engine=engine, image=image, pull=pull,
        user=user, transfer=transfer, keep_container=keep_container, toolchain=toolchain,
        build_target=build_target, cache_volume=cache_volume))
    options = BuildOptions.from_settings(s)
    options.force = force
    if dry_run:
        data = plan_only(options)
        ui.result(data, _dry_run_text(data))
        return
    result = run_build(options)
    data = result.to_json()
    v = result.verify
    image_text = f"\nimage:    {result.image} ({result.digest})" if result.image else ""
    htp = " ".join(result.htp_versions) if result.toolchain == "vendor" else \
        "none (open toolchain: runs on the CPU only)"
    targets = f"\ntargets:  {' '.join(result.build_targets)}" if result.build_targets else ""
    done = "up to date (nothing changed; --force builds anyway):" if result.status == "up-to-date" else "built"
    human = (f"{done} {result.package}\n"
             f"os:       {result.os} ({result.build_type}, preset {result.preset}, {result.toolchain} toolchain)\n"
             f"HTP:      {htp}{image_text}{targets}\n"
             f"verify:   {len(v.get('checks', []))} checks, {v.get('failures', 0)} failed, {v.get('warnings', 0)} warnings\n"
             f"log:      {result.log}\n"
             f"time:     {result.duration_s:.1f}s")
    ui.result(data, human)


def _dry_run_text(data: dict) -> str:
    import shlex

    htp = f"HTP {' '.join(data['htp_versions'])}" if data["toolchain"] == "vendor" else "open toolchain, no NPU libraries"
    lines = [f"# {data['os']} {data['build_type']} build of {data['source']} (preset {data['preset']}, {htp})",
             f"# CMakeUserPresets.json: {data['presets']['note']}"]
    if "container" in data:
        lines.append(f"# image {data['image']} (from {data['image_source']}, pull {data['pull']})")
        lines.append(data["container"]["docker_run"])
    else:
        lines += [shlex.join(c) for c in data["commands"]]
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command("build")(build)
