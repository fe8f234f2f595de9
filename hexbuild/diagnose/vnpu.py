"""The FastRPC checks of a ``qemu+npu:`` target, against its virtual NPU: under a phone's names
where they mean the same thing there, and ``vnpu:*`` where only the emulator has the question.

- ``fastrpc:library``: hexbuild's stand-in libcdsprpc.so, one of the virtual NPU's parts (made once
  into the cache from the kernel check's image and the open toolchain image; the line says which
  image is missing and the command that makes it);
- ``vnpu:emulator``: qemu-hexagon runs the DSP runtime as ``-cpu <qemu.npu>`` (the phone's
  ``fastrpc:device-node``: the DSP is there);
- ``package:htp-lib``: the install (or ``--package``) has ``lib/libggml-htp-<qemu.npu>.so``;
- ``adsp-library-path``: the phone's check, on the install's ``lib/``;
- ``vnpu:hmx``: the skel holds no HMX code, which qemu-hexagon cannot run (hexbuild.vnpu.skel);
- ``fastrpc:session``: a FastRPC session opens: the stand-in, in a process of its own, opens the
  skel on the emulated DSP (its loader, its imports, its open method) and closes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ..doctor import Check
from ..errors import EnvironmentMissing

SESSION_TIMEOUT = 120.0  # a session's open under the emulator takes about a second

# In a process of its own: the library's sessions and its exit handler are per process.
_OPEN = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.remote_handle64_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
lib.remote_handle64_close.argtypes = [ctypes.c_uint64]
h = ctypes.c_uint64()
e = lib.remote_handle64_open(sys.argv[2].encode(), ctypes.byref(h)) & 0xFFFFFFFF
c = lib.remote_handle64_close(h) & 0xFFFFFFFF if e == 0 else 0
print(e, c)
"""


def vnpu_checks(ctx, package: str | Path | None) -> list[Check]:
    """The checks above for the install ``ctx`` describes (diagnose/device.py), or ``package``."""
    target = ctx.target
    npu = target.npu
    lib_dir = Path(package) / "lib" if package is not None else Path(ctx.dest) / "lib"
    skel = lib_dir / f"libggml-htp-{npu}.so"
    library, parts = _library(target)
    checks = [library, _emulator(parts, npu), ctx.htp_lib()]
    if package is None:
        checks.append(ctx.adsp_path())
    checks += [_hmx(skel, lib_dir, npu, ctx.manifest), _session(parts, skel, npu)]
    return checks


def _library(target) -> tuple[Check, object | None]:
    try:
        parts = target.parts
    except EnvironmentMissing as e:
        return Check("fastrpc:library", "missing", e.message, fix=e.hint), None
    lib = parts.host_lib_dir("aarch64") / "libcdsprpc.so"
    return Check("fastrpc:library", "ok", f"{lib}: hexbuild's stand-in, first on the programs' library path "
                 f"(the virtual NPU's parts in {parts.root})"), parts


def _not_checked(name: str, why: str) -> Check:
    return Check(name, "info", f"not checked: {why}")


