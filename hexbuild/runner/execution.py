"""Running one invocation on a target: its output streamed, its log and JSON record saved
under the results directory without ever leaving a partial file."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HexbuildError, Interrupted, signal_name
from ..paths import atomic_write, output_mode
from ..ui import ui
from .commands import Invocation

RUN_TIMEOUT = 24 * 3600.0  # a run's default limit: a long generation or a server must not be cut


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "target"


def _timestamp() -> str:
    t = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(t)) + f"-{int(t * 1000) % 1000:03d}"


def diagnose_log(text: str, spec: str, *, said: bool = False) -> dict | None:
    """The first ggml-hex failure in a run's log on ``spec``, explained with the fix and checks
    that target has (proof.fit_diagnosis); one warning line, cause then fix, unless ``said``: the
    dispatch proof reports a fallback with the same explanation."""
    from ..results.fastrpc_errors import explain_log
    from .proof import fit_diagnosis

    found = explain_log(text.splitlines())
    if found is None:
        return None
    fitted = fit_diagnosis(spec, found.to_json())
    if not said:
        ui.warn(f"{found.line}: {found.summary()}; fix: {fitted['fix']}")
    return fitted


def _offer_addr2line(record: "RunRecord", text: str) -> None:
    """A DSP crash in the log: keep its offsets and say how to map them to source lines; where
    the skel is on this machine (qemu+npu:, local:), name its function too."""
    from ..artifacts.inspect.addr2line import addr2line_offer, crash_offsets, name_sites
    from .proof import local_lib_dir

    sites = crash_offsets(text)
    if sites:
        lib_dir = local_lib_dir(record.target, record.invocation)
        named = name_sites(sites, lib_dir)
        record.dsp_crash = [{k: v for k, v in n.items() if k != "where" and v is not None} for n in named]
        ui.warn(f"the DSP crashed at {', '.join(n['where'] for n in named[:3])}; map it to source lines "
                f"with: {addr2line_offer(sites, str(lib_dir.parent) if lib_dir else 'PKG')}")


@dataclass
class RunRecord:
    target: str
    invocation: Invocation
    exit_code: int | None  # None: the run did not finish (error says why)
    duration_s: float
    log: str
    stdout: bytes
    results: Any = None
    json_path: str | None = None
    error: str | None = None
    diagnosis: dict | None = None  # the first ggml-hex failure, explained (hexbuild.diagnose)
    dsp_crash: list[dict[str, Any]] | None = None  # offsets into libggml-htp-vNN.so the log reported
    dispatch: Any = None  # the dispatch proof (hexbuild.results.dispatch.verdict)
    fidelity: dict[str, Any] | None = None  # the virtual NPU's mark (emulated, npu_model): Target.fidelity

    def to_json(self) -> dict[str, Any]:
        out = {"target": self.target, "tool": self.invocation.tool, "argv": self.invocation.argv,
               "env": self.invocation.env, "cwd": self.invocation.cwd, "exit_code": self.exit_code,
               "duration_s": round(self.duration_s, 3), "log": self.log, "results": self.results,
               "dispatch": self.dispatch}
        if signal_name(self.exit_code):  # the shell's reading of 128+N: killed by signal N
            out["signal"] = signal_name(self.exit_code)
        if self.error:
            out["error"] = self.error
        if self.diagnosis:
            out["diagnosis"] = self.diagnosis
        if self.dsp_crash:
            out["dsp_crash"] = self.dsp_crash
        out.update(self.fidelity or {})  # nothing for a real device: fidelity.py
        return out


def execute(target, inv: Invocation, *, results_dir: Path, passthrough: bool = True,
            timeout: float | None = None, stem: str | None = None, save_json: bool = True) -> RunRecord:
    """Run an invocation, streaming its output and saving the log (and its JSON result) under
    ``results_dir``; the log is written as it arrives and renamed into place at the end."""
    from .proof import LogWatch  # the results parser: loaded when a program runs, not by --print

    stem = stem or f"{_timestamp()}-{_slug(inv.tool)}-{_slug(target.spec)}"
    results_dir.mkdir(parents=True, exist_ok=True)
    log_path = results_dir / f"{stem}.log"
    import tempfile  # here, not at the top: a server's start imports this module and writes no log (5 ms)

    fd, part = tempfile.mkstemp(prefix=f".{log_path.name}.", suffix=".part", dir=results_dir)
    stdout_chunks: list[bytes] = []
    watch = LogWatch(str(log_path), announce=not passthrough or ui.quiet)
    # With --json, stdout carries only the result: the program's own stdout goes to stderr.
    out_stream = sys.stderr if ui.json else sys.stdout

    log = _LineLog(fd)

    def on_output(stream: str, data: bytes) -> None:
        log.write(stream, data)
        watch.feed(stream, data)
        if stream == "stdout":
            stdout_chunks.append(data)
        if passthrough and not ui.quiet:
            sink = out_stream if stream == "stdout" else sys.stderr
            sink.flush()
            try:
                sink.buffer.write(data)  # type: ignore[attr-defined]
            except AttributeError:  # a text-only stream (pytest capture)
                sink.write(data.decode("utf-8", "replace"))
            sink.flush()

    start = time.monotonic()
    interrupted = False
    error: HexbuildError | None = None
    code: int | None
    try:
        code = target.run(inv.argv, env=inv.env, cwd=inv.cwd, timeout=timeout or RUN_TIMEOUT,
                          on_output=on_output)
    except KeyboardInterrupt:
        interrupted, code = True, 130
    except HexbuildError as e:  # a timeout, a device gone mid-run: keep what was logged
        error, code = e, None
    except BaseException:
        os.close(fd)
        Path(part).unlink(missing_ok=True)
        raise
    duration = time.monotonic() - start
    log.flush()
    os.close(fd)
    os.chmod(part, output_mode())  # mkstemp's 0600 is for the part; the log is the user's
    os.replace(part, log_path)
    record = _judged(target.spec, inv, code, duration, log_path, b"".join(stdout_chunks), watch,
                     error=error.message if error else None, json_path=results_dir / f"{stem}.json" if save_json else None,
                     fidelity=target.fidelity())
    if interrupted:
        raise Interrupted(f"interrupted; the log so far is in {log_path}")
    if error is not None:
        error.hint = error.hint or f"the output so far is in {log_path}"
        raise error
    return record


class _LineLog:
    """The log file, written a whole line at a time per stream: a program's stdout (block-buffered
    into a pipe) and its stderr (the backend's and the FastRPC library's lines) arrive in chunks
    that cut lines anywhere, and a stderr line landing inside a stdout line would hide both from
    the parsers (a test-backend-ops case and its OK on two lines)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.pending: dict[str, bytes] = {}

    def write(self, stream: str, data: bytes) -> None:
        data = self.pending.pop(stream, b"") + data
        cut = data.rfind(b"\n") + 1
        if cut:
            os.write(self.fd, data[:cut])
        if cut < len(data):
            self.pending[stream] = data[cut:]

    def flush(self) -> None:
        rest = [self.pending.pop(stream) for stream in list(self.pending)]
        if rest:  # unfinished last lines, each kept whole
            os.write(self.fd, b"\n".join(rest))


