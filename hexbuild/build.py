"""`hexbuild build`: the revision's Snapdragon build, run in its pinned toolchain image.

Plain functions, in the order a build goes:

- ``plan_build(options)`` reads the checkout (hexbuild.source) and decides everything without
  side effects: preset, build and install directories, HTP versions, image, the CMakeUserPresets
  handling and the CMake commands. ``dry_run`` and ``container_spec`` need no daemon.
- ``run_build(options)`` runs that plan on an engine (Docker through the SDK, or ``local``),
  streams the log to ``<build-dir>/hexbuild-build.log``, moves the finished install into place,
  verifies the package and writes its manifest. It prints progress but never the final
  result: the CLI (or the release command) renders the ``BuildResult``.

Defaults come from the checkout: the image it pins for the OS (docs, then CI), the preset
``arm64-<os>-snapdragon-<release|debug>`` (``relwithdebinfo``: the revision's own preset when it
has one, else the release preset with ``-DCMAKE_BUILD_TYPE=RelWithDebInfo``), and the build and
install directories its docs use. For Linux, when the docs give it the same build directory as
Android (as llama.cpp's do), hexbuild appends ``-linux`` so the two never share a CMake cache;
without Linux docs it uses ``build-snapdragon-linux`` and ``pkg-snapdragon-linux/llama.cpp``.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import BuildFailed, EnvironmentMissing, Interrupted, UsageError, VerifyFailed
from .toolchain import commands as cmds
from .toolchain.buildlog import BuildLog, diagnose
from .toolchain.presets import PresetsCopy, PresetsPlan, plan_presets
from .toolchain.spec import CACHE_DIR, WORKSPACE, ContainerSpec, Mount
from .ui import ui

OSES = ("android", "linux")
BUILD_TYPES = {"release": "Release", "debug": "Debug", "relwithdebinfo": "RelWithDebInfo"}
DEFAULT_DIRS = {"android": ("build-snapdragon", "pkg-snapdragon/llama.cpp"),
                "linux": ("build-snapdragon-linux", "pkg-snapdragon-linux/llama.cpp")}
# Variables hexbuild sets in the container; passthrough may not replace them.
RESERVED_ENV = ("HOME", "CCACHE_DIR", "CMAKE_BUILD_PARALLEL_LEVEL")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._\-/:]*[a-z0-9_\-]?(?::[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?"
                    r"(?:@sha256:[0-9a-f]{64})?$")
_VERSION_TAG = re.compile(r":v?(\d+)\.(\d+)(?:\.(\d+))?$")


# -- options -------------------------------------------------------------------------------------
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

    @classmethod
    def from_settings(cls, s: Any) -> "BuildOptions":
        return cls(source=Path(s["source"]).expanduser(), os=s["build.os"], build_type=s["build.build_type"],
                   preset=s["build.preset"], build_dir=s["build.build_dir"], install_dir=s["build.install_dir"],
                   jobs=s["build.jobs"], htp=list(s["build.htp"]), cmake_args=list(s["build.cmake_args"]),
                   engine=s["build.engine"], image=s["build.image"], pull=s["build.pull"], user=s["build.user"],
                   env_passthrough=list(s["build.env_passthrough"]), cache_volume=s["build.cache_volume"],
                   keep_container=bool(s["build.keep_container"]), transfer=s["build.transfer"])


# -- the plan ----------------------------------------------------------------------------------
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
        an earlier HTP selection is always reset."""
        reset = self.reset_selection or (copy and self.htp_subset is None)
        return [cmds.configure_argv(preset=self.preset, build_dir=self.build_dir, root=root, htp_subset=self.htp_subset,
                                    reset_selection=reset, build_type=self.cmake_build_type,
                                    cmake_args=self.options.cmake_args),
                cmds.build_argv(self.build_dir),
                cmds.install_argv(self.build_dir, self.install_dir)]

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.root), "revision": self.facts.revision, "os": self.os,
                "build_type": self.build_type, "preset": self.preset, "preset_source": self.preset_source,
                "build_dir": self.build_dir, "install_dir": self.install_dir, "package": str(self.package),
                "log": str(self.log_path), "htp_versions": self.htp_versions, "htp_all": self.htp_all,
                "image": self.image, "image_source": self.image_source, "pull": self.options.pull,
                "presets": self.presets.to_json(), "jobs": self.jobs, "engine": self.options.engine}