def _emulator(parts, npu: str) -> Check:
    if parts is None:
        return _not_checked("vnpu:emulator", "the virtual NPU's parts are not there (fastrpc:library)")
    try:
        version = subprocess.run([str(parts.qemu), "-version"], capture_output=True, text=True, timeout=30)
        runs = subprocess.run([str(parts.qemu), "-cpu", npu, str(parts.runtime)], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("vnpu:emulator", "missing", f"{parts.qemu} does not run: {e}",
                     fix=f"remove {parts.root} (hexbuild makes the parts again at the next run)")
    first = (version.stdout.strip().splitlines() or ["?"])[0]
    if "usage: runtime" not in runs.stderr:  # the runtime, started without its socket, says how it is run
        said = (runs.stderr.strip() or runs.stdout.strip() or f"exit {runs.returncode}").splitlines()[-1]
        return Check("vnpu:emulator", "missing", f"{parts.qemu} -cpu {npu} does not run the DSP runtime: {said}",
                     fix=f"remove {parts.root} (hexbuild makes the parts again at the next run)")
    return Check("vnpu:emulator", "ok", f"{first}: -cpu {npu} runs the virtual NPU's DSP runtime")


def _hmx(skel: Path, lib_dir: Path, npu: str, manifest) -> Check:
    from ..artifacts.elf import NotElf
    from ..artifacts.hmx import EMPTY, NONE, PRESENT, skel_hmx
    from ..vnpu.skel import hmx_switch, knob_of

    if not skel.is_file():
        return _not_checked("vnpu:hmx", f"no {skel.name} (package:htp-lib)")
    try:
        facts = skel_hmx(skel)
    except NotElf as e:
        return Check("vnpu:hmx", "missing", f"{skel.name}: {e}", fix="deploy the package again")
    if facts.state == EMPTY:
        return Check("vnpu:hmx", "ok", f"{skel.name} was built without HMX ({facts.evidence()} empty): its HVX "
                     "code is all there is, and qemu-hexagon runs it")
    if facts.state == NONE:
        return Check("vnpu:hmx", "ok", f"{skel.name} holds no HMX code")
    if facts.state != PRESENT:
        return Check("vnpu:hmx", "warn", f"{skel.name} has no symbol table: whether it holds HMX code cannot be told",
                     fix="an HMX instruction stops the emulated DSP (qemu: unhandled CPU exception 0x15)")
    switch = hmx_switch(manifest, lib_dir)
    fix = (f"runs emulated with HMX off: {knob_of(switch)} 0 ({switch}=0) takes its HVX paths" if switch else
           "this revision cannot turn HMX off: run it on a phone, or build its skels without HMX")
    return Check("vnpu:hmx", "missing", f"{skel.name} holds HMX code ({facts.evidence()}): its HMX matmul cannot be "
                 f"emulated (qemu-hexagon has no HMX); runs refuse it (exit 12)", fix=fix)


def _session(parts, skel: Path, npu: str) -> Check:
    from ..results.fastrpc_errors import explain_code

    if parts is None:
        return _not_checked("fastrpc:session", "the virtual NPU's parts are not there (fastrpc:library)")
    if not skel.is_file():
        return _not_checked("fastrpc:session", f"no {skel.name} to open (package:htp-lib)")
    uri = f"file:///{skel.name}?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_VNPU_")}
    env.update(HEXBUILD_VNPU_QEMU=str(parts.qemu), HEXBUILD_VNPU_RUNTIME=str(parts.runtime), HEXBUILD_VNPU_CPU=npu,
               ADSP_LIBRARY_PATH=str(skel.parent))
    lib = parts.host_lib_dir("x86_64") / "libcdsprpc.so"
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", _OPEN, str(lib), uri], capture_output=True, text=True, env=env,
                              timeout=SESSION_TIMEOUT, stdin=subprocess.DEVNULL, cwd=str(skel.parent))
    except subprocess.TimeoutExpired:
        return Check("fastrpc:session", "missing", f"opening a session of {skel.name} did not finish within "
                     f"{SESSION_TIMEOUT:g} s", fix="HEXBUILD_VNPU_LOG=1 hexbuild run ... traces the session's messages")
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("hexbuild-vnpu:") and "not modelled" not in ln]
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2:
        return Check("fastrpc:session", "missing", f"the session's host side failed: "
                     f"{(said or done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}",
                     fix=f"remove {parts.root} (hexbuild makes the parts again at the next run)")
    code = int(words[0])
    if code:
        expl = explain_code(code)
        return Check("fastrpc:session", "missing", f"opening a session of {skel.name} on the emulated {npu} cDSP failed: "
                     f"0x{code:x} {expl.name or ''}" + (f" ({said[-1]})" if said else ""),
                     fix="hexbuild verify PKG (the skel's format and symbols); the line above names what the DSP "
                         "side refused")
    return Check("fastrpc:session", "ok", f"a session of {skel.name} opened on the emulated {npu} cDSP and closed "
                 f"({time.monotonic() - start:.1f} s): loaded, every import resolved, its open answered")
