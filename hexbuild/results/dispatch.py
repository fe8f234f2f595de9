"""Did a run reach the NPU? The Hexagon backend's own session lines, the model buffers on HTP
devices and llama-bench's backend column, and the verdict a run is judged by.

llama.cpp carries on with the CPU when an HTP session cannot open: the run exits 0 with CPU
numbers. These lines are the only record of it. Every pattern follows a format string of
ggml/src/ggml-hexagon/ggml-hexagon.cpp (cited), matched anywhere in a line.

0.3.20 tree (sessions open when the registry is made; failures name the session by index):
  "ggml-hex: allocating new session: %s\n"
  "ggml-hex: failed to reserve new session %d : error 0x%x\n"
  "ggml-hex: failed to enable unsigned PD for session %d : error 0x%x\n"
  "ggml-hex: failed to open session %d : error 0x%x\n"
  "ggml-hex: new session: %s : session-id %d domain-id %d uri %s handle 0x%lx\n"
  "ggml-hex: failed to start session: 0x%08x\n"              (no name: the last allocating one)
  "ggml-hex: failed to create device/session %zu\n"
  "ggml-hex: forcing ndev to 1 for SoCs archs lower than v75.\n"
0.3.36 tree (physical/virtual devices; sessions open lazily, on first use):
  "ggml-hex: device %zu: %s (phys=%d, virt=%d, domain=%s:%d)[ [mdev peers: %s]]\n"
  "ggml-hex: %s allocating new session : domain %u phys-idx %u virt-idx %u\n"   (debug)
  "ggml-hex: %s failed to reserve new session (physical %d, virtual %d) : error 0x%x\n"
  "ggml-hex: %s failed to enable unsigned PD : error 0x%x\n"
  "ggml-hex: %s failed to open session : uri %s error 0x%x\n"
  "ggml-hex: %s new session : session-id %d domain-id %d uri %s handle 0x%lx\n"
  "ggml-hex: %s failed to start session: 0x%08x\n", "ggml-hex: %s dspqueue_create failed: 0x%08x\n"
  "ggml-hex: %s: invalid physical CDSP core %d\n"
Both: "... allocating new registry : ndev %zu\n", "ggml-hex: Hexagon Arch version v%d[, DMA64 %s]\n".
0.3.28 and later (htp-drv.cpp, the FastRPC library loaded at run time; before any session, so the
registry has no device and every session asked for failed):
  "ggml-hex: failed to load %s: %s\n"        (libcdsprpc.so and dlerror(): no FastRPC on the machine)
0.3.36 prints GGML_LOG_INFO lines only at log verbosity 4 (-lv 4), so a default run shows the
failures (errors) but not the successes: a session with no line either way is "unconfirmed".
"""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

_HEX_REGISTRY = re.compile(r"ggml-hex: Hexagon backend .*allocating new registry : ndev (\d+)")
_HEX_ARCH = re.compile(r"ggml-hex: Hexagon Arch version v(\d+)(?:, DMA64 (enabled|disabled))?")
_HEX_DEVICE = re.compile(r"ggml-hex: device (\d+): (\S+) \(phys=(-?\d+), virt=(-?\d+), domain=([^:)]*):(-?\d+)\)"
                         r"(?: \[mdev peers: (.*)\])?")
_HEX_ALLOC = re.compile(r"ggml-hex: (?:allocating new session: (\S+)|(\S+) allocating new session : domain (\d+) "
                        r"phys-idx (\d+) virt-idx (\d+))")
_HEX_SESSION = re.compile(r"ggml-hex: (?:new session: (\S+) :|(\S+) new session :) session-id (-?\d+) "
                          r"domain-id (-?\d+) uri (\S+)")
