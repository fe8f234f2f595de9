"""hexbuild build: the Snapdragon build in the checkout's toolchain image."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import common


def build(
    source: Optional[str] = typer.Option(None, "--source", "-s", help="The llama.cpp checkout (default: current directory)."),
    os_name: Optional[str] = typer.Option(None, "--os", help="Target OS: android or linux."),
    build_type: Optional[str] = typer.Option(None, "--build-type", help="release, debug or relwithdebinfo."),
    preset: Optional[str] = typer.Option(None, "--preset", help="CMake configure preset (default: the revision's arm64-<os>-snapdragon-<type>)."),
    build_dir: Optional[str] = typer.Option(None, "--build-dir", help="Build directory inside the checkout (default: the revision's, e.g. build-snapdragon)."),
    install_dir: Optional[str] = typer.Option(None, "--install-dir", help="Install prefix inside the checkout (default: the revision's, e.g. pkg-snapdragon/llama.cpp)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Parallel compile jobs (default: all cores)."),
    htp: Optional[List[str]] = typer.Option(None, "--htp", help="NPU library versions to build, e.g. v73,v79 (default: every version the revision builds)."),
    cmake_arg: Optional[List[str]] = typer.Option(None, "--cmake-arg", help="Extra argument for cmake configure (repeatable), e.g. --cmake-arg=-DGGML_OPENCL=ON."),
    engine: Optional[str] = typer.Option(None, "--engine", help="docker (the toolchain image) or local (this machine or container)."),
    image: Optional[str] = typer.Option(None, "--image", help="Toolchain image (default: the one the checkout pins; NAME:TAG or NAME@sha256:...)."),
    pull: Optional[str] = typer.Option(None, "--pull", help="Image pull policy: missing, always or never."),
    user: Optional[str] = typer.Option(None, "--user", help="UID:GID inside the container (default: yours; root on a rootless engine)."),
    transfer: Optional[str] = typer.Option(None, "--transfer", help="How the checkout reaches the container: mount, copy (Docker API; remote engines) or auto."),
    keep_container: Optional[bool] = typer.Option(None, "--keep-container/--no-keep-container", help="Keep the build container afterwards, for docker exec."),
    toolchain: Optional[str] = typer.Option(None, "--toolchain", metavar="vendor|open",
                                            help="vendor (the image the checkout pins; default) or open (hexbuild toolchain open: Debian's clang, --os linux, no NPU libraries)."),
    build_target: Optional[List[str]] = typer.Option(None, "--build-target", metavar="NAME",
                                                     help="Build and install only this CMake target (repeatable or comma-separated; default: all, or with --toolchain open the programs hexbuild runs)."),
    cache_volume: Optional[str] = typer.Option(None, "--cache-volume", metavar="NAME|DIR",
                                               help="Compiler cache: a named volume (default hexbuild-ccache) or an absolute directory."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, the container spec and the docker run line; run nothing."),
    force: bool = typer.Option(False, "--force", help="Build even when nothing changed since the last build (the checkout, the options, the image)."),
) -> None:
    """Build llama.cpp's Hexagon backend and install a verified package with its manifest."""
    from ..build import BuildOptions, dry_run as plan_only, run_build
    from ..ui import ui

    s = common.settings(**{
        "source": source, "build.os": os_name, "build.build_type": build_type, "build.preset": preset,
        "build.build_dir": build_dir, "build.install_dir": install_dir, "build.jobs": jobs,
        "build.htp": htp or None, "build.cmake_args": cmake_arg or None, "build.engine": engine,
        "build.image": image, "build.pull": pull, "build.user": user, "build.keep_container": keep_container,
        "build.transfer": transfer, "build.toolchain": toolchain, "build.build_targets": build_target or None,
        "build.cache_volume": cache_volume,
    })
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