def plan_build(options: BuildOptions) -> BuildPlan:
    """Everything the build will do, decided from the options and the checkout. No side effects."""
    from .artifacts import parse_htp_versions
    from .source import read_source

    _check_choice("--os", options.os, OSES)
    _check_choice("--build-type", options.build_type, tuple(BUILD_TYPES))
    _check_choice("--engine", options.engine, ("docker", "local"))
    _check_choice("--pull", options.pull, ("missing", "always", "never"))
    _check_choice("--transfer", options.transfer, ("auto", "mount", "copy"))
    facts = read_source(options.source)
    root = Path(facts.path)
    if not facts.hexagon:
        raise UsageError(f"{root} has no ggml/src/ggml-hexagon: this revision predates the Hexagon backend",
                         hint="update the checkout (the backend arrived in October 2025)")

    preset, preset_source, cmake_build_type, build_type = _preset(facts, options)
    build_dir, install_dir = _dirs(root, facts, options)

    htp_all = list(facts.htp_versions)
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

    image = image_source = image_pinned = None
    if options.engine == "docker":
        image_pinned = (facts.images or {}).get(options.os)
        if options.image:
            image, image_source = options.image, "--image"
        elif image_pinned:
            image, image_source = image_pinned, (facts.image_sources or {}).get(options.os) or "the checkout"
        else:
            raise UsageError(f"the checkout pins no toolchain image for {options.os}",
                             hint="pass --image with the toolchain image to use (or set build.image)")
        if not _IMAGE.match(image):
            raise UsageError(f"--image {image!r} is not an image reference (NAME[:TAG][@sha256:DIGEST])")
    if options.user and not _USER.match(options.user):
        raise UsageError(f"--user {options.user!r}: expected UID[:GID] (or NAME[:GROUP])")
    _passthrough(options.env_passthrough)  # validate early, also for --dry-run

    plan = BuildPlan(options=options, facts=facts, root=root, os=options.os, build_type=build_type, preset=preset,
                     preset_source=preset_source, cmake_build_type=cmake_build_type, build_dir=build_dir,
                     install_dir=install_dir, htp_versions=htp_versions, htp_all=htp_all, reset_selection=False,
                     image=image, image_source=image_source, image_pinned=image_pinned,
                     presets=plan_presets(root, facts.presets_file, preset), jobs=options.jobs or (os.cpu_count() or 1))
    plan.reset_selection = plan.htp_subset is None and cmds.cache_has_selection(plan.build_path)
    return plan


def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")


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
    if options.os == "linux":
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


# -- the container ---------------------------------------------------------------------------------
def default_user(rootless: bool = False) -> str:
    """The invoking user, so files come back owned by them; root inside on a rootless engine,
    where root maps to the invoking user."""
    return "0:0" if rootless else f"{os.getuid()}:{os.getgid()}"


def resolve_transfer(requested: str, remote: bool) -> str:
    """mount for an engine on this machine, copy for a remote one (``auto``)."""
    return ("copy" if remote else "mount") if requested == "auto" else requested


def container_spec(plan: BuildPlan, *, name: str | None = None, user: str | None = None, jobs: int | None = None,
                   transfer: str = "mount", env: Any = os.environ) -> ContainerSpec:
    from .toolchain import transfer as xfer

    assert plan.image is not None
    passthrough, _ = _passthrough(plan.options.env_passthrough, env)
    copy = transfer == "copy"
    command = ["sh", "-c", cmds.script(plan.commands(WORKSPACE, copy=copy), keep_marker=plan.options.keep_container,
                                       prelude=xfer.unpack_lines(plan.build_dir) if copy else None)]
    workspace = Mount(xfer.volume_name(plan.root), WORKSPACE, type="volume") if copy else Mount(str(plan.root), WORKSPACE)
    return ContainerSpec(
        name=name or f"hexbuild-build-{secrets.token_hex(4)}",
        image=plan.image,
        command=command,
        user=user or plan.options.user or default_user(),
        mounts=[workspace, Mount(plan.options.cache_volume, CACHE_DIR, type="volume")],
        env={"HOME": "/tmp", "CCACHE_DIR": CACHE_DIR, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs or plan.jobs)},
        passthrough=passthrough,
    )


def local_command(plan: BuildPlan) -> list[str]:
    return ["sh", "-c", cmds.script(plan.commands(str(plan.root)))]