_HEX_FORCED = re.compile(r"ggml-hex: forcing ndev to 1")
_CODE = r"(?:error )?(0x[0-9a-fA-F]+)"
# (pattern, what failed); group "name" is a session name, group "index" a session index (0.3.20)
_HEX_FAILURES = [
    (re.compile(r"ggml-hex: failed to load \S*libcdsprpc\S*?:()"), "driver"),
    (re.compile(r"ggml-hex: failed to reserve new session (?P<index>\d+) : " + _CODE), "reserve"),
    (re.compile(r"ggml-hex: failed to enable unsigned PD for session (?P<index>\d+) : " + _CODE), "unsigned-pd"),
    (re.compile(r"ggml-hex: failed to open session (?P<index>\d+) : " + _CODE), "open"),
    (re.compile(r"ggml-hex: failed to create device/session (?P<index>\d+)()"), "create"),
    (re.compile(r"ggml-hex: (?P<name>HTP\S*) failed to reserve new session \(physical -?\d+, virtual -?\d+\) : "
                + _CODE), "reserve"),
    (re.compile(r"ggml-hex: (?P<name>HTP\S*) failed to enable unsigned PD : " + _CODE), "unsigned-pd"),
    # the uri is left out in some revisions' lines (as quoted in llama.cpp issue 28288)
    (re.compile(r"ggml-hex: (?P<name>HTP\S*) failed to open session : (?:uri \S+ )?" + _CODE), "open"),
    (re.compile(r"ggml-hex: (?:(?P<name>HTP\S*) )?failed to start session: " + _CODE), "start"),
    (re.compile(r"ggml-hex: (?P<name>HTP\S*) dspqueue_create failed: " + _CODE), "dspqueue"),
    (re.compile(r"ggml-hex: (?P<name>HTP[^\s:]*(?::\d+)?): invalid physical CDSP core (-?\d+)()"), "cdsp-core"),
]
_SKEL = re.compile(r"file:///([^?]+)")
# the backend's own lines start with its tag (after a log prefix, if any); prose that names it
# ("the first `ggml-hex` failure", 'see "ggml-hex: failed …"') is not its output
_HEX_TAG = re.compile(r"(?<![\w`'\"/.-])ggml-hex: ")
# hexbuild's virtual NPU (the qemu+npu: target) says each session it opens and, at the end, the
# bytes mapped to its DSP: the FastRPC layer's own account, as a phone's log would give it
_VNPU_OPEN = re.compile(r"^hexbuild-vnpu: (HTP\d+): session opened on the virtual NPU \((\S+) on an emulated (\S+) cDSP")
_VNPU_BYTES = re.compile(r"^hexbuild-vnpu: (HTP\d+): (\d+) bytes on HTP buffers")


def virtual_npu(line: str) -> str | None:
    """The HTP version (v73) a "session opened on the virtual NPU" line names; None for any other line."""
    m = _VNPU_OPEN.match(line.lstrip())
    return m[3] if m else None


class SessionLog:
    """The backend's registry and sessions, fed one line at a time (as a run streams).
    ``feed`` returns the failure it recorded, if the line reported one."""

    def __init__(self) -> None:
        self.ndev: int | None = None
        self.arch: int | None = None
        self.dma64: bool | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.positive = False  # the log shows successes too (INFO lines), not only failures
        self.vnpu_bytes: dict[str, int] = {}  # the virtual NPU's own account, by device
        self.vnpu_model: str | None = None
        self._last_alloc: str | None = None

    def _session(self, name: str) -> dict[str, Any]:
        s = self.sessions.get(name)
        if s is None:
            s = self.sessions[name] = {"name": name, "status": "listed", "phys": None, "virt": None, "domain": None,
                                       "peers": [], "session_id": None, "domain_id": None, "uri": None,
                                       "skel": None, "error": None, "code": None}
        return s

    def feed(self, line: str) -> dict[str, Any] | None | bool:
        """False: not a ggml-hex line this reader knows; True: recorded; a dict: a failure."""
        if line.startswith("hexbuild-vnpu: "):
            return self._vnpu(line)
        tag = _HEX_TAG.search(line)
        if tag is None:
            return False
        line = line[tag.start():]  # what a log prefix (time, level) put before it is not the backend's
        if m := _HEX_SESSION.search(line):
            s = self._session(m[1] or m[2])
            skel = _SKEL.match(m[5])
            s.update(status="opened", session_id=int(m[3]), domain_id=int(m[4]), uri=m[5],
                     skel=skel[1] if skel else None)
            self.positive = True
            return True
        if m := _HEX_ALLOC.search(line):
            name = m[1] or m[2]
            s = self._session(name)
            if s["status"] == "listed":
                s["status"] = "allocating"
            if m[3] is not None:
                s["phys"], s["virt"] = int(m[4]), int(m[5])
            self._last_alloc = name
            self.positive = True
            return True
        if m := _HEX_DEVICE.search(line):
            s = self._session(m[2])
            s.update(phys=int(m[3]), virt=int(m[4]), domain=f"{m[5]}:{m[6]}")
            if m[7]:
                s["peers"] = [p.split(" (", 1)[0].strip() for p in m[7].split(", ") if p.strip()]
            self.positive = True
            return True
        if m := _HEX_ARCH.search(line):
            self.arch = int(m[1])
            self.dma64 = None if m[2] is None else m[2] == "enabled"
            self.positive = True
            return True
        if m := _HEX_REGISTRY.search(line):
            self.ndev = int(m[1])
            self.positive = True
            return True
        if _HEX_FORCED.search(line):
            self.errors.append(line[line.index("ggml-hex"):].strip())
            return True
        for pattern, stage in _HEX_FAILURES:
            if m := pattern.search(line):
                groups = m.groupdict()
                if groups.get("index") is not None:
                    name = f"HTP{groups['index']}"
                else:
                    name = groups.get("name") or self._last_alloc or "HTP0"
                text = line[line.index("ggml-hex"):].strip()
                s = self._session(name)
                code = m.group(m.lastindex) if m.lastindex else ""
                if s["status"] != "failed" or s["code"] is None:  # the first, most specific error wins
                    s.update(status="failed", error=text, code=int(code, 16) if code else None)
                s["stage"] = stage
                self.errors.append(text)
                return {"session": name, "stage": stage, "code": s["code"], "line": text}
        if re.search(r"\b(?:failed|error|exceeds)\b", line, re.IGNORECASE):
            self.errors.append(line[line.index("ggml-hex"):].strip())
            return True
        return False

    def _vnpu(self, line: str) -> bool:
        if m := _VNPU_OPEN.match(line):
            s = self._session(m[1])
            if s["status"] != "failed":
                s.update(status="opened", skel=m[2], emulated=True)
            self.vnpu_model = m[3]
            return True
        if m := _VNPU_BYTES.match(line):
            self.vnpu_bytes[m[1]] = int(m[2])
            return True
        return False

    def to_json(self) -> dict[str, Any]:
        out = {"arch": self.arch, "dma64": self.dma64, "ndev": self.ndev,
               "sessions": list(self.sessions.values()), "errors": list(self.errors)}
        if self.vnpu_model:
            out.update(vnpu_model=self.vnpu_model, vnpu_bytes=dict(self.vnpu_bytes))
        return out


