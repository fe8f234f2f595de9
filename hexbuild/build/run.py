"""Running a plan: on the Docker engine (mount or copy transfer) or locally, the build log, the
signals that end a build like Ctrl-C, and handing files over to the build user."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import EnvironmentMissing, Interrupted, UsageError
from ..toolchain import commands as cmds
from ..toolchain.buildlog import BuildLog
from ..toolchain.presets import PresetsCopy
from ..toolchain.spec import WORKSPACE
from ..ui import ui
from .container import container_spec, default_user, local_command, resolve_transfer
from .options import BuildOptions, _passthrough
from .plan import BuildPlan, plan_build
from . import uptodate
from .publish import BuildResult, _hand_over, _numeric_user, finish, preload_checks, up_to_date


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
    from ..toolchain import transfer as xfer
    from ..toolchain.engine import DockerEngine

    opts = plan.options
    try:
        engine = DockerEngine.connect()
    except KeyboardInterrupt:
        raise Interrupted("interrupted") from None
    container: str | None = None
    archive: list[Path] = []
    digest: str | None = None
    try:
        transfer = resolve_transfer(opts.transfer, engine.info.remote)
        if transfer == "mount" and engine.info.remote:
            raise EnvironmentMissing(
                f"the Docker engine at {engine.info.host} is on another machine: it cannot mount this machine's "
                "checkout (build.transfer = mount)",
                hint="use --transfer copy (or auto), run hexbuild on the engine's machine, or run the build "
                     "inside the toolchain image with --engine local")
        image = _ensure_image(engine, plan)
        user = opts.user or default_user(engine.info.rootless)
        spec = container_spec(plan, user=user, jobs=opts.jobs or engine.info.ncpu or plan.jobs, transfer=transfer)
        container = spec.name
        if transfer == "mount" and not opts.keep_container:
            digest = uptodate.inputs_digest(plan, spec, image.id)
            recorded = None if opts.force else uptodate.lookup(plan, digest)
            if recorded is not None:
                return up_to_date(recorded, start)
            uptodate.forget(plan)
        ui.command(spec.docker_run_argv(remove=not opts.keep_container))
        _hand_over(_prepare(plan), user)
        _ensure_cache(engine, opts.cache_volume, spec.image, user)
        hooks: dict[str, Any] = {}
        if transfer == "copy":
            engine.ensure_volume(xfer.volume_name(plan.root), spec.image, purpose="source")
            uid, gid = _numeric_user(user)
            staging = f"{plan.install_dir}{cmds.STAGING_SUFFIX}"

            def before_start(api: Any, cid: str) -> None:
                include = [f"{plan.build_dir}/{cmds.HTP_SELECT_FILE}"] if plan.htp_subset else []
                include += [f"{plan.build_dir}/{cmds.TARGETS_FILE}"] if plan.targets else []
                archive.append(xfer.source_archive(plan.root, exclude=[plan.build_dir, plan.install_dir, staging],
                                                   include=include, uid=uid, gid=gid))
                xfer.copy_in(api, cid, archive[-1])

            def after_exit(api: Any, cid: str, rc: int) -> None:
                if rc == 0:
                    xfer.copy_out(api, cid, f"{WORKSPACE}/{staging}", (plan.root / staging).parent)

            hooks = {"before_start": before_start, "after_exit": after_exit}
        preload_checks()
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
    result = finish(plan, rc, log, start, image=image.reference, digest=image.digest, container=container)
    if digest is not None and (record := uptodate.remember(plan, digest, result.to_json())) is not None:
        _hand_over([record], user)
    return result


def _ensure_image(engine: Any, plan: BuildPlan) -> Any:
    """The vendor image as the pull policy says; the open image is made here, never pulled."""
    if plan.toolchain.name != "open" or plan.image_source == "--image":
        return engine.ensure_image(plan.image or "", plan.options.pull)
    try:
        return engine.ensure_image(plan.image or "", "never")
    except EnvironmentMissing:
        raise EnvironmentMissing(f"the open toolchain image {plan.image} is not on the Docker engine",
                                 hint="make it once with `hexbuild toolchain open` (Debian packages only; "
                                      "a few minutes)") from None


def _ensure_cache(engine: Any, cache: str, image: str, user: str) -> None:
    if not cache.startswith("/"):
        engine.ensure_volume(cache, image)
        return
    try:  # a directory of this machine (the engine's, when local): made once, writable by the build user
        Path(cache).mkdir(parents=True, exist_ok=True)
        _hand_over([Path(cache)], user)
    except OSError as e:
        raise UsageError(f"build.cache_volume {cache}: cannot create it: {e.strerror or e}") from None


def _run_local(plan: BuildPlan, start: float) -> BuildResult:
    from ..toolchain.local import LocalEngine

    env = dict(os.environ)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(plan.jobs)
    env.update(_passthrough(plan.options.env_passthrough)[0])
    try:
        _prepare(plan)
        preload_checks()
        rc, log = _execute(plan, lambda lg: LocalEngine().run(local_command(plan), cwd=plan.root, env=env, log=lg))
    except KeyboardInterrupt:
        raise Interrupted("interrupted; the build was stopped") from None
    return finish(plan, rc, log, start, image=None, digest=None, container=None)


def _prepare(plan: BuildPlan) -> list[Path]:
    """The build directory (and the HTP and target selection files), and no leftover staging install.
    Returns the directories and files created here, to hand over to the build user."""
    created: list[Path] = []
    try:
        missing = [p for p in [plan.build_path, *plan.build_path.parents] if not p.exists()]
        plan.build_path.mkdir(parents=True, exist_ok=True)
        created += sorted(missing)
        for wanted, name, text in ((plan.htp_subset, cmds.HTP_SELECT_FILE, cmds.HTP_SELECT_CMAKE),
                                   (plan.targets, cmds.TARGETS_FILE, cmds.TARGETS_CMAKE)):
            if wanted:
                target = plan.build_path / name
                tmp = target.with_name(target.name + ".part")
                tmp.write_text(text, encoding="utf-8")
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
    what = f"HTP {' '.join(plan.htp_versions)}" if plan.toolchain.npu else "open toolchain, no NPU libraries"
    if plan.targets:
        what += f"; targets {' '.join(plan.targets)}"
    ui.info(f"building {plan.preset} ({plan.os}, {what}){where}")
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