def dry_run(options: BuildOptions) -> dict[str, Any]:
    """What ``run_build`` would run, without a daemon and without touching the checkout."""
    plan = plan_build(options)
    out = {"dry_run": True, **plan.to_json(), "commands": plan.commands(WORKSPACE if options.engine == "docker"
                                                                        else str(plan.root))}
    if options.engine == "docker":
        from .toolchain.engine import docker_host, is_remote

        transfer = resolve_transfer(options.transfer, is_remote(docker_host()))
        spec = container_spec(plan, transfer=transfer)  # a fresh name, as every run gets
        out["transfer"] = transfer
        out["commands"] = plan.commands(WORKSPACE, copy=transfer == "copy")
        out["container"] = spec.to_json()
        out["note"] = ("the engine was not contacted: on a rootless engine the build runs as root inside "
                       "(which maps to you), and the image is pulled only if the engine lacks it")
        if transfer == "copy":
            out["note"] += ("; copy mode: the checkout is copied into the container before it starts (put_archive) "
                            "and the package out after it ends (get_archive), which a docker run line cannot show")
    else:
        out["command"] = local_command(plan)
    return out


# -- running it --------------------------------------------------------------------------------
@dataclass
class BuildResult:
    package: Path
    build_dir: Path
    log: Path
    os: str
    build_type: str
    preset: str
    htp_versions: list[str]
    image: str | None
    digest: str | None
    duration_s: float
    verify: dict[str, Any]
    engine: str
    container: str | None = None
    manifest: dict[str, Any] | None = None
    status: str = "ok"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "package": str(self.package), "build_dir": str(self.build_dir),
                "log": str(self.log), "image": self.image, "digest": self.digest, "preset": self.preset,
                "build_type": self.build_type, "os": self.os, "htp_versions": self.htp_versions,
                "duration_s": round(self.duration_s, 3), "verify": self.verify}


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end the build like Ctrl-C: the container is removed on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


# What deploy and run need to know about the revision inside a package, long after the checkout
# is gone: how it selects sessions, which knobs and tools it has, whose scripts it follows.
MANIFEST_FACTS = ("revision", "device_selection", "device_names", "env_vars", "tools", "scripts", "htp_versions",
                  "plan_rules")


def revision_facts(facts) -> dict:
    data = facts.to_json()
    return {k: data[k] for k in MANIFEST_FACTS}


def run_build(options: BuildOptions) -> BuildResult:
    start = time.monotonic()
    plan = plan_build(options)
    _, unset = _passthrough(options.env_passthrough)
    for name in unset:
        ui.detail(f"build.env_passthrough: {name} is not set here; not passed")
    with _terminate_as_interrupt():
        if options.engine == "docker":
            return _run_docker(plan, start)
        return _run_local(plan, start)


def _run_docker(plan: BuildPlan, start: float) -> BuildResult:
    from .toolchain import transfer as xfer
    from .toolchain.engine import DockerEngine

    opts = plan.options
    try:
        engine = DockerEngine.connect()
    except KeyboardInterrupt:
        raise Interrupted("interrupted") from None
    container: str | None = None
    archive: list[Path] = []
    try:
        transfer = resolve_transfer(opts.transfer, engine.info.remote)
        if transfer == "mount" and engine.info.remote:
            raise EnvironmentMissing(
                f"the Docker engine at {engine.info.host} is on another machine: it cannot mount this machine's "
                "checkout (build.transfer = mount)",
                hint="use --transfer copy (or auto), run hexbuild on the engine's machine, or run the build "
                     "inside the toolchain image with --engine local")
        image = engine.ensure_image(plan.image or "", opts.pull)
        user = opts.user or default_user(engine.info.rootless)
        spec = container_spec(plan, user=user, jobs=opts.jobs or engine.info.ncpu or plan.jobs, transfer=transfer)
        container = spec.name
        ui.command(spec.docker_run_argv(remove=not opts.keep_container))
        _hand_over(_prepare(plan), user)
        engine.ensure_volume(opts.cache_volume, spec.image)
        hooks: dict[str, Any] = {}
        if transfer == "copy":
            engine.ensure_volume(xfer.volume_name(plan.root), spec.image, purpose="source")
            uid, gid = _numeric_user(user)
            staging = f"{plan.install_dir}{cmds.STAGING_SUFFIX}"

            def before_start(api: Any, cid: str) -> None:
                include = [f"{plan.build_dir}/{cmds.HTP_SELECT_FILE}"] if plan.htp_subset else []
                archive.append(xfer.source_archive(plan.root, exclude=[plan.build_dir, plan.install_dir, staging],
                                                   include=include, uid=uid, gid=gid))
                xfer.copy_in(api, cid, archive[-1])

            def after_exit(api: Any, cid: str, rc: int) -> None:
                if rc == 0:
                    xfer.copy_out(api, cid, f"{WORKSPACE}/{staging}", (plan.root / staging).parent)

            hooks = {"before_start": before_start, "after_exit": after_exit}
        rc, log = _execute(plan, lambda lg: engine.run(spec, lg, keep=opts.keep_container, **hooks),
                           container=container)
        _hand_over([log.path], user)
    except KeyboardInterrupt:
        kept = f"; container {container} kept (--keep-container)" if opts.keep_container and container else \
            ("; the build container was removed" if container else "")
        raise Interrupted(f"interrupted{kept}") from None
    finally:
        engine.close()
        for a in archive:
            a.unlink(missing_ok=True)
    if opts.keep_container:
        ui.info(f"kept container {container}: docker start {container} && docker exec -it {container} bash "
                f"(remove it with docker rm -f {container})")
    if rc == cmds.NO_CHECKOUT_STATUS and "hexbuild: the checkout is not visible" in log.text():
        raise EnvironmentMissing(
            f"the checkout is not visible inside the build container: the Docker engine at {engine.info.host} "
            "does not share this machine's files (Docker-in-Docker or a remote engine)",
            hint="use --transfer copy, run hexbuild where the engine runs, or run inside the toolchain image "
                 "with --engine local")
    return _finish(plan, rc, log, start, image=image.reference, digest=image.digest, container=container)


