"""hexbuild lab run|status|cancel|results: hexbuild's runs, benchmarks and tests as jobs in a
LAVA device lab (hexbuild/lab/)."""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from . import common
from .run import KNOB_HELP, PassthroughCommand

lab_app = typer.Typer(help="Run, benchmark and test on the boards of a LAVA device lab.", no_args_is_help=True)

RUN_EPILOG = ("After --: completion ARGS (llama-completion's), bench ARGS (llama-bench's), test ops [OPTIONS] or "
              "test ppl [OPTIONS] (those of hexbuild test ops|ppl). " + KNOB_HELP)
NOT_IN_A_LAB = ("--target", "-t", "--dest", "--models-dir", "--out")


def _client(s, lab: Optional[str]):
    from ..errors import UsageError
    from ..lab.client import LavaClient

    url = lab or s["lab.url"]
    if not url:
        raise UsageError("no lab: give --lab URL or set lab.url")
    return LavaClient(url, s["lab.token"])


def _kind(words: list[str], model: Optional[str]) -> tuple[str, list[str], Any, Any]:
    """(kind, program arguments, test ops request, test ppl request) from the words after --,
    the test options parsed by the `hexbuild test ops|ppl` commands' own parsers."""
    from ..errors import UsageError

    if not words:
        raise UsageError("what should the lab run? add -- completion ARGS, -- bench ARGS, -- test ops or -- test ppl")
    if words[0] in ("completion", "bench"):
        return words[0], words[1:], None, None
    if words[0] == "test" and len(words) > 1 and words[1] in ("ops", "ppl"):
        from .test import test_app

        bad = next((w for w in words[2:] if w.split("=")[0] in NOT_IN_A_LAB), None)
        if bad:
            raise UsageError(f"{bad} has no meaning in a lab job: the job installs in a directory of its own "
                             "and results come back to --results-dir")
        group = typer.main.get_command(test_app)
        cmd = group.get_command(None, words[1])  # type: ignore[arg-type]
        params = cmd.make_context(f"test {words[1]}", list(words[2:])).params
        if words[1] == "ops":
            from ..checks import ops

            t = (params.get("types") or "").strip()
            return "ops", [], ops.OpsRequest(
                target="lab", ndev=params.get("ndev"), devices=params.get("devices"),
                ops=_list(params.get("op")) or list(ops.DEFAULT_OPS),
                types=[] if t == "all" else (_list(t) or list(ops.DEFAULT_TYPES))), None
        from ..checks import ppl

        return "ppl", [], None, ppl.PplRequest(
            target="lab", model=params.get("model") or model or "", text=params["text"],
            reference_model=params.get("reference_model"), chunks=params.get("chunks"), ctx=params.get("ctx"),
            max_diff=params["max_diff"] / 100.0, ndev=params.get("ndev"), devices=params.get("devices"),
            extra=tuple(params.get("extra") or ()))
    raise UsageError(f"a lab job runs completion, bench, test ops or test ppl, not {' '.join(words[:2])!r}")


def _list(text: Optional[str]) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


