"""A `hexbuild lab run` request as the steps of a job: each kind rendered by the code of the
local command it stands for (`run completion`, `bench`, `test ops`, `test ppl`) against the
package as the job will unpack it on the board (board.PackageBoard), so the lab runs the same
commands a local run would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import runner
from ..errors import UsageError
from .board import INSTALL, JOB_DIR, MODELS, PackageBoard
from .job import Step, step_name

KINDS = ("completion", "bench", "ops", "ppl")


@dataclass
class LabRequest:
    """What to run in each job (the kind's own options) and on what."""

    kind: str  # completion | bench | ops | ppl
    package: Path
    model: str | None = None  # a local file (shipped), an http(s) URL (downloaded by the job) or a path on the board
    ndev: int | None = None
    htp_devices: str | None = None
    knobs: list[tuple[str, str]] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # completion and bench: the program's own arguments
    threads: int | None = None  # None: runner/defaults.py decides (a lab board: llama.cpp's scripts' 6)
    ubatch: int = 1024
    prompt_file: str | None = None
    bundle_runtime: bool = False
    sysroot: str = ""
    ops: Any = None  # test ops: a checks.ops.OpsRequest (its target unused)
    ppl: Any = None  # test ppl: a checks.ppl.PplRequest


@dataclass
class Planned:
    """The job's content: its steps, and the files that travel with the package."""

    steps: list[Step]
    manifest: dict[str, Any]  # the install's device manifest, as deploy writes it
    package: Any  # deploy.Package
    files: dict[str, Path] = field(default_factory=dict)  # path in the job tarball -> local file
    download: dict[str, str] | None = None  # {"name", "url", "file"}: the model, fetched by the job
    models: dict[str, str | None] = field(default_factory=dict)  # model path as rendered -> sha256
    bench: Any = None  # bench.matrix.BenchRequest and its planned configuration

    def close(self) -> None:
        self.package.close()


def install_manifest(pkg, *, bundle_runtime: bool = False, sysroot: str = "") -> tuple[dict[str, Any], dict]:
    """The device manifest of the install the job makes (what `hexbuild deploy` writes into
    ``.hexbuild/manifest.json``), and the files it holds (package files, and the runtime with
    ``bundle_runtime``)."""
    from ..deploy import DeployOptions, release_id
    from ..deploy.apply import device_manifest

    want = dict(pkg.files)
    opts = DeployOptions()
    if bundle_runtime:
        from ..deploy.runtime import bundle
        from ..toolchain.sysroot import resolve_sysroot

        files, record = bundle(pkg, resolve_sysroot(sysroot))
        want.update(files)
        opts = DeployOptions(bundle_runtime=True, runtime_files=files, runtime=record)
    manifest = json.loads(device_manifest(want, pkg, release_id(want), None, opts))
    return manifest, want


def android_refused(package: Path) -> UsageError:
    return UsageError(f"{package} is an Android package: a lab job runs a Linux package's programs on a "
                      "board, and an Android program needs a phone",
                      hint="build the Linux package (hexbuild build --os linux), or run on a phone (hexbuild run "
                           "completion --target adb)")


def check_package(package: Path) -> None:
    """What a lab job can run, said before the lab is contacted (its token, its queue): a Linux
    package; an Android one is exit 2 here, from the manifest alone. A package whose manifest
    does not say is read whole by ``plan``, which refuses it the same way."""
    import tarfile

    from ..artifacts.manifest import parse_manifest, read_package_manifest, require_llama_package

    meta = None
    if package.is_dir():
        from ..deploy.runtime import os_of

        meta = read_package_manifest(require_llama_package(package)) or {}
        bins = package / "bin"
        programs = {f"bin/{p.name}": p for p in bins.iterdir() if p.is_file()} if bins.is_dir() else {}
        meta = {**meta, "os": os_of(meta, programs)}  # no manifest: the programs' interpreter says
    elif tarfile.is_tarfile(package):
        with tarfile.open(package, "r:*") as tar:
            member = next((m for m in tar.getmembers() if m.isfile() and m.name.lstrip("./").count("/") <= 1
                           and m.name.endswith("manifest.json")), None)
            f = tar.extractfile(member) if member is not None else None
            meta = parse_manifest(f.read(), package) if f is not None else None
    elif not package.exists():
        raise UsageError(f"package not found: {package}")
    if isinstance(meta, dict) and meta.get("os") == "android":
        raise android_refused(package)


def plan(req: LabRequest, spec: str) -> Planned:
    """The steps of one job for ``req``; ``spec`` names the boards (lava:TYPE) in the records."""
    from ..deploy import load_package
    from ..deploy.runtime import package_os

    if req.kind not in KINDS:
        raise UsageError(f"a lab job runs one of {', '.join(KINDS)}, not {req.kind!r}")
    pkg = load_package(req.package)
    try:
        if package_os(pkg) == "android":
            raise android_refused(req.package)
        manifest, want = install_manifest(pkg, bundle_runtime=req.bundle_runtime, sysroot=req.sysroot)
        out = Planned([], manifest, pkg)
        out.files.update({f"llama.cpp/{rel}": f.local for rel, f in want.items()})
        board = PackageBoard(spec, manifest)
        model = _model(req, out)
        if req.kind == "completion":
            out.steps = [_run_step(board, req, model, out)]
        elif req.kind == "bench":
            out.steps = _bench_steps(board, req, model, out)
        elif req.kind == "ops":
            out.steps = _ops_steps(board, req)
        else:
            out.steps = _ppl_steps(board, req, model, out)
        return out
    except BaseException:
        pkg.close()
        raise


def _model(req: LabRequest, out: Planned) -> str | None:
    """The model as the job's commands name it; a local file travels in the tarball, a URL is
    fetched by the job, anything else is a path on the board."""
    m = req.model
    if not m:
        return None
    if m.startswith(("http://", "https://")):
        name = m.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or "model.gguf"
        out.download = {"name": "download-model", "url": m, "file": f"{MODELS}/{name}"}
        out.models[f"{MODELS}/{name}"] = None
        return name
    local = Path(m).expanduser()
    if local.exists():
        return _ship_model(local, out)
    if m.startswith("/"):
        out.models[m] = None
        return m  # already on the board
    raise UsageError(f"model not found: {m}", hint="give a local .gguf (it travels with the job), an http(s) URL "
                                                   "the board can fetch, or an absolute path on the board")


def _ship_model(local: Path, out: Planned) -> str:
    from ..deploy.models import local_model

    model = local_model(local)  # a GGUF, or one line (exit 2); its sha256 through the hash cache
    out.files[f"gguf/{model.name}"] = model.local
    out.models[f"{MODELS}/{model.name}"] = model.sha256
    return model.name


def _rr(req: LabRequest, **kw: Any) -> runner.RunRequest:
    base = dict(target="lab", dest=INSTALL, models_dir=MODELS, ndev=req.ndev, devices=req.htp_devices,
                knobs=req.knobs, extra=req.extra, threads=req.threads, ubatch=req.ubatch)
    base.update(kw)
    return runner.RunRequest(**base)


def _ship_upload(out: Planned, upload: tuple[Path, str] | None) -> None:
    """A local prompt or text file the command reads travels in the tarball, where it names it."""
    if upload:
        local, remote = upload
        if not remote.startswith(JOB_DIR + "/"):
            raise UsageError(f"{local} would go outside the job's directory ({remote})")
        out.files[remote[len(JOB_DIR) + 1:]] = local


def _run_step(board: PackageBoard, req: LabRequest, model: str | None, out: Planned) -> Step:
    prepared = runner.prepare_on(board, _rr(req, kind="completion", model=model, prompt_file=req.prompt_file))
    _ship_upload(out, prepared.prompt_upload)
    if prepared.cpu_only:
        prepared.cpu_only.say()
    return Step("run", prepared.invocation, title=f"{prepared.invocation.tool} (hexbuild run completion)")


def _bench_steps(board: PackageBoard, req: LabRequest, model: str | None, out: Planned) -> list[Step]:
    from ..bench import matrix

    if not model:
        raise UsageError("no model: a bench job needs --model")
    breq = matrix.BenchRequest(targets=[board.spec], models=[model], ndev=[req.ndev] if req.ndev else
                               ([] if req.htp_devices else [1]), devices=[req.htp_devices] if req.htp_devices else [],
                               ubatch=[req.ubatch], threads=[req.threads] if req.threads else [], knobs=req.knobs,
                               extra=req.extra, dest=INSTALL, models_dir=MODELS,
                               sessions_given=bool(req.ndev or req.htp_devices))
    planned = matrix.plan_on(board, board.spec, breq)
    out.bench = (breq, planned)
    return [Step(step_name("bench", str(i) if len(planned) > 1 else ""), p.invocation,
                 title="llama-bench (hexbuild bench)", role="bench",
                 meta={"ndev": p.ndev, "select": p.select, "model": p.model})
            for i, p in enumerate(planned, 1)]


def _ops_steps(board: PackageBoard, req: LabRequest) -> list[Step]:
    from ..checks import ops

    oreq = _with_install(req.ops)
    return [Step(step_name("ops", name), ops.device_invocation(board, oreq, name),
                 title=f"test-backend-ops on {name} (hexbuild test ops)", role="ops", session=name)
            for name in ops.sessions_to_test(board, oreq)]


def _ppl_steps(board: PackageBoard, req: LabRequest, model: str | None, out: Planned) -> list[Step]:
    from ..checks import ppl

    preq = _with_install(req.ppl)
    if model:
        preq.model = model
    if not preq.model:
        raise UsageError("no model: a test ppl job needs --model")
    if preq.reference_model:
        ref = Path(preq.reference_model).expanduser()
        if ref.exists():
            preq.reference_model = _ship_model(ref, out)
    steps = []
    for label, cpu in (("htp", False), ("cpu", True)):
        inv, upload = ppl.invocation(board, preq, cpu=cpu)
        _ship_upload(out, upload)
        steps.append(Step(f"ppl-{label}", inv, title=f"llama-perplexity on the {label.upper()} (hexbuild test ppl)",
                          role=f"ppl-{label}"))
    return steps


def _with_install(r: Any) -> Any:
    """A test request aimed at the job's install."""
    from dataclasses import replace

    return replace(r, target="lab", dest=INSTALL, models_dir=MODELS)