def _numeric_user(user: str) -> tuple[int, int]:
    uid_s, _, gid_s = user.partition(":")
    uid = int(uid_s) if uid_s.isdigit() else 0
    return uid, int(gid_s) if gid_s.isdigit() else uid


def _run_local(plan: BuildPlan, start: float) -> BuildResult:
    from .toolchain.local import LocalEngine

    env = dict(os.environ)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(plan.jobs)
    env.update(_passthrough(plan.options.env_passthrough)[0])
    try:
        _prepare(plan)
        rc, log = _execute(plan, lambda lg: LocalEngine().run(local_command(plan), cwd=plan.root, env=env, log=lg))
    except KeyboardInterrupt:
        raise Interrupted("interrupted; the build was stopped") from None
    return _finish(plan, rc, log, start, image=None, digest=None, container=None)


def _prepare(plan: BuildPlan) -> list[Path]:
    """The build directory (and the HTP selection file), and no leftover staging install.
    Returns the directories and files created here, to hand over to the build user."""
    created: list[Path] = []
    try:
        missing = [p for p in [plan.build_path, *plan.build_path.parents] if not p.exists()]
        plan.build_path.mkdir(parents=True, exist_ok=True)
        created += sorted(missing)
        if plan.htp_subset:
            target = plan.build_path / cmds.HTP_SELECT_FILE
            tmp = target.with_name(target.name + ".part")
            tmp.write_text(cmds.HTP_SELECT_CMAKE, encoding="utf-8")
            tmp.chmod(0o644)
            os.replace(tmp, target)
        staging = Path(str(plan.package) + cmds.STAGING_SUFFIX)
        if staging.exists():
            shutil.rmtree(staging)
    except OSError as e:
        raise UsageError(f"cannot prepare {plan.build_dir}: {e.strerror or e}",
                         hint="the build or install directory belongs to another user: fix its ownership "
                              "or pass --build-dir/--install-dir") from None
    return created


def _execute(plan: BuildPlan, run: Any, *, container: str | None = None) -> tuple[int, BuildLog]:
    where = f" in {container}" if container else ""
    ui.info(f"building {plan.preset} ({plan.os}, HTP {' '.join(plan.htp_versions)}){where}")
    echo = ui.verbose > 0 or (ui.ci is not None and not ui.quiet)
    try:
        log = BuildLog(plan.log_path, title=f"build {plan.os}", echo=echo)
    except OSError as e:
        raise UsageError(f"cannot write {plan.log_path}: {e.strerror or e}",
                         hint="the build directory belongs to another user: fix its ownership or pass --build-dir") from None
    try:
        with PresetsCopy(plan.root, plan.presets), ui.group(f"build {plan.os}: {plan.preset}"), log:
            rc = run(log)
    finally:
        log.close()  # the log is kept whatever happened (renamed from its .part name)
    return rc, log


def _hand_over(paths: list[Path], user: str) -> None:
    """When hexbuild runs as root for another build user, what it created belongs to that user
    (the container writes into the build directory as that user)."""
    if os.geteuid() != 0:
        return
    if not user.partition(":")[0].isdigit():
        return
    uid, gid = _numeric_user(user)
    if uid == 0:
        return
    for p in paths:
        try:
            os.chown(p, uid, gid)
        except OSError:
            pass