@lab_app.command("run", cls=PassthroughCommand, epilog=RUN_EPILOG)
def run_command(
    ctx: typer.Context,
    package: str = typer.Argument(..., metavar="PKG", help="The Linux package (install prefix or .tar.gz)."),
    lab: Optional[str] = typer.Option(None, "--lab", metavar="URL", help="The LAVA server (default: lab.url)."),
    device_type: Optional[str] = typer.Option(None, "--device-type", metavar="TYPE", help="LAVA device type (default: lab.device_type)."),
    tags: Optional[str] = typer.Option(None, "--tags", metavar="a,b", help="Device tags the boards must have."),
    devices: int = typer.Option(1, "--devices", min=1, max=64, metavar="N", help="Jobs to submit at once, one per board."),
    model: Optional[str] = typer.Option(None, "--model", "-m", metavar="FILE|URL", help="A local GGUF (travels with the job), a URL the board fetches, or a path on the board."),
    serve_artifacts: Optional[str] = typer.Option(None, "--serve-artifacts", metavar="HOST:PORT", help="Serve the job tarball from here while the jobs run."),
    publish: Optional[str] = typer.Option(None, "--publish", metavar="CMD", help="Publish the job tarball with CMD ({path}, {name} filled in)."),
    artifact_url: Optional[str] = typer.Option(None, "--artifact-url", metavar="TEMPLATE", help="Where the workers download it ({name}; with --serve-artifacts also {path}, {port})."),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="S", help="The job's own timeout in the lab, shared out among its deploy, boot and test (default 3600, at least 90)."),
    queue_timeout: Optional[float] = typer.Option(None, "--queue-timeout", min=1, metavar="S", help="Seconds a job may wait for a board (default: lab.queue_timeout)."),
    ndev: Optional[int] = typer.Option(None, "--ndev", min=1, max=16, help="HTP sessions HTP0..HTP{N-1}."),
    htp_devices: Optional[str] = typer.Option(None, "--htp-devices", metavar="LIST", help="HTP device list, e.g. HTP0:0,HTP0:1."),
    prompt_file: Optional[str] = typer.Option(None, "--prompt-file", "-f", help="A prompt file for completion (travels with the job)."),
    results_dir: Optional[str] = typer.Option(None, "--results-dir", help="Where logs and results go (default: run.results_dir)."),
    db: Optional[str] = typer.Option(None, "--db", metavar="FILE", help="bench: the history database (default: <results-dir>/bench.sqlite)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="REV|FILE", help="bench: compare with this baseline (as bench compare)."),
    fail_below: Optional[float] = typer.Option(None, "--fail-below", metavar="RATIO", help="bench: exit 11 when slower than RATIO x the baseline."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback", help="A run whose HTP sessions did not open is a warning, not exit 12."),
    bundle_runtime: bool = typer.Option(False, "--bundle-runtime", help="Ship the package's glibc runtime (boards with an older glibc)."),
    sysroot: Optional[str] = typer.Option(None, "--sysroot", metavar="DIR", help="Where --bundle-runtime takes the runtime from."),
    board_os: str = typer.Option("debian", "--board-os", metavar="OS", help="The boards' OS family for LAVA: debian, ubuntu, oe, fedora, centos."),
    prompt: Optional[List[str]] = typer.Option(None, "--prompt", metavar="TEXT", help="The end of the boards' shell prompt, for LAVA (repeatable, none a part of another; default '# ')."),
) -> None:
    """Submit a run, a benchmark or a test as LAVA jobs and report their results as the local command does.

    The package and the model travel in one tarball that the lab's workers download; on the
    board the job runs the commands `hexbuild run`/`bench`/`test` render, with their dispatch
    proof. Results come from the jobs' test cases, never from their health. Exits as the local
    command (12 CPU fallback, 13 a failed test, 11 a regression with --fail-below) or 16 when
    the lab failed the job (incomplete, no board in --queue-timeout, a refused token)."""
    from ..errors import UsageError
    from ..lab import plan as lab_plan, session
    from ..runner.defaults import given_threads
    from ..lab.definition import BOARD_OSES
    from pathlib import Path

    s = common.settings(**{"lab.url": lab, "lab.device_type": device_type, "lab.queue_timeout": queue_timeout,
                           "run.results_dir": results_dir, "linux.sysroot": sysroot,
                           "lab.serve_artifacts": serve_artifacts, "lab.publish": publish,
                           "lab.artifact_url": artifact_url})
    if board_os not in BOARD_OSES:
        raise UsageError(f"--board-os must be one of {', '.join(BOARD_OSES)}, got {board_os!r}")
    if not s["lab.url"]:
        raise UsageError("no lab: give --lab URL or set lab.url")
    from ..deploy.models import check_local

    check_local([model])  # a local model is a GGUF before the lab is asked anything
    from ..lab.client import base_url

    base_url(s["lab.url"])  # a URL that is not one is one line before anything is packed
    if not s["lab.device_type"]:
        raise UsageError("no device type: give --device-type TYPE or set lab.device_type")
    if (fail_below is None) != (baseline is None):
        raise UsageError("--fail-below and --baseline go together")
    kind, extra, ops_req, ppl_req = _kind(ctx.meta.get("hexbuild.extra", []), model)
    if (fail_below is not None) and kind != "bench":
        raise UsageError("--baseline/--fail-below judge a bench job")
    req = lab_plan.LabRequest(kind=kind, package=Path(package), model=model, ndev=ndev, htp_devices=htp_devices,
                              knobs=ctx.meta.get("hexbuild.knobs", []), extra=extra,
                              threads=given_threads(s),
                              ubatch=s["run.ubatch"], prompt_file=prompt_file, bundle_runtime=bundle_runtime,
                              sysroot=s["linux.sysroot"], ops=ops_req, ppl=ppl_req)
    opts = session.options(s, count=devices, tags=_list(tags), timeout_s=timeout or 3600.0, db=db,
                       allow_cpu_fallback=allow_cpu_fallback, board_os=board_os, prompts=prompt)
    outcomes = session.run(req, opts)
    _report(outcomes)
    if baseline is not None:
        session.compare(outcomes, Path(s["run.results_dir"]), baseline, fail_below)
    session.raise_first(outcomes)


def _report(outcomes) -> None:
    """One document per job on stdout (--json: one JSON object, or one per line for several
    jobs); the human form otherwise, and a line per job on stderr."""
    import json
    import sys

    from ..ui import ui

    ui.result_emitted = True
    for o in outcomes:
        j = o.doc.get("job") or {}
        ui.info(f"job {o.job_id} on {j.get('device') or '?'}: {j.get('health')} in {j.get('duration_s')}s "
                f"(queued {j.get('queued_s')}s), exit {o.exit_code}: {j.get('url')}")
        if ui.json:  # each job's document carries what was said here, as every --json document does
            text = json.dumps(ui.with_said(o.doc), indent=2 if len(outcomes) == 1 else None, default=str)
            sys.stdout.write(text + "\n")
        elif o.human:
            sys.stdout.write(o.human if o.human.endswith("\n") else o.human + "\n")
        sys.stdout.flush()


@lab_app.command("status")
def status_command(
    jobs: List[str] = typer.Argument(..., metavar="JOB...", help="Job ids (with --lab) or job URLs."),
    lab: Optional[str] = typer.Option(None, "--lab", metavar="URL", help="The LAVA server (default: lab.url)."),
) -> None:
    """State, health, board and times of lab jobs."""
    from ..lab.client import LavaClient, parse_job_ref
    from ..lab.outcome import job_info
    from ..ui import ui

    s = common.settings(**{"lab.url": lab})
    infos = []
    for ref in jobs:
        base, jid = parse_job_ref(ref, s["lab.url"])
        with LavaClient(base, s["lab.token"]) as client:
            infos.append(job_info(client, client.job(jid), None))
    lines = [f"{i['id']}\t{i['state']}\t{i['health']}\t{i['device'] or '-'}\t{i['url']}" for i in infos]
    ui.result({"jobs": infos}, "\n".join(lines))


@lab_app.command("cancel")
def cancel_command(
    jobs: List[str] = typer.Argument(..., metavar="JOB...", help="Job ids (with --lab) or job URLs."),
    lab: Optional[str] = typer.Option(None, "--lab", metavar="URL", help="The LAVA server (default: lab.url)."),
) -> None:
    """Cancel lab jobs (a finished job is left as it is)."""
    from ..lab.client import LavaClient, parse_job_ref
    from ..ui import ui

    s = common.settings(**{"lab.url": lab})
    done = []
    for ref in jobs:
        base, jid = parse_job_ref(ref, s["lab.url"])
        with LavaClient(base, s["lab.token"]) as client:
            client.cancel(jid)
            done.append({"id": jid, "url": client.job_url(jid), "cancel": "sent"})
    ui.result({"jobs": done}, "\n".join(f"cancel sent to job {d['id']}: {d['url']}" for d in done))


@lab_app.command("results")
def results_command(
    jobs: List[str] = typer.Argument(..., metavar="JOB...", help="Job ids (with --lab) or job URLs."),
    lab: Optional[str] = typer.Option(None, "--lab", metavar="URL", help="The LAVA server (default: lab.url)."),
    results_dir: Optional[str] = typer.Option(None, "--results-dir", help="Where logs and results go (default: run.results_dir)."),
    allow_cpu_fallback: bool = typer.Option(False, "--allow-cpu-fallback", help="A fallback is a warning, not exit 12."),
    db: str = typer.Option("", "--db", metavar="FILE", help="bench: add the rows to this history database (default: none; lab run added them)."),
) -> None:
    """The results of finished hexbuild lab jobs, as `lab run` reports them (and exits)."""
    from pathlib import Path

    from ..errors import UsageError
    from ..lab.client import LavaClient, parse_job_ref
    from ..lab.session import job_outcome, raise_first

    s = common.settings(**{"lab.url": lab, "run.results_dir": results_dir})
    outcomes = []
    for ref in jobs:
        base, jid = parse_job_ref(ref, s["lab.url"])
        with LavaClient(base, s["lab.token"]) as client:
            state = client.job(jid).get("state")
            if state != "Finished":
                raise UsageError(f"job {jid} is {state}, not finished: see hexbuild lab status {ref}")
            outcomes.append(job_outcome(client, jid, results_dir=Path(s["run.results_dir"]),
                                        allow_cpu_fallback=allow_cpu_fallback, db=db))
    _report(outcomes)
    raise_first(outcomes)


def register(app: typer.Typer) -> None:
    app.add_typer(lab_app, name="lab")
