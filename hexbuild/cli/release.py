"""hexbuild release: build, verify, package, checksum, and optionally deploy and smoke-test."""

from __future__ import annotations

from typing import List, Optional

import typer

from . import build as b
from . import common


def release(
    source: Optional[str] = typer.Option(None, "--source", "-s", metavar="DIR",
                                         help="The llama.cpp checkout (default: current directory)."),
    os_names: Optional[List[str]] = typer.Option(None, "--os", metavar="android,linux",
                                                 help="OSes to build, comma-separated or repeated; a tarball each (default: build.os)."),
    dist: Optional[str] = typer.Option(None, "--dist", metavar="DIR",
                                       help="Where the assets and release-report.json go (default: release.dist_dir, dist)."),
    engine: Optional[str] = typer.Option(None, "--engine", metavar="docker|local",
                                         help="Build in the toolchain image (docker) or in this machine/container (local)."),
    image: Optional[str] = typer.Option(None, "--image", metavar="REF",
                                        help="Toolchain image (default: the one the checkout pins)."),
    htp: Optional[List[str]] = typer.Option(None, "--htp", metavar="v73,v79",
                                            help="HTP versions to build; verify requires them all."),
    build_type: Optional[str] = typer.Option(None, "--build-type", metavar="release|debug|relwithdebinfo",
                                             help="CMake build type."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=0, help="Parallel compile jobs (0: all cores)."),
    prebuilt: Optional[List[str]] = typer.Option(None, "--prebuilt", metavar="[OS=]PKG",
                                                 help="Release this install prefix instead of building (repeat per OS; "
                                                      "the OS comes from OS= or the package's manifest.json)."),
    target: Optional[List[str]] = typer.Option(None, "--target", "-t", metavar="TARGET",
                                               help="Deploy to this target after packaging (repeatable; default: deploy.targets)."),
    smoke: Optional[str] = typer.Option(None, "--smoke", metavar="COMMAND",
                                        help="Run this on every target after deploying, e.g. 'llama-cli --version'."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback",
                                            help="A smoke run whose HTP sessions did not open passes with a warning."),
    test: Optional[str] = typer.Option(None, "--test", metavar="ops,ppl",
                                       help="After deploying, run `hexbuild test` ops and/or ppl on every target."),
    test_model: Optional[str] = typer.Option(None, "--test-model", metavar="GGUF", help="The model `--test ppl` uses."),
    test_text: Optional[str] = typer.Option(None, "--test-text", metavar="FILE", help="The text `--test ppl` uses."),
    lab: Optional[str] = typer.Option(None, "--lab", metavar="URL",
                                      help="Run the --test gates as jobs on this LAVA lab's boards (Linux packages; lab.* settings)."),
    lab_device_type: Optional[str] = typer.Option(None, "--lab-device-type", metavar="TYPE",
                                                  help="The lab's device type for --lab (default: lab.device_type)."),
    lab_serve_artifacts: Optional[str] = typer.Option(None, "--lab-serve-artifacts", metavar="HOST:PORT",
                                                      help="Serve the lab jobs' tarball here (default: lab.serve_artifacts)."),
    strict: Optional[bool] = typer.Option(None, "--strict/--no-strict",
                                          help="Exit 10 when warnings were raised (default: on under CI=true)."),
    # the rest of build's options: the build stage takes every build.* setting (cli/build.py)
    preset: Optional[str] = b.PRESET,
    build_dir: Optional[str] = b.BUILD_DIR,
    install_dir: Optional[str] = b.INSTALL_DIR,
    cmake_arg: Optional[List[str]] = b.CMAKE_ARG,
    pull: Optional[str] = b.PULL,
    user: Optional[str] = b.USER,
    transfer: Optional[str] = b.TRANSFER,
    keep_container: Optional[bool] = b.KEEP_CONTAINER,
    toolchain: Optional[str] = b.TOOLCHAIN,
    build_target: Optional[List[str]] = b.BUILD_TARGET,
    cache_volume: Optional[str] = b.CACHE_VOLUME,
    force: bool = b.FORCE,
) -> None:
    """Build, verify, package and checksum; optionally deploy and smoke-test.

    Build → verify → package for each OS, write SHA256SUMS and manifest.json to dist/, then
    deploy and smoke-test on the targets. Every stage is reported in dist/release-report.json
    (also on failure) and, on GitHub Actions, in the job summary. Exit codes: build 4, verify 5,
    package 6, deploy 7, smoke 8 (12 when it fell back to the CPU), test 13, --strict warnings 10."""
    from ..errors import UsageError
    from ..release import ReleaseOptions, run_release

    flags = b.build_settings(source=source, build_type=build_type, preset=preset, build_dir=build_dir,
                             install_dir=install_dir, jobs=jobs, htp=htp, cmake_arg=cmake_arg, engine=engine,
                             image=image, pull=pull, user=user, transfer=transfer, keep_container=keep_container,
                             toolchain=toolchain, build_target=build_target, cache_volume=cache_volume)
    s = common.settings(**flags, **{"release.dist_dir": dist, "ci.strict": strict, "lab.url": lab,
                                    "lab.device_type": lab_device_type, "lab.serve_artifacts": lab_serve_artifacts})
    options = ReleaseOptions.from_settings(s, oses=os_names, targets=target, smoke=smoke, prebuilt=prebuilt)
    options.force = force
    options.allow_cpu_fallback = allow_cpu_fallback
    options.tests = [x.strip() for x in (test or "").split(",") if x.strip()]
    bad = [x for x in options.tests if x not in ("ops", "ppl")]
    if lab is not None:
        from ..lab.session import options as lab_options

        if "linux" not in options.oses:
            raise UsageError("--lab runs Linux packages on lab boards: add --os linux")
        if not s["lab.device_type"]:
            raise UsageError("--lab needs the boards' device type: --lab-device-type TYPE (or lab.device_type)")
        if not options.tests:
            raise UsageError("--lab runs the --test gates: add --test ops and/or ppl")
        options.lab = lab_options(s)
    if bad or (options.tests and not options.targets and options.lab is None):
        raise UsageError(f"--test {bad[0]}: valid: ops, ppl" if bad else
                         "--test runs on the deploy targets (or with --lab on lab boards), and none were given")
    if "ppl" in options.tests and not (test_model and test_text):
        raise UsageError("--test ppl needs --test-model GGUF and --test-text FILE")
    options.test_model, options.test_text = test_model, test_text
    run_release(s, options)


def register(app: typer.Typer) -> None:
    app.command("release")(release)