def _finish(plan: BuildPlan, rc: int, log: BuildLog, start: float, *, image: str | None, digest: str | None,
            container: str | None) -> BuildResult:
    from .artifacts import verify_package, write_manifest

    if rc != 0:
        raise _failure(plan, rc, log, image)
    _publish(plan)
    report = verify_package(plan.package, os=plan.os, htp_versions=plan.htp_versions)
    for c in report.checks:
        if c.status == "warn":
            ui.warn(f"verify: {c.file}: {c.check}: {c.detail}")
    if not report.ok:
        first = report.failed()[0]
        more = f" (and {report.failures - 1} more)" if report.failures > 1 else ""
        for c in report.failed()[1:]:
            ui.error(f"verify: {c.file}: {c.check}: {c.detail}")
        raise VerifyFailed(f"the built package {plan.install_dir} fails verification: {first.file}: {first.check}: "
                           f"{first.detail}{more}", hint=f"hexbuild verify {plan.package} --os {plan.os} -v",
                           details={"verify": report.to_json()})
    meta = {"os": plan.os, "llama_cpp": revision_facts(plan.facts),
            "image": {"reference": image, "digest": digest}, "preset": plan.preset, "build_type": plan.build_type,
            "htp_versions": plan.htp_versions, "engine": plan.options.engine,
            "cmake_args": list(plan.options.cmake_args)}
    manifest = write_manifest(plan.package, meta)
    if plan.options.engine == "docker":
        _hand_over([plan.package / "manifest.json"], plan.options.user or default_user())
    duration = time.monotonic() - start
    ui.detail(f"build finished in {duration:.1f}s; log: {log.path}")
    return BuildResult(package=plan.package, build_dir=plan.build_path, log=log.path, os=plan.os,
                       build_type=plan.build_type, preset=plan.preset, htp_versions=plan.htp_versions, image=image,
                       digest=digest, duration_s=duration, verify=report.to_json(), engine=plan.options.engine,
                       container=container, manifest=manifest)


def _failure(plan: BuildPlan, rc: int, log: BuildLog, image: str | None) -> BuildFailed:
    text = log.text()
    step = "the build"
    for line in reversed(log.tail):
        m = re.match(r"^\+ cmake (--preset|--build|--install)\b", line)
        if m:
            step = {"--preset": "configure (cmake --preset)", "--build": "cmake --build",
                    "--install": "cmake --install"}[m.group(1)]
            break
    tail = log.last()
    if not ui.quiet:
        ui.info(f"last lines of {log.path}:")
        for line in tail:
            ui.info(f"  | {line}")
    rule = diagnose(text, image_older_than_pin=image_is_older(image, plan.image_pinned))
    hint = rule.hint if rule else f"the whole log is {log.path}"
    return BuildFailed(f"{step} failed (exit {rc}) for {plan.preset}; log: {log.path}", hint=hint,
                       details={"exit_code": rc, "log": str(log.path), "log_tail": tail,
                                "known_failure": rule.id if rule else None})


def image_is_older(used: str | None, pinned: str | None) -> bool:
    """True when ``used`` is the pinned image's repository at a lower vMAJOR.MINOR tag."""
    u, p = _repo_version(used), _repo_version(pinned)
    return bool(u and p and u[0] == p[0] and u[1] < p[1])


def _repo_version(ref: str | None) -> tuple[str, tuple[int, ...]] | None:
    if not ref:
        return None
    base = ref.split("@", 1)[0]
    m = _VERSION_TAG.search(base)
    if not m:
        return None
    return base[: m.start()].rsplit("/", 1)[-1], tuple(int(g or 0) for g in m.groups())


def _publish(plan: BuildPlan) -> None:
    """Move the finished install (<install-dir>.hexbuild-partial) into place, replacing the
    previous package as a whole."""
    final = plan.package
    staging = Path(str(final) + cmds.STAGING_SUFFIX)
    if not staging.is_dir():
        raise BuildFailed(f"the install step left nothing in {staging}",
                          hint="check that the preset enables GGML_HEXAGON and installs to the prefix")
    old = Path(str(final) + ".hexbuild-old")
    try:
        if old.exists():
            shutil.rmtree(old)
        if final.exists() or final.is_symlink():
            os.rename(final, old)
        os.rename(staging, final)
    except OSError as e:
        raise BuildFailed(f"cannot move the new package into {final}: {e.strerror or e}") from None
    shutil.rmtree(old, ignore_errors=True)
    if old.exists():
        ui.warn(f"could not remove the previous package at {old}")
