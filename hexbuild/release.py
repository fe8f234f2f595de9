"""`hexbuild release`: build → verify → package (per OS) → checksums → deploy → smoke, with a
report of every stage.

Each stage runs in a foldable CI group and ends ok, failed or skipped; the first failure stops
the later stages (marked skipped) and exits with that stage's code (build 4, verify 5,
package/checksums 6, deploy 7, smoke 8). dist/ gets the tarballs, manifest.json, SHA256SUMS and
release-report.json; every file is written under a temporary name and renamed, and the report is
rewritten after each stage, so it exists (and says where it stopped) even when a stage fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import __version__, ci, errors
from .config import Settings
from .errors import HexbuildError, UsageError
from .ui import human_size, ui

REPORT = "release-report.json"
MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"
SCHEMA = 1
OSES = ("android", "linux")

# What a failure in each stage exits with.
STAGE_ERRORS: dict[str, type[HexbuildError]] = {
    "build": errors.BuildFailed,
    "verify": errors.VerifyFailed,
    "package": errors.PackageFailed,
    "checksums": errors.PackageFailed,
    "deploy": errors.DeployFailed,
    "smoke": errors.RemoteFailed,
}
# A smoke command is a quick check, not a benchmark; its log's tail is shown in the CI log.
SMOKE_TIMEOUT = 600.0
SMOKE_LOG_LINES = 40


@dataclass
class ReleaseOptions:
    oses: list[str]
    dist: Path
    targets: list[str] = field(default_factory=list)
    smoke: str | None = None
    strict: bool = False
    prebuilt: list[Path] = field(default_factory=list)  # install prefixes to release instead of building
    os_given: bool = False  # --os was on the command line (it then labels a single --prebuilt)
    allow_cpu_fallback: bool = False  # a smoke run whose HTP sessions did not open still passes

    @classmethod
    def from_settings(cls, settings: Settings, *, oses: list[str] | None = None, targets: list[str] | None = None,
                      smoke: str | None = None, prebuilt: list[str] | None = None,
                      strict: bool | None = None) -> "ReleaseOptions":
        from .config import is_strict

        chosen = _parse_oses(oses) if oses else [settings["build.os"]]
        dist = Path(settings["release.dist_dir"]).expanduser()
        if not dist.is_absolute() and settings.origin("release.dist_dir") == "file" and settings.config_file:
            dist = settings.config_file.parent / dist  # relative to the file that says so
        smoke = smoke.strip() if smoke is not None else None
        if smoke == "":
            raise UsageError("--smoke needs a command, e.g. --smoke 'llama-cli --version'")
        wanted = list(targets) if targets else list(settings["deploy.targets"])
        if smoke and not wanted:
            raise UsageError("--smoke runs on the deploy targets, and none were given",
                             hint="add --target adb:SERIAL (or set deploy.targets)")
        return cls(oses=chosen, dist=dist, targets=wanted, smoke=smoke,
                   strict=is_strict(settings) if strict is None else strict,
                   prebuilt=[Path(p) for p in prebuilt or []], os_given=bool(oses))


def _parse_oses(values: list[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip().lower()
            if not item:
                continue
            if item not in OSES:
                raise UsageError(f"--os must be one of {', '.join(OSES)} (comma-separated), got {item!r}")
            if item not in out:
                out.append(item)
    if not out:
        raise UsageError("--os names no OS")
    return out


@dataclass
class Stage:
    name: str
    os: str | None = None
    status: str = "pending"  # pending | running | ok | failed | skipped
    duration_s: float | None = None
    summary: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)  # build / verify / devices details

    @property
    def title(self) -> str:
        return f"{self.name} ({self.os})" if self.os else self.name

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "os": self.os, "status": self.status,
               "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
               "summary": self.summary, "artifacts": self.artifacts, "error": self.error}
        out.update(self.data)
        return out


@dataclass
class _Built:
    os: str
    path: Path
    meta: dict[str, Any]
    verify: dict[str, Any] | None = None  # the build's own verify report (VerifyReport.to_json())
    verify_error: HexbuildError | None = None  # the build's package failed its verification


class Release:
    """One release run. ``run()`` returns the report (a dict) or raises the failed stage's
    error after the report, the summary and the result have been written."""

    def __init__(self, settings: Settings, options: ReleaseOptions):
        self.settings = settings
        self.opts = options
        self.dist = options.dist
        self.started = time.time()
        self.warnings_before = len(ui.warnings)
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
                  (self._stage("smoke"), self._smoke)]
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
        if not isinstance(err, (cls, errors.Interrupted)) and err.exit_code != errors.INTERNAL:
            err = cls(err.message, hint=err.hint, details={**err.details, "cause": err.kind})
        stage.error = {**err.to_json(), "stage": stage.title}
        self.error = err
        self.failed_stage = stage.title

    # -- pre-flight: everything that can be checked before a long build ----------------------
    def _preflight(self) -> None:
        try:
            self.dist.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create the dist directory {self.dist}: {e.strerror or e}") from None
        if not os.access(self.dist, os.W_OK):
            raise UsageError(f"the dist directory {self.dist} is not writable")
        if self.opts.prebuilt:
            self._check_prebuilt()
        elif len(self.opts.oses) > 1:
            for key in ("build.build_dir", "build.install_dir"):
                if self.settings[key]:
                    raise UsageError(f"{key} is set, but several OSes share it: each build needs its own",
                                     hint=f"unset {key} (each OS then uses the revision's own directories)")
        if self.opts.targets:
            self._open_targets()
        self._remove_previous_assets()

    def _check_prebuilt(self) -> None:
        from .artifacts import package_os, require_package_dir

        if len(self.opts.prebuilt) != len(self.opts.oses) and len(self.opts.oses) > 1:
            raise UsageError(f"{len(self.opts.prebuilt)} --prebuilt package(s) for {len(self.opts.oses)} OSes",
                             hint="give one --prebuilt per OS (OS=DIR, or a package whose manifest.json names its OS)")
        oses, paths = [], []
        single = len(self.opts.prebuilt) == 1
        for item in self.opts.prebuilt:
            label, eq, rest = str(item).partition("=")
            explicit = label if eq and label in OSES else None
            path = Path(rest).expanduser() if explicit else Path(item)
            require_package_dir(path)
            flag = explicit or (self.opts.oses[0] if single and self.opts.os_given else None)
            oses.append(package_os(path, flag, self.settings["build.os"]))
            paths.append(path)
        if len(set(oses)) != len(oses):
            raise UsageError(f"two --prebuilt packages are both for {next(o for o in oses if oses.count(o) > 1)}",
                             hint="label them: --prebuilt android=DIR --prebuilt linux=DIR")
        self.prebuilt = dict(zip(oses, paths))
        self.opts.oses = oses

    def _open_targets(self) -> None:
        from .targets import parse_target

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

    # -- stages ------------------------------------------------------------------------------
    def _build(self, stage: Stage) -> None:
        from .artifacts import load_meta

        os_name = stage.os
        assert os_name is not None
        prebuilt = self.prebuilt.get(os_name)
        if prebuilt is not None:
            meta = load_meta(prebuilt)
            self.built[os_name] = _Built(os_name, prebuilt, meta)
            stage.summary = f"prebuilt {prebuilt}"
            stage.data["build"] = {"prebuilt": True, "package": str(prebuilt)}
            self._note_revision(meta)
            return
        from .build import BuildOptions, run_build

        opts = BuildOptions.from_settings(_with(self.settings, {"build.os": os_name}))
        try:
            result = run_build(opts)
        except errors.BuildFailed as e:
            stage.data["build"] = {k: e.details.get(k) for k in ("exit_code", "log", "known_failure")}
            self._annotate_build_failure(e)
            raise
        except errors.VerifyFailed as e:
            # The build itself succeeded and checked its package: that failure is the verify
            # stage's, and exits 5, not 4.
            stage.summary = "built; the package fails verification"
            self.built[os_name] = _Built(os_name, Path(opts.source), {}, verify_error=e)
            return
        meta = load_meta(result.package)
        self.built[os_name] = _Built(os_name, result.package, meta, verify=result.verify)
        stage.summary = f"{result.package} in {result.duration_s:.0f}s" + (f" ({result.image})" if result.image else "")
        stage.data["build"] = {k: v for k, v in result.to_json().items() if k != "verify"}  # the verify stage has it
        self._note_revision(meta)

    def _note_revision(self, meta: dict[str, Any]) -> None:
        rev = (meta.get("llama_cpp") or {}).get("revision")
        if rev and not self.revision:
            self.revision = rev

    def _annotate_build_failure(self, err: HexbuildError) -> None:
        from .toolchain.spec import WORKSPACE

        diags = ci.annotate_build_log(err.details, Path(self.settings["source"]).expanduser(), WORKSPACE)
        if diags:
            err.details = {**err.details, "diagnostics": [d.to_json() for d in diags][:50]}

    def _verify(self, stage: Stage) -> None:
        """The build's own verification when it ran one (its warnings were already raised),
        else hexbuild verify's checks on the prebuilt package."""
        from .artifacts import verify_package

        built = self.built[stage.os]  # type: ignore[index]
        if built.verify_error is not None:
            report = built.verify_error.details.get("verify") or {}
            stage.data["verify"] = _verify_summary(report)
            stage.summary = _verify_text(stage.data["verify"])
            raise built.verify_error
        if built.verify is not None:
            report = built.verify
        else:
            report = verify_package(built.path, os=built.os, htp_versions=self.settings["build.htp"] or None).to_json()
            for c in report["checks"]:
                if c["status"] == "warn":
                    ui.warn(f"verify ({built.os}): {c['file']}: {c['check']}: {c['detail']}")
        summary = _verify_summary(report)
        stage.data["verify"] = summary
        stage.summary = _verify_text(summary)
        if not summary["ok"]:
            failed = [c for c in report["checks"] if c["status"] == "fail"]
            if len(failed) > 1:  # the stage's own error names the first; annotate each
                for c in failed:
                    ui.error(f"verify ({built.os}): {c['file']}: {c['check']}: {c['detail']}")
            first = failed[0] if failed else {"file": "?", "check": "?", "detail": "failed"}
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise errors.VerifyFailed(f"{built.os} package {built.path}: {first['file']}: {first['check']}: "
                                      f"{first['detail']}{more}", details={"package": str(built.path)})

    def _package(self, stage: Stage) -> None:
        from .artifacts import default_name, write_package

        built = self.built[stage.os]  # type: ignore[index]
        meta = dict(built.meta)
        meta["os"] = built.os
        name = default_name(built.os, (meta.get("llama_cpp") or {}).get("revision"))
        if any(a["name"] == name for a in self.assets):
            raise errors.PackageFailed(f"two packages would both be named {name}")
        result = write_package(built.path, self.dist / name, meta)  # temp name + rename inside
        asset = {"name": name, "os": built.os, "path": str(result.path), "size": result.size,
                 "sha256": result.sha256, "files": len(result.manifest.get("files", [])),
                 "htp_versions": result.manifest.get("htp_versions"),
                 "llama_cpp": result.manifest.get("llama_cpp"), "image": result.manifest.get("image")}
        self.assets.append(asset)
        stage.artifacts.append({k: asset[k] for k in ("name", "path", "size", "sha256")})
        stage.summary = f"{name} {human_size(result.size)}"
        ui.info(f"{name}  {human_size(result.size)}  sha256 {result.sha256}")

    def _checksums(self, stage: Stage) -> None:
        from .artifacts.manifest import atomic_write

        manifest = {"schema": SCHEMA, "hexbuild_version": __version__, "llama_cpp_revision": self.revision,
                    "assets": [{k: a[k] for k in ("name", "os", "size", "sha256", "files", "htp_versions",
                                                  "llama_cpp", "image")} for a in self.assets]}
        manifest_bytes = (json.dumps(manifest, indent=2) + "\n").encode()
        atomic_write(self.dist / MANIFEST, manifest_bytes)
        entries = [(a["sha256"], a["name"]) for a in self.assets]
        entries.append((hashlib.sha256(manifest_bytes).hexdigest(), MANIFEST))
        sums = "".join(f"{digest}  {name}\n" for digest, name in sorted(entries, key=lambda e: e[1]))
        atomic_write(self.dist / SUMS, sums.encode())
        for name, data in ((MANIFEST, manifest_bytes), (SUMS, sums.encode())):
            stage.artifacts.append({"name": name, "path": str(self.dist / name), "size": len(data),
                                    "sha256": hashlib.sha256(data).hexdigest()})
        stage.summary = f"{len(entries)} files in {SUMS}"

    def _deploy(self, stage: Stage) -> None:
        """Deploy the tarball just written (what ships is what gets tested) to the targets of
        its OS, all in parallel."""
        from .deploy import DeployOptions, deploy

        s = self.settings
        options = DeployOptions(dest=s["deploy.dest"] or None, models_dir=s["deploy.models_dir"] or None,
                                ndev=s["deploy.ndev"], parallel=s["deploy.parallel"])
        results = []
        for asset in self.assets:
            targets = [t for t in self.targets if getattr(t, "os", None) in (asset["os"], None)]
            if targets:
                ui.info(f"deploying {asset['name']} to {', '.join(t.spec for t in targets)}")
                results += deploy(Path(asset["path"]), targets, options)
        failures = []
        for r in results:
            dev = self.devices[r.target]
            dev["deploy"] = "failed" if r.status == "failed" else "ok"
            dev["device"] = " ".join(x for x in (r.serial, r.soc, r.htp_arch) if x) or None
            dev["dest"] = r.dest
            dev["files_pushed"], dev["bytes_pushed"] = r.files_pushed, r.bytes_pushed
            if r.status == "failed":
                dev["error"] = r.error + (f" ({r.hint})" if r.hint else "")
                failures.append(f"{r.target}: {dev['error']}")
            else:
                ui.info(f"{r.target}: {r.status}, {r.files_pushed}/{r.files_total} files pushed "
                        f"({human_size(r.bytes_pushed)}) in {r.duration_s:.1f}s")
        stage.data["deploy"] = [r.to_json() for r in results]
        stage.summary = f"{len(results) - len(failures)}/{len(results)} targets"
        _annotate_each("deploy", failures)
        if failures:
            raise errors.DeployFailed(f"deploy failed on {len(failures)} of {len(results)} target(s): "
                                      f"{failures[0]}", details={"failures": failures})

    def _smoke(self, stage: Stage) -> None:
        from . import runner

        argv = shlex.split(self.opts.smoke or "")
        failures: list[str] = []
        cpu_fallbacks: list[dict[str, Any]] = []
        for spec, dev in self.devices.items():
            if dev.get("deploy") != "ok":
                continue
            req = runner.RunRequest(kind="tool", target=spec, dest=self.settings["deploy.dest"],
                                    models_dir=self.settings["deploy.models_dir"], extra=argv,
                                    results_dir=self.settings["run.results_dir"])
            start = time.monotonic()
            try:
                record = self._smoke_one(runner, req)
            except errors.Interrupted:
                raise
            except HexbuildError as e:
                dev["smoke"] = {"status": "failed", "exit_code": None, "duration_s": round(time.monotonic() - start, 3),
                                "log": None, "error": e.message}
                failures.append(f"{spec}: {e.message}")
                continue
            ok = record.exit_code == 0
            fallback = (record.dispatch or {}).get("fallback_reason") if ok else None
            if fallback and self.opts.allow_cpu_fallback:
                ui.warn(f"{spec}: the smoke run fell back to the CPU: {fallback}")
                fallback = None
            dev["smoke"] = {"status": "ok" if ok and not fallback else "failed", "exit_code": record.exit_code,
                            "duration_s": round(record.duration_s, 3), "log": record.log,
                            "argv": record.invocation.argv, "dispatch": record.dispatch}
            if not ok:
                failures.append(f"{spec}: `{self.opts.smoke}` exited {record.exit_code} (log: {record.log})")
            elif fallback:
                failures.append(f"{spec}: `{self.opts.smoke}` fell back to the CPU: {fallback} (log: {record.log})")
                cpu_fallbacks.append(record.dispatch)
        stage.summary = f"`{self.opts.smoke}` on {sum((d.get('smoke') or {}).get('status') == 'ok' for d in self.devices.values())}/{len(self.devices)} targets"
        _annotate_each("smoke", failures)
        if failures:
            from .results.dispatch import hint_for

            error = errors.CpuFallback if len(cpu_fallbacks) == len(failures) else errors.RemoteFailed
            hint = hint_for(cpu_fallbacks[0].get("code"), cpu_fallbacks[0].get("arch")) if cpu_fallbacks else None
            raise error(f"smoke test failed on {len(failures)} target(s): {failures[0]}", hint=hint,
                        details={"failures": failures})

    def _smoke_one(self, runner, req):
        """One smoke run through the runner; the program's output goes to stderr (stdout holds
        the release's result) and is saved as a log, like every `hexbuild run`."""
        prepared = runner.prepare(req, self.settings)
        with prepared.target as target:
            ui.info(f"{req.target}: {prepared.invocation.command_line()}")
            record = runner.execute(target, prepared.invocation, results_dir=Path(req.results_dir),
                                    passthrough=False, timeout=SMOKE_TIMEOUT)
        try:
            lines = Path(record.log).read_text("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        for line in lines[-SMOKE_LOG_LINES:]:
            ui.info(f"  | {line}")
        ui.info(f"{req.target}: exit {record.exit_code} after {record.duration_s:.1f}s; log: {record.log}")
        return record

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
            "ci": ui.ci,
            "stages": [s.to_json() for s in self.stages],
            "artifacts": [{k: a[k] for k in ("name", "os", "path", "size", "sha256")} for a in self.assets],
            "devices": list(self.devices.values()),
        }

    def _write_report(self, report: dict[str, Any] | None = None) -> None:
        from .artifacts.manifest import atomic_write

        data = json.dumps(report or self.report(), indent=2, default=str) + "\n"
        try:
            atomic_write(self.dist / REPORT, data.encode())
        except OSError as e:
            ui.warn(f"cannot write {self.dist / REPORT}: {e.strerror or e}")


