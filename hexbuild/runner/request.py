"""The whole `hexbuild run`: a request rendered against what is deployed on the target, then run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.npu import CpuOnly, cpu_only_note, sessions_refused
from ..errors import CpuFallback, EnvironmentMissing, RemoteFailed, UsageError, signal_name
from ..ui import ui
from .commands import Invocation, render
from .defaults import run_defaults
from .execution import RunRecord, _slug, execute
from .htp_sessions import Sessions, check_sessions, sessions
from .install import (MANIFEST, PROMPTS_DIR, cpu_only, default_dest, default_models_dir,
                      installed_tools, loader_of, read_manifest, through_loader)
from .knobs import knob_env
from .revision import Revision


@dataclass
class RunRequest:
    kind: str
    target: str
    dest: str = ""
    models_dir: str = ""
    ndev: int | None = None
    devices: str | None = None
    model: str | None = None
    prompt_file: str | None = None
    knobs: list[tuple[str, str]] = field(default_factory=list)
    # GGML_HEXAGON_* values a tool needs, set when the deployed revision reads them (never an error)
    tool_knobs: dict[str, str] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)
    threads: int | str | None = None  # what the user gave (a str may be llama-bench's list "4,6"); None: defaults.py decides
    ubatch: int | str = 1024
    batch: str | None = None
    bench_output: str | None = None  # llama-bench -o, forced by hexbuild bench
    results_dir: str = "hexbuild-results"
    timeout: float | None = None  # None: RUN_TIMEOUT (targets' own default is meant for short calls)
    cpu: bool = False  # no HTP device whatever the package holds (--allow-cpu-fallback's second run)


@dataclass
class Prepared:
    """A target opened and a request rendered against what is deployed on it."""

    target: Any
    invocation: Invocation
    prompt_upload: tuple[Path, str] | None = None  # local prompt file → its path on the device
    sessions: list[str] = field(default_factory=list)  # the HTP devices selected (none: CPU only)
    cpu_only: CpuOnly | None = None  # the deployed package has no NPU libraries: the line that says so


def open_target(spec: str, settings):
    from ..targets import parse_target

    if not spec:
        raise UsageError("no target: give -t TARGET (adb, adb:SERIAL, ssh://HOST, local:DIR) or set run.target")
    return parse_target(spec, settings)


def prepare(req: RunRequest, settings, *, offline_ok: bool = False) -> Prepared:
    """Open the target, read what the deployed revision understands and render the invocation.
    With ``offline_ok`` (for --print) an unreachable target falls back to forms every revision
    understands."""
    target = open_target(req.target, settings)
    try:
        return prepare_on(target, req, offline_ok=offline_ok)
    except BaseException:
        target.close()
        raise


def prepare_on(target, req: RunRequest, *, offline_ok: bool = False,
               read: tuple[str, Any, set[str]] | None = None) -> Prepared:
    """``prepare`` on a target the caller has open (and closes): one connection for several runs.
    ``read``: (dest, its manifest, the installed tools) the caller has just read from the target."""
    os_name = getattr(target, "os", "android") or "android"
    dest = req.dest or default_dest(target)
    models_dir = req.models_dir or default_models_dir(target)
    manifest, installed, reachable = None, None, True
    try:
        # "~/llama.cpp" quoted as an argument would not expand: resolve it on the target
        dest, models_dir = target.expand(dest), target.expand(models_dir)
        if read is not None and read[0] == dest:
            manifest, installed = read[1], set(read[2])
        else:
            manifest = read_manifest(target, dest)
            installed = installed_tools(manifest)
            if installed is None:
                installed = set(target.list_files(f"{dest}/bin", hashes=False))
    except (EnvironmentMissing, RemoteFailed):
        if not offline_ok:
            raise
        reachable = False
        ui.warn(f"{req.target} is not reachable: showing the command in forms every revision understands")
    if reachable and not installed:
        if not offline_ok:
            raise EnvironmentMissing(f"nothing is installed at {target.spec}:{dest}",
                                     hint="run hexbuild deploy first, or give --dest")
        ui.warn(f"nothing is installed at {target.spec}:{dest}")
        installed = None
    rev = Revision.from_facts((manifest or {}).get("llama_cpp"))
    if not rev.known and reachable:
        ui.detail(f"{dest}/{MANIFEST} not found: using forms every revision understands")

    sess = sessions(rev, ndev=req.ndev, devices=req.devices)
    no_htp = cpu_only(manifest)
    if req.cpu:
        sess = Sessions({}, [])
    if no_htp:
        if req.ndev or req.devices:  # asked for explicitly: nothing here can open them
            where = target.spec if dest in target.spec else f"{target.spec}:{dest}"
            message, hint = sessions_refused(where, "--devices" if req.devices else "--ndev")
            raise CpuFallback(message, hint=hint)
        sess = Sessions({}, [])
    if sess.count > 1 and reachable:
        arch = (manifest or {}).get("htp_arch")
        if not arch:
            try:
                arch = target.probe(dest).htp_arch
            except (EnvironmentMissing, RemoteFailed):
                if not offline_ok:
                    raise
        check_sessions(sess.count, os_name=os_name, htp_arch=arch)
    knobs = knob_env(req.knobs, rev)
    for name, value in req.tool_knobs.items():
        if rev.env_vars is None or name in rev.env_vars:
            knobs.setdefault(name, value)  # the user's --hex-* wins
    if rev.style == "run.py" and "GGML_HEXAGON_OPPOLL" in (rev.env_vars or []):
        knobs.setdefault("GGML_HEXAGON_OPPOLL", "1")  # run.py's default
    if sess.count and reachable and not offline_ok and getattr(getattr(target, "caps", None), "virtual_npu", False):
        target.check_npu_install(dest, manifest, knobs)  # qemu+npu: what its DSP cannot run, before any session

    prompt_upload, prompt_path = None, None
    if req.prompt_file:
        local = Path(req.prompt_file).expanduser()
        if local.is_file():
            import hashlib

            data = local.read_bytes()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UsageError(f"prompt file {local} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
                                 hint=f"convert it, e.g. iconv -f latin1 -t utf-8 {local} > {local}.utf8") from None
            digest = hashlib.sha256(data).hexdigest()[:12]
            prompt_path = f"{dest}/{PROMPTS_DIR}/{digest}-{_slug(local.name)}"
            prompt_upload = (local, prompt_path)
        elif getattr(getattr(target, "caps", None), "this_machine", False):  # the device is this machine: not there
            what = "is a directory, not a prompt file" if local.is_dir() else "not found"
            raise UsageError(f"prompt file {what}: {req.prompt_file}")
        elif req.prompt_file.startswith("/"):
            prompt_path = req.prompt_file  # a file already on the device
        else:
            raise UsageError(f"prompt file {'is a directory' if local.is_dir() else 'not found'}: {req.prompt_file}")
    if req.kind == "bench" and prompt_path:
        raise UsageError("llama-bench takes no prompt file")

    inv = render(req.kind, rev=rev, dest=dest, models_dir=models_dir, sessions_=sess, knobs=knobs,
                 model=req.model, prompt_path=prompt_path, extra=req.extra,
                 ubatch=str(req.ubatch), batch=req.batch, bench_output=req.bench_output, installed=installed,
                 defaults=run_defaults(target, manifest, threads=req.threads, cpu=req.cpu))
    inv.cpu_only = no_htp
    if installed is not None and "/" not in inv.tool and inv.argv[0].startswith("./bin/") \
            and inv.argv[0][len("./bin/"):] not in installed:
        raise EnvironmentMissing(f"{inv.argv[0][len('./bin/'):]} is not installed in {dest}/bin on {target.spec}",
                                 hint="deploy a build that has it")
    inv.argv = through_loader(inv.argv, loader_of((manifest or {}).get("runtime"), dest))
    if reachable and not offline_ok:
        target.check_runnable(inv.argv, inv.cwd)  # local: of another architecture, before anything is written
    inv.launcher = _launcher(target, inv, strict=reachable and not offline_ok)
    return Prepared(target, inv, prompt_upload, sessions=sess.names, cpu_only=cpu_only_note(manifest))


def _launcher(target, inv: Invocation, *, strict: bool) -> list[str]:
    """The words the target puts before the program (qemu:: its emulator, for an AArch64 program
    of the install), so that the command printed runs as printed; ``strict`` off (--print of an
    unreachable target, or one without its emulator): none where they cannot be known."""
    try:
        words = target.program_argv(inv.argv, inv.cwd)
    except (EnvironmentMissing, UsageError):
        if strict:
            raise
        return []
    cut = len(words) - len(inv.argv)
    return list(words[:cut]) if cut > 0 and list(words[cut:]) == inv.argv else []


def run(req: RunRequest, settings) -> RunRecord:
    prepared = prepare(req, settings)
    if prepared.cpu_only:
        prepared.cpu_only.say()
    with prepared.target as target:
        if prepared.prompt_upload:
            local, remote = prepared.prompt_upload
            target.write_file(remote, local.read_bytes())
        ui.info(f"running {prepared.invocation.tool} on {req.target}")
        record = execute(target, prepared.invocation, results_dir=Path(req.results_dir), timeout=req.timeout)
    killed = signal_name(record.exit_code)
    ui.info(f"{record.invocation.tool} exited {record.exit_code}" + (f" (killed by {killed})" if killed else "")
            + f" after {record.duration_s:.1f}s; log: {record.log}")
    return record