@functools.lru_cache(maxsize=1)
def hint_for(code: int | None, arch: int | str | None = None) -> str | None:
    """What a session error code means and what to do, from the FastRPC/AEE table `hexbuild
    explain` reads (results/fastrpc_errors.py); None for a code it knows nothing specific about."""
    if code is None:
        return None
    from .fastrpc_errors import explain_code

    found = explain_code(code)
    if not found.known:
        return None
    arch_text = f"v{arch}" if isinstance(arch, int) else (arch or "vNN")
    return f"0x{code:08x} is {found.name}: {found.cause}; fix: {found.fix}".replace("vNN", arch_text)


HTP_NAME = re.compile(r"^HTP\d+(?::\d+)?$")


def _htp_bytes(log: dict[str, Any]) -> int | None:
    """Bytes of weights on HTP devices, from load_tensors (or the memory breakdown); None when
    the log printed neither (0.3.36 at default verbosity)."""
    bufs = log.get("model_buffers") or []
    if bufs:
        return int(round(sum((b["mib"] or 0.0) for b in bufs if str(b["device"]).startswith("HTP")) * 2 ** 20))
    rows = [r for r in log.get("memory_breakdown") or [] if r.get("kind") == "buffer_type"
            or r.get("kind") == "device"]
    if rows:
        return int(sum((r.get("model") or 0) for r in rows if str(r["name"]).startswith("HTP")) * 2 ** 20)
    return None


