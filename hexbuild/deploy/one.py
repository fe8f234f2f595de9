"""One target: probe it, plan the release against what it has, check space, then stage, push,
switch, verify and push models — every failure caught into its TargetResult."""

from __future__ import annotations

import errno
import posixpath
import tempfile
import time
from pathlib import Path

from ..artifacts.npu import missing_skel_note
from ..errors import DeployFailed, EnvironmentMissing, HexbuildError, Interrupted, UsageError
from ..targets.base import DeviceInfo, Target
from ..targets.posix import not_ready_message
from ..targets.tools import require_tools
from ..ui import ui
from .apply import apply_plan
from .beside import Beside
from .checkpoints import cancel, checkpoint, fault
from .kept import check_kept
from .layout import Layout, read_live, release_id, survey
from .lock import DeployLock
from .models import Model, plan_models, push_models
from .options import DeployOptions
from .package import Package
from .plan import plan_release
from .result import TargetResult
from .rollback import rollback
from .runtime import check_glibc, foreign_note
from .scripts import launch_scripts_for, script_files
from .space import check_space
from .verify import verify_install


def deploy_one(target: Target, pkg: Package | None, models: list[Model], opts: DeployOptions) -> TargetResult:
    res = TargetResult(target=target.spec)
    t0 = time.monotonic()
    task = None
    tmpdir: tempfile.TemporaryDirectory | None = None
    lock: DeployLock | None = None
    try:
        from ..runner import default_dest, default_models_dir

        dest = _absolute(target, opts.dest or default_dest(target), "--dest")
        res.dest = dest
        lay = Layout(dest)
        if not opts.dry_run:
            lock = DeployLock(target, lay, wait=opts.wait, stale=opts.stale_lock)
        if opts.rollback:
            _probe(target, dest, res)
            if lock is not None:
                lock.acquire()
                res.lock_wait_s = lock.waited_s
            rollback(target, lay, res, opts)
            return res
        # The lock's device call, which surveys <dest> too, runs beside the probe's: a round
        # trip less before the plan, and the survey no longer waits for the refusals below. It
        # tries the lock once: a refused deploy releases it again (finally), and one that finds
        # another deploy holding it waits after the refusals, as before.
        take = lock.acquire if lock is not None else None
        with Beside(survey, target, lay, take, once=True) as ahead:
            info = _probe(target, dest, res)
            models_dir = _absolute(target, opts.models_dir or default_models_dir(target), "models directory")
            _refusals(target, info, pkg, opts, res)
            want = dict(pkg.files)
            want.update(opts.runtime_files)
            scripts = launch_scripts_for(target, info, pkg, dest, models_dir, opts)
            if scripts:
                tmpdir = tempfile.TemporaryDirectory(prefix="hexbuild-scripts-")
                want.update(script_files(scripts, Path(tmpdir.name)))
            res.files_total = len(want) + len(models)
            res.bytes_total = sum(f.size for f in want.values()) + sum(m.size for m in models)
        early = ahead.value or survey(target, lay, take)
        if lock is not None:
            res.lock_wait_s = lock.waited_s
        if early.snap[lay.dest].kind == "missing" and not opts.dry_run:
            # nothing installed: the whole package travels, so the link is timed now, beside the
            # hashing, rather than after the plan (the push asks again and finds it measured)
            target.expect_transfer([f.local for f in want.values()])
        rid = release_id(want, pkg.meta)
        res.release = lay.prefix + rid
        live, staged = read_live(target, lay, rid, verify=opts.verify, early=early)
        plan = plan_release(target, lay, live, staged, want, rid, opts)
        model_plan = plan_models(target, models_dir, models)
        res.files_removed = len(plan.stale)
        res.previous = plan.previous
        check_space(target, info, dest, models_dir, plan, model_plan)
        if opts.dry_run:
            # what would travel is the plan's (files_to_push, bytes_to_push); the result's
            # files_pushed and bytes_pushed say what did: nothing
            to_push = len(plan.push) + len(plan.repair) + len(model_plan.push)
            res.plan = {"push": sorted(plan.push), "link": len(plan.link), "copy": len(plan.copy), "keep": len(plan.keep),
                        "remove": sorted(plan.stale), "repair": sorted(plan.repair),
                        "models_push": [m.name for m in model_plan.push], "release": res.release,
                        "swap": plan.swap, "files_to_push": to_push,
                        "bytes_to_push": plan.push_bytes + model_plan.push_bytes}
            res.status = "unchanged" if not to_push and not plan.swap else "ok"
            return res

        total = plan.push_bytes + model_plan.push_bytes
        label = info.serial or target.spec
        if opts.progress is not None and total:
            task = opts.progress.add_task(f"{label}", total=total)

        def progress(n: int, wire: int | None = None) -> None:
            if cancel.is_set():
                raise Interrupted("interrupted")
            res.bytes_pushed += n
            res.wire_bytes += n if wire is None else wire
            if task is not None:
                opts.progress.update(task, advance=n, description=_wire_label(label, res))
            fault(target.spec, f"bytes:{res.bytes_pushed}")

        # the lock goes in the switch's own device call when nothing follows the switch
        last = [lock.release_step()] if lock is not None and not opts.verify and not model_plan.push else []
        try:
            if apply_plan(target, lay, live, plan, want, pkg, opts, progress, res, last) and last:
                lock.released()
        except (HexbuildError, OSError) as e:
            if not _no_space(e):
                raise
            _drop_staged(target, plan)
            raise DeployFailed(f"{target.spec}: no space left on the device at {lay.parent} while pushing (it filled "
                               "up after the space check); the previous install is untouched and the partial "
                               "release was removed", hint="free space on the device, then deploy again") from None
        if opts.verify:
            verify_install(target, lay, want, progress, res, checked_live=plan.in_place, repaired=plan.repair)
            check_kept(target, lay, plan.previous, want, progress, res)
        done = push_models(target, models_dir, model_plan, progress, lambda name: checkpoint(target, name))
        res.models = done
        res.files_pushed += sum(1 for m in done if m["status"] == "pushed")
        changed = plan.swap or res.files_pushed or res.files_removed
        res.status = "ok" if changed else "unchanged"
    except HexbuildError as e:
        res.status, res.error, res.hint = "failed", e.message, e.hint
    except Exception as e:  # one target's bug must not take the others down
        if ui.verbose:
            import traceback

            traceback.print_exc()
        res.status, res.error = "failed", f"internal error: {type(e).__name__}: {e}"
    finally:
        if lock is not None:
            lock.release()  # on success, failure and Ctrl-C alike
        res.duration_s = round(time.monotonic() - t0, 3)
        rate = target.measured_link_rate()
        res.link_mb_s = round(rate / 1e6, 1) if rate else None
        if tmpdir is not None:
            tmpdir.cleanup()
        if task is not None:
            opts.progress.update(task, description=f"{_wire_label(info_label(res), res)} {res.status}")
    return res


