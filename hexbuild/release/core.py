"""`hexbuild release`: build → verify → package (per OS) → checksums → deploy → smoke, with a
report of every stage.

Each stage runs in a foldable CI group and ends ok, failed or skipped; the first failure stops
the later stages (marked skipped) and exits with that stage's code (build 4, verify 5,
package/checksums 6, deploy 7, smoke 8). dist/ gets the tarballs, manifest.json, SHA256SUMS and
release-report.json; every file is written under a temporary name and renamed, and the report is
rewritten after each stage, so it exists (and says where it stopped) even when a stage fails.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .. import __version__, ci, errors
from ..config import Settings
from ..errors import HexbuildError, UsageError
from ..ui import ui
from .options import MANIFEST, OSES, REPORT, SCHEMA, SUMS, ReleaseOptions
from .report import Stage, _Built, _human
from .stages import ReleaseStages

# What a failure in each stage exits with.
STAGE_ERRORS: dict[str, type[HexbuildError]] = {
    "build": errors.BuildFailed,
    "verify": errors.VerifyFailed,
    "package": errors.PackageFailed,
    "checksums": errors.PackageFailed,
    "deploy": errors.DeployFailed,
    "smoke": errors.RemoteFailed,
    "test": errors.TestsFailed,
}


class Release(ReleaseStages):
    """One release run. ``run()`` returns the report (a dict) or raises the failed stage's
    error after the report, the summary and the result have been written."""

    def __init__(self, settings: Settings, options: ReleaseOptions):
        self.settings = settings
        self.opts = options
        self.dist = options.dist
        self.started = time.time()
        self.warnings_before = len(ui.warnings)
        self.notes_before = len(ui.notes)
        self.stages: list[Stage] = []
        self.built: dict[str, _Built] = {}
        self.assets: list[dict[str, Any]] = []
        self.devices: dict[str, dict[str, Any]] = {}
        self.targets: list[Any] = []
        self.revision: str | None = None
        self.prebuilt: dict[str, Path] = {}
        self.error: HexbuildError | None = None
        self.failed_stage: str | None = None

    # -- the plan ----------------------------------------------------------------------------
    def _plan(self) -> None:
        for os_name in self.opts.oses:
            for name in ("build", "verify", "package"):
                self.stages.append(Stage(name, os_name))
        self.stages.append(Stage("checksums"))
        self.stages.append(Stage("deploy") if self.opts.targets else Stage("deploy", status="skipped",
                                                                         summary="no --target"))
        self.stages.append(Stage("smoke") if self.opts.smoke else Stage("smoke", status="skipped",
                                                                      summary="no --smoke"))
        self.stages.append(Stage("test") if self.opts.tests else Stage("test", status="skipped", summary="no --test"))

    def _stage(self, name: str, os_name: str | None = None) -> Stage:
        return next(s for s in self.stages if s.name == name and s.os == os_name)

    # -- running -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        with _sigterm_as_interrupt():
            return self._run()

    def _run(self) -> dict[str, Any]:
        self._preflight()
        self._plan()
        self._write_report()
        steps = []
        for os_name in self.opts.oses:
            steps += [(self._stage("build", os_name), self._build),
                      (self._stage("verify", os_name), self._verify),
                      (self._stage("package", os_name), self._package)]
        steps += [(self._stage("checksums"), self._checksums), (self._stage("deploy"), self._deploy),
                  (self._stage("smoke"), self._smoke), (self._stage("test"), self._test)]
        try:
            for stage, fn in steps:
                if stage.status == "skipped":
                    continue
                self._run_stage(stage, fn)
        except KeyboardInterrupt:  # between stages
            if self.error is None:
                self.error = errors.Interrupted("interrupted")
            for stage in self.stages:
                if stage.status in ("pending", "running"):
                    stage.status, stage.summary = "skipped", "interrupted"
        finally:
            for t in self.targets:
                try:
                    t.close()
                except Exception:  # closing is best effort; the release result stands
                    pass
        warnings = self._new_warnings()
        if self.error is None and self.opts.strict and warnings:
            self.error = errors.WarningsFatal(
                f"{len(warnings)} warning(s) and --strict makes them fatal (first: {warnings[0]})",
                hint="fix them, or pass --no-strict (strict is on by default under CI=true)")
        report = self.report()
        self._write_report(report)
        ci.append_step_summary(ci.release_summary(report))
        ui.result(report, _human(report))
        if self.error is not None:
            raise self.error
        return report

    def _run_stage(self, stage: Stage, fn) -> None:
        if self.error is not None:
            stage.status = "skipped"
            stage.summary = f"after {self.failed_stage} failed"
            return
        stage.status = "running"
        start = time.monotonic()
        try:
            with ui.group(stage.title):
                try:
                    fn(stage)
                    stage.status = "ok"
                except KeyboardInterrupt:
                    self._fail(stage, errors.Interrupted(f"interrupted during {stage.title}"))
                except HexbuildError as e:
                    self._fail(stage, e)
                except Exception as e:  # a bug: still leave a report that says where
                    self._fail(stage, HexbuildError(f"internal error: {type(e).__name__}: {e}",
                                                    hint="rerun with -v for the traceback and report it"))
                    if ui.verbose:
                        raise
        finally:
            stage.duration_s = time.monotonic() - start
            # After the group closes, so that a folded CI log still shows every stage's outcome.
            mark = "ok" if stage.status == "ok" else "FAILED"
            ui.info(f"{stage.title}: {mark} ({stage.duration_s:.1f}s)"
                    + (f" - {stage.summary}" if stage.summary else ""))
            self._write_report()

    def _fail(self, stage: Stage, err: HexbuildError) -> None:
        """Record a stage's failure; the error exits with the stage's own code (except an
        interrupt, which stays 130), keeping what the underlying error said."""
        stage.status = "failed"
        cls = STAGE_ERRORS.get(stage.name, HexbuildError)
        if not isinstance(err, (cls, errors.Interrupted, errors.LabFault)) and err.exit_code != errors.INTERNAL:
            err = cls(err.message, hint=err.hint, details={**err.details, "cause": err.kind})
        stage.error = {**err.to_json(), "stage": stage.title}
        self.error = err
        self.failed_stage = stage.title

    # -- pre-flight: everything that can be checked before a long build ----------------------
    def _preflight(self) -> None:
        # bad input is refused before the dist directory is made: nothing is left behind
        if self.opts.prebuilt:
            self._check_prebuilt()
        if not self.opts.prebuilt and len(self.opts.oses) > 1:
            for key in ("build.build_dir", "build.install_dir"):
                if self.settings[key]:
                    raise UsageError(f"{key} is set, but several OSes share it: each build needs its own",
                                     hint=f"unset {key} (each OS then uses the revision's own directories)")
        if self.opts.targets:
            self._open_targets()
        try:
            self.dist.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create the dist directory {self.dist}: {e.strerror or e}") from None
        if not os.access(self.dist, os.W_OK):
            raise UsageError(f"the dist directory {self.dist} is not writable")
        self._remove_previous_assets()

    def _check_prebuilt(self) -> None:
        from ..artifacts import package_os, require_llama_package
        from ..artifacts.manifest import read_package_manifest

        if len(self.opts.prebuilt) != len(self.opts.oses) and len(self.opts.oses) > 1:
            raise UsageError(f"{len(self.opts.prebuilt)} --prebuilt package(s) for {len(self.opts.oses)} OSes",
                             hint="give one --prebuilt per OS (OS=DIR, or a package whose manifest.json names its OS)")
        oses, paths = [], []
        single = len(self.opts.prebuilt) == 1
        for item in self.opts.prebuilt:
            label, eq, rest = str(item).partition("=")
            explicit = label if eq and label in OSES else None
            path = Path(rest).expanduser() if explicit else Path(item)
            require_llama_package(path)
            recorded = (read_package_manifest(path) or {}).get("os")  # the one rule, before anything is written
            if explicit and recorded in OSES and recorded != explicit:
                raise UsageError(f"--prebuilt {item}: the package's manifest says os: {recorded}, not {explicit}",
                                 hint=f"label it {recorded}={rest}, or give the {explicit} package")
            flag = explicit or (self.opts.oses[0] if single and self.opts.os_given else None)
            oses.append(package_os(path, flag, self.settings["build.os"]))
            paths.append(path)
        if len(set(oses)) != len(oses):
            raise UsageError(f"two --prebuilt packages are both for {next(o for o in oses if oses.count(o) > 1)}",
                             hint="label them: --prebuilt android=DIR --prebuilt linux=DIR")
        self.prebuilt = dict(zip(oses, paths))
        self.opts.oses = oses

    def _open_targets(self) -> None:
        from ..targets import parse_target

        dup = next((t for t in self.opts.targets if self.opts.targets.count(t) > 1), None)
        if dup is not None:
            raise UsageError(f"the same target is given twice: {dup}")
        for spec in self.opts.targets:
            target = parse_target(spec, self.settings)
            self.targets.append(target)
            os_name = getattr(target, "os", None)
            if os_name and os_name not in self.opts.oses:
                raise UsageError(f"target {spec} runs {os_name}, but this release builds {', '.join(self.opts.oses)}",
                                 hint=f"add --os {','.join(self.opts.oses + [os_name])}")
            self.devices[spec] = {"target": spec, "os": os_name, "device": None, "deploy": "pending",
                                  "smoke": None, "error": None}

    def _remove_previous_assets(self) -> None:
        """dist/ describes one release: the files an earlier release listed in its manifest or
        its report are removed (nothing else is touched)."""
        names: list[Any] = []
        for listing, key in ((MANIFEST, "assets"), (REPORT, "artifacts")):
            try:
                data = json.loads((self.dist / listing).read_text("utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and isinstance(data.get(key), list):
                names += [a.get("name") for a in data[key] if isinstance(a, dict)]
        for name in dict.fromkeys(names + [SUMS, MANIFEST]):
            if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
                try:
                    (self.dist / name).unlink()
                    ui.detail(f"removed {self.dist / name} (from the previous release)")
                except FileNotFoundError:
                    pass

    # -- the report --------------------------------------------------------------------------
    def _new_warnings(self) -> list[str]:
        return list(ui.warnings[self.warnings_before:])

    def report(self) -> dict[str, Any]:
        err = self.error
        status = "ok" if err is None else "failed"
        return {
            "schema": SCHEMA,
            "hexbuild_version": __version__,
            "status": status,
            "exit_code": errors.OK if err is None else err.exit_code,
            "failed_stage": self.failed_stage,
            "error": None if err is None else err.to_json(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": round(time.time() - self.started, 3),
            "revision": self.revision,
            "source": str(self.settings["source"]),
            "os": list(self.opts.oses),
            "dist": str(self.dist),
            "strict": self.opts.strict,
            "warnings": self._new_warnings(),
            "notes": list(ui.notes[self.notes_before:]),  # facts the release chose (a CPU-only build): not --strict's
            "ci": ui.ci,
            "stages": [s.to_json() for s in self.stages],
            "artifacts": [{k: a[k] for k in ("name", "os", "path", "size", "sha256")} for a in self.assets],
            "devices": list(self.devices.values()),
        }

    def _write_report(self, report: dict[str, Any] | None = None) -> None:
        from ..paths import atomic_write

        data = json.dumps(report or self.report(), indent=2, default=str) + "\n"
        try:
            atomic_write(self.dist / REPORT, data, mode=0o644)
        except OSError as e:
            ui.warn(f"cannot write {self.dist / REPORT}: {e.strerror or e}")


def run_release(settings: Settings, options: ReleaseOptions) -> dict[str, Any]:
    return Release(settings, options).run()


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A cancelled CI job gets SIGTERM: treat it like Ctrl-C, so that the stage is marked
    interrupted and the report is still written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)

