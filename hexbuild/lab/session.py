"""`hexbuild lab run`: the jobs of one request, from the tarball to the documents.

Plan the steps, pack and serve (or publish) the tarball, validate the job with the lab's own
schema, submit it N times (``--devices N``: N boards of the type at once), then wait with a
queue timeout of our own (a board whose device dictionary does not validate goes Bad without a
word, and a job for it stays Submitted forever), and map every finished job. Ctrl-C (or
SIGTERM) cancels every job not finished yet; the artifact server stops in every case.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HexbuildError, Interrupted, JobIncomplete, LabFault, LabTimeout, LabUnreachable, UsageError
from ..ui import ui
from . import bundle, definition, job as jobmod
from .client import LavaClient
from .joblog import parse
from .outcome import JobOutcome, job_info, lava_error, map_job
from .plan import LabRequest, Planned, plan

GRACE_S = 300.0  # past the job's own timeout, LAVA has had its chance to end it
UNREACHABLE_S = 120.0  # how long the lab may not answer (a restart) before hexbuild gives up on it
QUEUED = ("Submitted", "Scheduling", "Scheduled")  # no board has started it yet


@dataclass
class LabOptions:
    url: str
    token: str
    device_type: str
    count: int = 1  # --devices N
    tags: list[str] = field(default_factory=list)
    timeout_s: float = 3600.0
    queue_timeout_s: float = 3600.0
    poll_s: float = 5.0
    serve: str | None = None  # HOST:PORT
    publish: str | None = None  # a command
    artifact_url: str | None = None
    results_dir: str = "hexbuild-results"
    db: str | None = None
    allow_cpu_fallback: bool = False
    board_os: str = "debian"
    prompts: list[str] = field(default_factory=lambda: list(definition.DEFAULT_PROMPTS))
    priority: str = "medium"


def options(s, **kw: Any) -> LabOptions:
    """The lab settings (lab.*, run.results_dir) as session options; ``kw`` overrides them."""
    prompts = kw.pop("prompts", None)
    if "timeout_s" in kw:
        definition.check_timeout(kw["timeout_s"])
    return LabOptions(url=s["lab.url"], token=s["lab.token"], device_type=s["lab.device_type"],
                      queue_timeout_s=s["lab.queue_timeout"], poll_s=s["lab.poll"],
                      serve=s["lab.serve_artifacts"] or None, publish=s["lab.publish"] or None,
                      artifact_url=s["lab.artifact_url"] or None, results_dir=s["run.results_dir"],
                      prompts=list(prompts) if prompts else list(definition.DEFAULT_PROMPTS), **kw)


def spec_of(device: str | None, device_type: str) -> str:
    """How a lab board appears in records (target, bench history): its name in the lab."""
    return f"lava:{device or device_type}"


def _args(req: LabRequest, opts: LabOptions, planned: Planned) -> dict[str, Any]:
    """What the result mapping needs besides the steps (kept in the job's request)."""
    from ..bench.history import package_digest

    m = planned.manifest
    llama = m.get("llama_cpp") or {}
    image = m.get("image") or {}
    revision = llama.get("revision") or (llama.get("plan_rules") or {}).get("revision")
    args: dict[str, Any] = {"device_type": opts.device_type, "model_sha256": planned.models,
                            "context": {"revision": revision,
                                        "package_sha256": package_digest(m), "htp_arch": m.get("htp_arch"),
                                        "toolchain": image.get("digest") or image.get("reference") or m.get("engine")}}
    if req.model and Path(req.model).expanduser().is_file():
        args["gguf"] = str(Path(req.model).expanduser().resolve())  # the roofline reads it, as run's does
    if req.kind == "bench" and planned.bench:
        breq, _ = planned.bench
        args.update(models=breq.models, ubatch=breq.ubatch, threads=breq.threads, knobs=breq.knobs, extra=breq.extra,
                    db=opts.db, allow_cpu_fallback=opts.allow_cpu_fallback)
    elif req.kind == "ops":
        o = req.ops
        args.update(ops=o.ops, types=o.types, ndev=o.ndev, devices=o.devices)
    elif req.kind == "ppl":
        p = req.ppl
        args.update(model=req.model or p.model, text=p.text, reference_model=p.reference_model, chunks=p.chunks,
                    ctx=p.ctx, max_diff=p.max_diff)
    return args


def tarball_members(planned: Planned, script: str, title: str) -> list[bundle.Member]:
    pkg_files = planned.package.files
    out = [bundle.data_member(jobmod.TESTDEF, jobmod.test_definition(title).encode()),
           bundle.data_member(jobmod.SCRIPT, script.encode(), 0o755),
           bundle.data_member("llama.cpp/.hexbuild/manifest.json",
                              (json.dumps(planned.manifest, indent=1) + "\n").encode())]
    for name, local in sorted(planned.files.items()):
        rel = name[len("llama.cpp/"):] if name.startswith("llama.cpp/") else None
        f = pkg_files.get(rel) if rel else None
        if f is not None:
            out.append(bundle.file_member(name, local, f.mode, sha256=f.sha256))
        else:
            out.append(bundle.file_member(name, local, 0o755 if name.startswith("llama.cpp/runtime/") else 0o644))
    return out


class Session:
    """One `lab run`: its client, its artifact server and the jobs it submitted."""

    def __init__(self, req: LabRequest, opts: LabOptions) -> None:
        if not opts.token:
            raise UsageError("no lab token: set HEXBUILD_LAB_TOKEN (or lab.token)",
                             hint="a token of a LAVA user: API → Tokens in the lab's web UI")
        if opts.count < 1:
            raise UsageError("--devices must be at least 1")
        self.req, self.opts = req, opts
        self.client = LavaClient(opts.url, opts.token)
        self.server: bundle.ArtifactServer | None = None
        self.jobs: dict[int, dict[str, Any]] = {}
        self.finished: set[int] = set()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.client.close()

    # -- before the jobs ---------------------------------------------------------------------
    def prepare(self) -> tuple[Planned, str]:
        """The planned job and its definition (JSON); the tarball packed and reachable."""
        opts = self.opts
        planned = plan(self.req, spec_of(None, opts.device_type))
        try:
            title = f"{self.req.kind} on {opts.device_type}"
            request = jobmod.request_doc(self.req.kind, planned.steps, args=_args(self.req, opts, planned))
            script = jobmod.script(title, planned.steps, request, download=planned.download)
            tarball = bundle.make(tarball_members(planned, script, title))
            url = self._reach(tarball)
            revision = request["args"]["context"].get("revision") or "?"
            spec = definition.JobSpec(device_type=opts.device_type, artifact_url=url, tags=opts.tags,
                                      name=f"hexbuild {self.req.kind} {revision}", timeout_s=opts.timeout_s,
                                      board_os=opts.board_os, prompts=opts.prompts, priority=opts.priority,
                                      metadata={"hexbuild.kind": self.req.kind, "hexbuild.revision": revision})
            return planned, definition.dump(definition.board_job(spec))
        except BaseException:
            planned.close()
            raise

    def _reach(self, tarball: Path) -> str:
        opts = self.opts
        if opts.serve:
            host, port = bundle.parse_serve(opts.serve)
            bundle.check_serve(host, opts.artifact_url)
            self.server = bundle.ArtifactServer(tarball, host, port, url_template=opts.artifact_url)
            ui.info(f"serving the job tarball on {host}:{self.server.port} while the jobs run")
            return self.server.url
        if opts.publish:
            if not opts.artifact_url:
                raise UsageError("--publish needs --artifact-url TEMPLATE: where the workers download what it "
                                 "published")
            return bundle.publish(tarball, opts.publish, opts.artifact_url)
        raise UsageError("the lab's workers must download the job: give --serve-artifacts HOST:PORT, or "
                         "--publish CMD with --artifact-url URL")

    def check_token(self) -> None:
        """The lab reached and the token taken, before anything is packed (a model can be GBs)."""
        if not self.client.whoami():
            raise LabFault(f"the lab at {self.client.base} took the token for an anonymous user",
                           hint="check HEXBUILD_LAB_TOKEN")

    def submit(self, definition_text: str) -> list[int]:
        why = self.client.validate(definition_text)
        if why:
            raise LabFault(f"the lab at {self.client.base} refused the job: {why}",
                           hint="check --device-type, --tags and --prompt")
        for _ in range(self.opts.count):
            for jid in self.client.submit(definition_text):
                self.jobs[jid] = {"submitted": time.monotonic(), "started": None, "job": None, "error": None}
                ui.info(f"submitted job {jid}: {self.client.job_url(jid)}")
        return list(self.jobs)

    # -- waiting ---------------------------------------------------------------------------------
    def wait(self) -> None:
        """Until every job has finished, timed out in the queue or run past its timeout."""
        opts = self.opts
        states: dict[int, str] = {}
        lost: float | None = None  # since when the lab has not answered
        while len(self.finished) < len(self.jobs):
            for jid, rec in self.jobs.items():
                if jid in self.finished:
                    continue
                try:
                    job = self.client.job(jid)
                except LabUnreachable as e:  # a server restart: the jobs go on without us
                    lost = lost or time.monotonic()
                    if time.monotonic() - lost > UNREACHABLE_S:
                        raise
                    ui.warn(f"{e.message}; trying again for {UNREACHABLE_S - (time.monotonic() - lost):.0f}s")
                    break
                lost = None
                rec["job"] = job
                state = str(job.get("state"))
                if states.get(jid) != state:
                    states[jid] = state
                    where = f" on {job.get('actual_device')}" if job.get("actual_device") else ""
                    ui.info(f"job {jid}: {state}{where}")
                now = time.monotonic()
                if state == "Finished":
                    self.finished.add(jid)
                elif state in QUEUED and now - rec["submitted"] > opts.queue_timeout_s:
                    self._give_up(jid, LabTimeout(
                        f"job {jid} waited {opts.queue_timeout_s:g}s for a {opts.device_type} board and none took it "
                        "(no Good board of that type, or one whose device dictionary does not validate)",
                        hint=f"see the devices of type {opts.device_type} in the lab; raise --queue-timeout if they "
                             "are busy"))
                elif state in ("Running", "Canceling"):
                    rec["started"] = rec["started"] or now
                    if now - rec["started"] > opts.timeout_s + GRACE_S:
                        self._give_up(jid, LabTimeout(f"job {jid} ran past its timeout ({opts.timeout_s:g}s) and "
                                                      "the lab did not end it"))
            if len(self.finished) < len(self.jobs):
                time.sleep(opts.poll_s)

    def _give_up(self, jid: int, error: HexbuildError) -> None:
        try:
            self.client.cancel(jid)
        except HexbuildError as e:
            ui.warn(f"cancelling job {jid}: {e.message}")
        self.jobs[jid]["error"] = error
        self.finished.add(jid)
        ui.warn(error.message)

    def cancel_unfinished(self) -> None:
        for jid in self.jobs:
            if jid in self.finished:
                continue
            try:
                self.client.cancel(jid)
                ui.warn(f"cancelled job {jid} ({self.client.job_url(jid)})")
            except HexbuildError as e:
                ui.warn(f"could not cancel job {jid}: {e.message}")

    # -- after -----------------------------------------------------------------------------------
    def outcome(self, jid: int) -> JobOutcome:
        rec = self.jobs[jid]
        return job_outcome(self.client, jid, results_dir=Path(self.opts.results_dir), timeout_error=rec["error"],
                           allow_cpu_fallback=self.opts.allow_cpu_fallback)


def job_outcome(client: LavaClient, jid: int, *, results_dir: Path, timeout_error: HexbuildError | None = None,
                allow_cpu_fallback: bool = False, db: str | None = None) -> JobOutcome:
    """One job's document and the code the local command would exit with; ``db`` (when given)
    replaces the history database the job's request names ('' for none)."""
    job = client.job(jid)
    stem = f"lava-job{jid}"
    results_dir.mkdir(parents=True, exist_ok=True)
    log_text = ""
    if job.get("start_time"):
        try:
            log_text = client.logs(jid)
        except LabFault as e:
            ui.warn(f"job {jid}: no log ({e.message})")
    lava_log = None
    if log_text:
        from ..paths import atomic_write

        lava_log = results_dir / f"{stem}.lava.yaml"
        atomic_write(lava_log, client.scrub(log_text), mode=0o644)
    info = job_info(client, job, str(lava_log) if lava_log else None)
    tests = client.tests(jid) if job.get("start_time") else []
    log = parse(log_text)
    spec = spec_of(job.get("actual_device"), str(job.get("requested_device_type") or "board"))
    fault: HexbuildError | None = timeout_error
    if fault is None and job.get("health") != "Complete":
        why = lava_error(tests, log) or job.get("failure_comment") or "no reason given"
        fault = JobIncomplete(f"job {jid}{' on ' + str(job.get('actual_device')) if job.get('actual_device') else ''} "
                              f"ended {job.get('health')}: {why}", hint=f"the job's log: {info['url']}")
    if log.request is None:
        doc = {"target": spec, "error": (fault.message if fault else "the job printed no request: not a hexbuild job?")}
        err = fault or JobIncomplete(f"job {jid} ran no hexbuild job script", hint=info["url"])
        return JobOutcome(jid, {**doc, "job_url": info["url"], "job": info}, err.exit_code, err)
    if db is not None:
        log.request.setdefault("args", {})["db"] = db
    doc, error, human = map_job(log.request, log, tests, spec=spec, results_dir=results_dir,
                                stem=f"{time.strftime('%Y%m%d-%H%M%S')}-{stem}", allow_cpu_fallback=allow_cpu_fallback)
    doc = {**doc, "job_url": info["url"], "job": info}
    if fault is not None:  # the steps it did run are in the document; the job is what failed
        doc["error"] = fault.message
        return JobOutcome(jid, doc, fault.exit_code, fault, human)
    return JobOutcome(jid, doc, error.exit_code if error else 0, error, human)


def run(req: LabRequest, opts: LabOptions) -> list[JobOutcome]:
    """Everything `lab run` does; the outcomes in submission order."""
    from .plan import check_package

    check_package(req.package)  # bad input is exit 2, whatever the lab's state
    session = Session(req, opts)
    try:
        session.check_token()
        planned, text = session.prepare()
        try:
            if not planned.steps:
                raise _nothing_to_run(req)
            session.submit(text)
            try:
                session.wait()
            except KeyboardInterrupt:
                session.cancel_unfinished()
                raise Interrupted("interrupted; the lab's jobs were cancelled") from None
            return [session.outcome(jid) for jid in session.jobs]
        finally:
            planned.close()
    except KeyboardInterrupt:
        session.cancel_unfinished()
        raise Interrupted("interrupted; the lab's jobs were cancelled") from None
    finally:
        session.close()


def raise_first(outcomes: list[JobOutcome]) -> None:
    """The local command's own error when a job found something (a failed test, a fallback, a
    program's exit code), else the lab's fault (16); the others are one warning line each."""
    found = [o for o in outcomes if o.error is not None and not isinstance(o.error, LabFault)]
    faults = [o for o in outcomes if isinstance(o.error, LabFault)]
    for o in (found + faults)[1:]:
        ui.warn(f"job {o.job_id}: {o.error.message}")  # type: ignore[union-attr]
    if found or faults:
        raise (found or faults)[0].error  # type: ignore[misc]


def compare(outcomes: list[JobOutcome], results_dir: Path, baseline: str, fail_below: float | None) -> None:
    """`bench compare --fail-below` of each bench job's rows against ``baseline`` (exit 11)."""
    from .. import runner
    from ..bench import compare as bench_compare, history

    for o in outcomes:
        if o.error is not None or not o.doc.get("bench_id"):
            continue
        db = Path(o.doc.get("db") or history.default_path(results_dir))
        # the boards of a device type are one population: the lab picks one of them per job
        bench_compare.run_compare(db=db, baseline=baseline, candidate=o.doc["bench_id"], by=None,
                                  fail_below=fail_below, boards_as_one=True,
                                  out=results_dir / f"compare-{runner._timestamp()}-job{o.job_id}")


def _nothing_to_run(req: LabRequest) -> HexbuildError:
    from ..errors import TestsFailed

    return TestsFailed(f"nothing to test on the lab: the package {req.package} has no HTP session (CPU only), "
                       "and test-backend-ops compares HTP sessions with the CPU")