def _probe(target: Target, dest: str, res: TargetResult) -> DeviceInfo:
    info = target.probe(dest)
    res.serial, res.soc, res.htp_arch = info.serial, info.soc, info.htp_arch
    _require_ready(target, info)
    require_tools(target, info)  # asked in the probe's call; names a missing tool before anything changes
    return info


def _refusals(target: Target, info: DeviceInfo, pkg: Package, opts: DeployOptions, res: TargetResult) -> None:
    """What the probe's facts refuse (an old glibc) or warn of, before anything is sent."""
    skel = missing_skel_note(pkg.listing(), info.htp_arch)  # the one rule: an NPU package that cannot open
    if skel:
        res.warnings.append(skel)
        ui.warn(f"{target.spec}: {skel}")
    res.glibc = check_glibc(target, pkg, bundled=bool(opts.runtime_files))
    foreign = foreign_note(pkg, target)
    if foreign:
        res.warnings.append(foreign)
        ui.warn(f"{target.spec}: {foreign}")


def _no_space(e: BaseException) -> bool:
    if isinstance(e, OSError):
        return e.errno == errno.ENOSPC
    return "no space left on device" in getattr(e, "message", str(e)).lower()


def _drop_staged(target: Target, plan) -> None:
    """A release that cannot be finished only holds the space the device lacks."""
    if plan.in_place or not plan.release_dir:
        return
    try:
        target.remove([plan.release_dir], recursive=True)
    except HexbuildError:
        pass  # the next deploy finds it and reuses what is whole


def info_label(res: TargetResult) -> str:
    return res.serial or res.target


def _wire_label(label: str, res: TargetResult) -> str:
    """The progress line: what the link carried beside the file bytes, once they differ."""
    if res.wire_bytes == res.bytes_pushed:
        return label
    from ..ui import human_size

    return f"{label} ({human_size(res.wire_bytes)} on the wire)"


def _absolute(target: Target, path: str, what: str) -> str:
    expanded = target.expand(path) if hasattr(target, "expand") else path
    norm = posixpath.normpath(expanded)
    if not norm.startswith("/") or norm == "/":
        raise UsageError(f"{what} must be an absolute directory other than /: {path!r}")
    return norm


def _require_ready(target: Target, info: DeviceInfo) -> None:
    if info.state in ("device", "ready"):
        return
    what, fix = not_ready_message(info.state)
    raise EnvironmentMissing(f"{target.spec}: device {info.serial} {what}", hint=fix)
