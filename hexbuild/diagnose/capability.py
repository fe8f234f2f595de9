"""What the package and the target can do, which decides which device checks are required:

- a **CPU-only package** (artifacts/npu.py: no Hexagon host library) opens no HTP session, so the
  FastRPC checks (library, device node, unsigned PD, the skel on ADSP_LIBRARY_PATH) are shown
  for what an NPU package would meet there, but never required;
- an **emulated target** (``caps.emulator``: ``qemu:``) has an AArch64 CPU and no NPU at all: the
  FastRPC checks would only probe this machine, so they are not run; instead ``emulator`` checks
  qemu-aarch64 and the sysroot, and ``npu`` says whether the package can run there (a package
  with the Hexagon backend asks for sessions that cannot open: a CPU fallback, exit 12);
- an emulated target **with a virtual NPU** (``caps.virtual_npu``: ``qemu+npu:``) has the
  ``emulator`` check too, and its FastRPC checks probe the virtual NPU instead (diagnose/vnpu.py).
"""

from __future__ import annotations

from ..artifacts.npu import CPU, HOST_LIB, NPU, npu_support
from ..doctor import Check
from ..errors import EnvironmentMissing

# the checks only an NPU package needs to pass
NPU_ONLY = frozenset({"package:htp-lib", "package:sessions", "fastrpc:library", "fastrpc:device-node",
                      "adsp-library-path", "fastrpc:unsigned-pd-shell", "fastrpc:session", "vnpu:emulator",
                      "vnpu:hmx"})


def npu_check(target, manifest, dest: str, *, emulated: bool) -> Check:
    support = npu_support(manifest)
    if manifest is None:
        if emulated:
            return Check("npu", "missing", f"nothing hexbuild deployed at {dest} (no .hexbuild/manifest.json)",
                         fix=f"hexbuild deploy PKG --target {target.spec}, or pass --package PKG")
        return Check("npu", "info", "nothing deployed: what the package needs is unknown")
    if support == CPU:
        if emulated:  # informational, as the one rule says of a CPU-only package everywhere
            return Check("npu", "info", f"the package runs on the CPU only (no {HOST_LIB}), as {target.kind}: does")
        return Check("npu", "info", f"the package runs on the CPU only (no {HOST_LIB}): the FastRPC checks are "
                     "not required (an NPU package would need them)")
    if support == NPU:
        if getattr(target.caps, "virtual_npu", False):
            return Check("npu", "ok", f"the package has the Hexagon backend ({HOST_LIB}): its HTP sessions open on "
                         f"{target.kind}:'s virtual NPU, an emulated {getattr(target, 'npu', '')} cDSP (the checks "
                         "below)")
        if emulated:
            return Check("npu", "missing",
                         f"{target.kind}: emulates an AArch64 CPU and has no NPU, but the package has the Hexagon "
                         f"backend ({HOST_LIB}): its runs ask for HTP sessions that cannot open here and fall back "
                         "to the CPU (exit 12)",
                         fix="deploy a CPU-only build here (hexbuild build --os linux --toolchain open), or run with "
                             "--allow-cpu-fallback")
        return Check("npu", "ok", f"the package has the Hexagon backend ({HOST_LIB}): the checks below decide "
                     "whether its HTP sessions open")
    return Check("npu", "warn" if emulated else "info",
                 "the manifest lists no libraries: whether the package asks for HTP sessions is unknown")


def emulator_check(target) -> Check:
    """qemu-aarch64 and the sysroot the programs run against (a bad --sysroot is bad input)."""
    try:
        target.qemu, target.sysroot  # noqa: B018 (not preflight: qemu+npu's parts are checks of their own)
    except EnvironmentMissing as e:
        return Check("emulator", "missing", e.message, fix=e.hint)
    version = target.glibc_version()
    return Check("emulator", "ok", f"{target.qemu} -L {target.sysroot}" + (f" (glibc {version})" if version else ""))
