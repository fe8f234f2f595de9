"""The stages of a release (build, verify, package, checksums, deploy, smoke): a mixin of
Release, each method filling its Stage or raising the error that fails it."""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from pathlib import Path
from typing import Any

from .. import __version__, ci, errors
from ..config import Settings
from ..errors import HexbuildError
from ..ui import human_size, ui
from .options import MANIFEST, SCHEMA, SUMS, ReleaseOptions
from .report import Stage, _annotate_each, _Built, _verify_summary, _verify_text

# A smoke command is a quick check, not a benchmark; its log's tail is shown in the CI log.
SMOKE_TIMEOUT = 600.0
SMOKE_LOG_LINES = 40


class ReleaseStages:
    settings: Settings
    opts: ReleaseOptions
    dist: Path
    built: dict[str, _Built]
    assets: list[dict[str, Any]]
    devices: dict[str, dict[str, Any]]
    targets: list[Any]
    revision: str | None
    prebuilt: dict[str, Path]

    def _build(self, stage: Stage) -> None:
        from ..artifacts import load_meta

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
        from ..build import BuildOptions, run_build

        opts = BuildOptions.from_settings(self.settings.with_flags({"build.os": os_name}))
        opts.force = self.opts.force
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
        from ..toolchain.spec import WORKSPACE

        diags = ci.annotate_build_log(err.details, Path(self.settings["source"]).expanduser(), WORKSPACE)
        if diags:
            err.details = {**err.details, "diagnostics": [d.to_json() for d in diags][:50]}

    def _verify(self, stage: Stage) -> None:
        """The build's own verification when it ran one (its warnings were already raised),
        else hexbuild verify's checks on the prebuilt package."""
        from ..artifacts import verify_package

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
        if self.opts.strict:  # the kernel gate of hexbuild inspect: in-loop HVX spills, helpers in hot loops
            from ..artifacts.inspect.gate import add_to_report
            report = add_to_report(report, built.path, self.settings, lambda m: ui.warn(f"verify ({built.os}): {m}"))
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
        from ..artifacts import default_name, is_cpu_only, write_package

        built = self.built[stage.os]  # type: ignore[index]
        meta = dict(built.meta)
        meta["os"] = built.os
        name = default_name(built.os, (meta.get("llama_cpp") or {}).get("revision"),
                            cpu_only=is_cpu_only(built.path, meta))
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
        from ..paths import atomic_write

        manifest = {"schema": SCHEMA, "hexbuild_version": __version__, "llama_cpp_revision": self.revision,
                    "assets": [{k: a[k] for k in ("name", "os", "size", "sha256", "files", "htp_versions",
                                                  "llama_cpp", "image")} for a in self.assets]}
        manifest_bytes = (json.dumps(manifest, indent=2) + "\n").encode()
        atomic_write(self.dist / MANIFEST, manifest_bytes, mode=0o644)
        entries = [(a["sha256"], a["name"]) for a in self.assets]
        entries.append((hashlib.sha256(manifest_bytes).hexdigest(), MANIFEST))
        sums = "".join(f"{digest}  {name}\n" for digest, name in sorted(entries, key=lambda e: e[1]))
        atomic_write(self.dist / SUMS, sums, mode=0o644)
        for name, data in ((MANIFEST, manifest_bytes), (SUMS, sums.encode())):
            stage.artifacts.append({"name": name, "path": str(self.dist / name), "size": len(data),
                                    "sha256": hashlib.sha256(data).hexdigest()})
        stage.summary = f"{len(entries)} files in {SUMS}"

    def _deploy(self, stage: Stage) -> None:
        """Deploy the tarball just written (what ships is what gets tested) to the targets of
        its OS, all in parallel."""
        from ..deploy import DeployOptions, deploy

        s = self.settings
        options = DeployOptions(dest=s["deploy.dest"] or None, models_dir=s["deploy.models_dir"] or None,
                                ndev=s["deploy.ndev"], parallel=s["deploy.parallel"],
                                bundle_runtime=s["deploy.bundle_runtime"], sysroot=s["linux.sysroot"])
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
        from .. import runner

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
            from ..results.dispatch import hint_for

            error = errors.CpuFallback if len(cpu_fallbacks) == len(failures) else errors.RemoteFailed
            hint = hint_for(cpu_fallbacks[0].get("code"), cpu_fallbacks[0].get("arch")) if cpu_fallbacks else None
            raise error(f"smoke test failed on {len(failures)} target(s): {failures[0]}", hint=hint,
                        details={"failures": failures})

    def _test(self, stage: Stage) -> None:
        """`hexbuild test ops` / `test ppl` on every target deployed to (or, with --lab, as jobs on
        the lab's boards); results under dist/tests/."""
        from ..checks import ops, ppl

        if self.opts.lab is not None:
            return self._lab_test(stage)
        failures: list[str] = []
        results: dict[str, Any] = {}
        for spec, dev in self.devices.items():
            if dev.get("deploy") != "ok":
                continue
            slug = "".join(c if c.isalnum() or c in "._-" else "_" for c in spec)
            for kind in self.opts.tests:
                out = str(self.dist / "tests" / f"{kind}-{slug}")
                if kind == "ops":
                    doc = ops.run(ops.OpsRequest(target=spec, dest=self.settings["deploy.dest"],
                                                 models_dir=self.settings["deploy.models_dir"], out=out), self.settings)
                else:
                    doc = ppl.run(ppl.PplRequest(target=spec, model=self.opts.test_model or "",
                                                 text=self.opts.test_text or "", dest=self.settings["deploy.dest"],
                                                 models_dir=self.settings["deploy.models_dir"], out=out), self.settings)
                results[f"{kind} {spec}"] = {"ok": doc["ok"], "reason": doc["reason"], "files": doc["files"]}
                if not doc["ok"]:
                    failures.append(f"{spec}: test {kind}: {doc['reason']}")
        stage.data["tests"] = results
        stage.summary = f"{sum(r['ok'] for r in results.values())}/{len(results)} passed"
        _annotate_each("test", failures)
        if failures:
            raise errors.TestsFailed(f"tests failed on {len(failures)} target run(s): {failures[0]}",
                                     details={"failures": failures})

    def _lab_test(self, stage: Stage) -> None:
        """The test gates on lab boards: one `hexbuild lab run -- test ops|ppl` per kind and Linux
        package. A failed test is 13; a lab that failed the job is 16 (not a verdict on the build)."""
        from dataclasses import replace

        from ..checks import ops, ppl
        from ..lab import plan as lab_plan, session

        failures: list[str] = []
        faults: list[errors.HexbuildError] = []
        results: dict[str, Any] = {}
        for asset in (a for a in self.assets if a["os"] == "linux"):
            for kind in self.opts.tests:
                req = lab_plan.LabRequest(
                    kind=kind, package=Path(asset["path"]), model=self.opts.test_model if kind == "ppl" else None,
                    ops=ops.OpsRequest(target="lab") if kind == "ops" else None,
                    ppl=ppl.PplRequest(target="lab", model="", text=self.opts.test_text or "") if kind == "ppl" else None)
                opts = replace(self.opts.lab, results_dir=str(self.dist / "tests" / f"{kind}-lab"))
                ui.info(f"{asset['name']}: test {kind} on the lab's {opts.device_type} boards")
                for o in session.run(req, opts):
                    where = f"{kind} {o.doc.get('target') or opts.device_type} (job {o.job_id})"
                    results[where] = {"ok": o.error is None, "reason": o.doc.get("reason") or o.doc.get("error"),
                                      "files": o.doc.get("files"), "job_url": o.doc.get("job_url")}
                    if isinstance(o.error, errors.LabFault):
                        faults.append(o.error)
                    elif o.error is not None:
                        failures.append(f"{where}: {o.error.message}")
        stage.data["tests"] = results
        stage.summary = f"{sum(r['ok'] for r in results.values())}/{len(results)} passed on the lab"
        _annotate_each("test", failures + [f.message for f in faults])
        if failures:
            raise errors.TestsFailed(f"tests failed on {len(failures)} lab job(s): {failures[0]}",
                                     details={"failures": failures})
        if faults:
            raise faults[0]

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

