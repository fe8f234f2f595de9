"""The dispatch proof of a run: its output read line by line as it streams (the results parser,
whose ggml-hex family records the backend's sessions), then judged against the HTP devices the
invocation asked for (hexbuild.results.dispatch)."""

from __future__ import annotations

from typing import Any

from ..errors import CpuFallback
from ..results import dispatch
from ..results.parse import LogParser
from ..ui import ui
from .commands import Invocation


class LogWatch:
    """Feeds each complete line of stdout and stderr (kept apart: their chunks interleave) to the
    results parser as it arrives; a session failure is said at once when the output is not shown."""

    def __init__(self, source: str, *, announce: bool) -> None:
        self.parser = LogParser(source)
        self.announce = announce
        self._partial: dict[str, bytes] = {}

    @property
    def sessions(self) -> dispatch.SessionLog:
        return self.parser.hexagon.sessions

    def feed(self, stream: str, data: bytes) -> None:
        buf = self._partial.get(stream, b"") + data
        *lines, self._partial[stream] = buf.split(b"\n")
        for raw in lines:
            self._line(raw.decode("utf-8", "replace"))

    def _line(self, text: str) -> None:
        seen = len(self.sessions.errors)
        try:
            self.parser.feed(text + "\n")
        except Exception as e:  # a line the parser cannot read is no reason to fail the run
            ui.detail(f"results parser: {type(e).__name__}: {e}")
            return
        if self.announce and len(self.sessions.errors) > seen:
            ui.warn(self.sessions.errors[-1])

    def finish(self) -> dict[str, Any] | None:
        for stream, rest in list(self._partial.items()):
            if rest:
                self._line(rest.decode("utf-8", "replace"))
        self._partial.clear()
        out = self.parser.finish()
        return out if self.parser.matched or out["bench"] else None


def judge(inv: Invocation, results: dict[str, Any] | None, sessions: dispatch.SessionLog) -> dict[str, Any]:
    requested = dispatch.requested_devices(inv.argv, inv.env, tool=inv.tool)
    return dispatch.verdict(results, requested, cpu_only=inv.cpu_only, session_log=sessions)


def backend_absent(record) -> bool:
    """The program failed because the backend registered no device: it could not even load the
    FastRPC library ("failed to load libcdsprpc.so"), and llama.cpp then refused --device HTPn."""
    d = getattr(record, "dispatch", None) or {}
    return record.exit_code not in (0, None) and any(s.get("stage") == "driver" for s in d.get("sessions") or [])


def _emulated(spec: str) -> tuple[str, bool]:
    """(the kind, whether it emulates a CPU and has no NPU: qemu:, not qemu+npu:) of a target spec."""
    from ..targets.registry import find

    found = find(spec)
    return (found.scheme if found else spec.split(":", 1)[0]), bool(found and found.caps.emulator
                                                                   and not found.caps.virtual_npu)


# The FastRPC checks `hexbuild doctor --target` runs on a device (diagnose/capability.py NPU_ONLY):
# on an emulated target without an NPU (qemu:) it runs none of them, its `npu` check says what
# applies there; qemu+npu: runs them against its virtual NPU (diagnose/vnpu.py).
_FASTRPC_CHECKS = ("fastrpc:", "adsp-library-path", "package:htp-lib", "package:sessions")


def local_lib_dir(spec: str, inv: Invocation):
    """The install's lib/ on this machine when the target's programs run here (local:, qemu:,
    qemu+npu:): where ADSP_LIBRARY_PATH points; None on a device."""
    from pathlib import Path

    from ..targets.registry import find

    found = find(spec)
    if found is None or not found.caps.this_machine:
        return None
    first = str((inv.env or {}).get("ADSP_LIBRARY_PATH", "")).replace(";", ":").split(":")[0]
    path = Path(first) if first else (Path(inv.cwd) / "lib" if inv.cwd else None)
    return path if path is not None and path.is_dir() else None


def fit_diagnosis(spec: str, diagnosis: dict | None) -> dict | None:
    """A log's diagnosis with the fix and checks the target has: ``--target T`` made the spec,
    and on an emulated target (qemu:, where doctor runs no FastRPC check) its ``npu`` check and
    that target's own fix instead of FastRPC checks that would only probe this machine."""
    if not diagnosis:
        return diagnosis
    out = {**diagnosis, "fix": str(diagnosis.get("fix") or "").replace("--target T", f"--target {spec}")}
    kind, emulated = _emulated(spec)
    if emulated and any(str(c).startswith(_FASTRPC_CHECKS) for c in diagnosis.get("checks") or []):
        out["fix"] = (f"{kind}: emulates an AArch64 CPU and has no NPU, so no HTP session opens there: deploy a "
                      "CPU-only build (hexbuild build --os linux --toolchain open), or run with --allow-cpu-fallback; "
                      f"hexbuild doctor --target {spec} (npu) says so before a run")
        out["checks"] = ["npu"]
    return out


def check(record, *, allow_cpu_fallback: bool = False) -> None:
    """Raise CpuFallback (exit 12) when a run that exited 0 asked for HTP sessions and fell back
    to the CPU; with ``allow_cpu_fallback`` say it as a warning instead."""
    d = getattr(record, "dispatch", None) or {}
    reason = d.get("fallback_reason")  # the backend's own lines: whatever the manifest says
    if d.get("cpu_only") and not reason:
        ui.info("the package is CPU only (no HTP libraries): nothing ran on the NPU")
        return
    if not reason or (record.exit_code not in (0, None) and not backend_absent(record)):
        return
    message = f"{record.target}: the run fell back to the CPU: {reason}"
    hint = dispatch.hint_for(d.get("code"), d.get("arch"))
    diagnosis = getattr(record, "diagnosis", None)
    if not hint and diagnosis and diagnosis.get("cause"):  # no FastRPC at all: the log's cause and fix
        hint = f"{diagnosis['cause']}; fix: {diagnosis['fix']}"
    if allow_cpu_fallback:
        ui.warn(message + (f" ({hint})" if hint else ""))
        return
    raise CpuFallback(message, hint=hint or f"the log is in {record.log}", details={"dispatch": d})