def verdict(log: dict[str, Any] | None, requested: Sequence[str], *, cpu_only: bool = False,
            session_log: SessionLog | None = None) -> dict[str, Any]:
    """The run's dispatch record: ``{requested, opened, sessions[], htp_bytes, fallback_reason,
    ...}``. ``fallback_reason`` is one line when HTP sessions were asked for and fewer opened, or
    no weights landed on an HTP buffer, or llama-bench ran on another backend."""
    log = log or {}
    hx = session_log.to_json() if session_log is not None else (log.get("hexagon") or
                                                                 {"arch": None, "sessions": [], "errors": []})
    positive = session_log.positive if session_log is not None else bool(
        hx.get("ndev") is not None or any(s.get("status") in ("opened", "allocating") for s in hx["sessions"]))
    by_name = {s["name"]: s for s in hx["sessions"]}
    requested = [] if cpu_only else list(dict.fromkeys(requested))
    htp_bytes = _htp_bytes(log)
    if htp_bytes is None and hx.get("vnpu_bytes"):  # the virtual NPU's account, when the backend printed none
        htp_bytes = sum(hx["vnpu_bytes"].get(n, 0) for n in requested) or None
    out: dict[str, Any] = {"requested": len(requested), "requested_devices": requested, "opened": 0,
                           "unconfirmed": [], "sessions": hx["sessions"], "arch": hx.get("arch"),
                           "htp_bytes": htp_bytes, "fallback_reason": None, "failed_session": None,
                           "code": None, "cpu_only": cpu_only}
    if hx.get("vnpu_model"):
        out["emulated_npu"] = f"{hx['vnpu_model']} (hexbuild's virtual NPU: an emulated cDSP)"
    reasons: list[tuple[str, dict[str, Any] | None]] = []
    for s in hx["sessions"]:  # a failure anywhere (a peer of a requested device too) is a fallback
        if s.get("status") == "failed":
            reasons.append((f"{s['name']} did not open: {s['error']}", s))
    on_device: dict[str, float] = {}
    for b in log.get("model_buffers") or []:
        on_device[b["device"]] = on_device.get(b["device"], 0.0) + (b["mib"] or 0.0)
    for name in requested:
        status = (by_name.get(name) or {}).get("status")
        if status == "opened" or on_device.get(name, 0.0) > 0:  # weights on it: it opened
            out["opened"] += 1
        elif status != "failed":  # no line either way (0.3.36 hides INFO lines by default)
            out["unconfirmed"].append(name)
    ndev = hx.get("ndev")
    if positive and ndev is not None and ndev < len(requested):
        reasons.append((f"{len(requested)} sessions were asked for and the backend made {ndev} device(s) "
                        f"(ndev {ndev})", None))
    if hx.get("errors") and any("forcing ndev to 1" in e for e in hx["errors"]) and len(requested) > 1:
        reasons.append((f"{len(requested)} sessions were asked for and the backend forced one "
                        f"(HTP arch below v75 on Android)", None))
    if requested and htp_bytes == 0:
        cpu = ", ".join(f"{b['buffer']} {b['mib']:.2f} MiB" for b in log.get("model_buffers") or [])
        reasons.append((f"no weights landed on an HTP buffer ({cpu or 'none on HTP'})", None))
    bench = log.get("bench") or []
    if requested and bench and not any("HTP" in str(r.get("backend") or "") for r in bench):
        backends = sorted({str(r.get("backend")) for r in bench})
        reasons.append((f"llama-bench ran on {', '.join(backends)}, not HTP", None))
    if reasons:
        text, session = reasons[0]
        out["fallback_reason"] = text
        if session is not None:
            out["failed_session"], out["code"] = session["name"], session.get("code")
    return out


def requested_devices(argv: Sequence[str], env: dict[str, str], tool: str | None = None) -> list[str]:
    """The HTP devices an invocation asks for: its --device/-dev list (llama-bench's '/' and ','
    included), or test-backend-ops' -b; none when GGML_HEXAGON_NDEV=0 turns the backend off."""
    if env.get("GGML_HEXAGON_NDEV", "").strip() == "0" and "GGML_HEXAGON_DEVICES" not in env:
        return []
    value = None
    # argv may start with a bundled loader (ld-linux … ./bin/tool): the caller names the tool
    tool = tool or (str(argv[0]).rsplit("/", 1)[-1] if argv else "")
    flags = ("-b",) if tool == "test-backend-ops" else ("--device", "-dev")
    for i, arg in enumerate(argv[1:], 1):
        if arg in flags and i + 1 < len(argv):
            value = argv[i + 1]
        elif any(arg.startswith(f + "=") for f in flags):
            value = arg.split("=", 1)[1]
    if value is None:
        # a llama-* tool loading a model with no --device offloads to every device the backend
        # registers: HTP0..HTP{NDEV-1} (one by default), unless -ngl 0 keeps the weights home
        loads = any(a in ("-m", "--model") or a.startswith("--model=") for a in argv[1:])
        ngl = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-ngl", "--gpu-layers", "--n-gpu-layers")]
        if not (tool.startswith("llama-") and tool != "llama-bench" and loads) or (ngl and ngl[-1] == "0"):
            return []
        ndev = env.get("GGML_HEXAGON_NDEV", "1").strip()
        return [f"HTP{i}" for i in range(int(ndev) if ndev.isdigit() else 1)]
    names = [n.split("[", 1)[0].strip() for n in re.split(r"[,/]", value)]
    return list(dict.fromkeys(n for n in names if HTP_NAME.match(n)))