def run_release(settings: Settings, options: ReleaseOptions) -> dict[str, Any]:
    return Release(settings, options).run()


# -- helpers -------------------------------------------------------------------------------------
def _with(settings: Settings, values: dict[str, Any]) -> Settings:
    """A copy of ``settings`` with some values set as if by flags."""
    return dataclasses.replace(settings, values={**settings.values, **values},
                               origins={**settings.origins, **{k: "flag" for k in values}})


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


def _annotate_each(stage: str, failures: list[str]) -> None:
    """One annotation per failed target when there are several (the stage's own error names
    only the first)."""
    if len(failures) > 1:
        for f in failures:
            ui.error(f"{stage}: {f}")


def _verify_summary(report: dict[str, Any]) -> dict[str, Any]:
    checks = report.get("checks") or []
    return {"ok": bool(report.get("ok")), "checks_total": len(checks), "warnings": report.get("warnings", 0),
            "failures": report.get("failures", 0), "htp_versions": report.get("htp_versions") or [],
            "problems": [c for c in checks if c.get("status") != "ok"]}


def _verify_text(v: dict[str, Any]) -> str:
    return (f"{v['checks_total']} checks, {v['failures']} failed, {v['warnings']} warnings; "
            f"HTP {' '.join(v['htp_versions']) or 'none'}")


def _human(report: dict[str, Any]) -> str:
    lines = []
    for s in report["stages"]:
        title = s["name"] + (f" ({s['os']})" if s["os"] else "")
        dur = f"{s['duration_s']:.1f}s" if s["duration_s"] is not None else ""
        lines.append(f"{title:<20} {s['status']:<8} {dur:>8}  {s['summary'] or ''}".rstrip())
    if report["artifacts"]:
        lines.append("")
        for a in report["artifacts"]:
            lines.append(f"{a['path']}  {human_size(a['size'])}  sha256 {a['sha256']}")
    for d in report["devices"]:
        smoke = d.get("smoke") or {}
        lines.append(f"{d['target']}: deploy {d.get('deploy')}" + (f", smoke {smoke.get('status')}" if smoke else ""))
    lines.append("")
    lines.append(f"report: {Path(report['dist']) / REPORT}")
    return "\n".join(lines)