def _judged(spec: str, inv: Invocation, code: int | None, duration: float, log_path: Path, stdout: bytes, watch,
            *, error: str | None, json_path: Path | None, fidelity: dict[str, Any] | None = None) -> RunRecord:
    """The record of a finished run: its parsed results, the dispatch proof, the diagnosis of a
    session failure, a DSP crash's offsets; saved as JSON at ``json_path`` when given."""
    from .proof import judge

    results = watch.finish()
    record = RunRecord(spec, inv, code, duration, str(log_path), stdout, results=results, error=error,
                       dispatch=judge(inv, results, watch.sessions), fidelity=fidelity)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    record.diagnosis = diagnose_log(text, spec, said=bool((record.dispatch or {}).get("fallback_reason")))
    _offer_addr2line(record, text)
    if json_path is not None:
        atomic_write(json_path, json.dumps(record.to_json(), indent=2) + "\n", mode=output_mode())
        record.json_path = str(json_path)
    return record


def record_output(spec: str, inv: Invocation, output: bytes, *, exit_code: int | None, duration_s: float,
                  results_dir: Path, stem: str | None = None, save_json: bool = True,
                  error: str | None = None) -> RunRecord:
    """The record of a run that happened elsewhere (a job in a device lab), from its output:
    saved as the log and judged exactly as ``execute`` judges a run it streamed."""
    from .proof import LogWatch

    stem = stem or f"{_timestamp()}-{_slug(inv.tool)}-{_slug(spec)}"
    log_path = results_dir / f"{stem}.log"
    atomic_write(log_path, output, mode=output_mode())
    watch = LogWatch(str(log_path), announce=True)
    watch.feed("stdout", output)
    return _judged(spec, inv, exit_code, duration_s, log_path, output, watch, error=error,
                   json_path=results_dir / f"{stem}.json" if save_json else None)
