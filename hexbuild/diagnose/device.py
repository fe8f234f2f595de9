"""Device checks for ``hexbuild doctor --target T``: why an HTP session would not open there.

Each check is a :class:`hexbuild.doctor.Check` (status ok | missing | warn | info, detail, fix),
named so that ``hexbuild explain`` can point at the ones behind an error code:

    soc, package:htp-lib, package:sessions, fastrpc:library, fastrpc:device-node,
    adsp-library-path, fastrpc:unsigned-pd-shell, selinux, android, memory, glibc, shell, tools

and on qemu+npu: (its virtual NPU, vnpu.py): fastrpc:session, vnpu:emulator, vnpu:hmx.

The facts come from one read-only script on the device (probe.py) through the Target interface,
so every target kind (adb, adb+ssh, ssh, local, qemu) is checked the same way. Nothing changes
on the device. A missing piece is a check with status "missing" and its fix.
"""

from __future__ import annotations

import posixpath
from concurrent.futures import ThreadPoolExecutor
import tempfile
from pathlib import Path
from typing import Any

from .. import data
from ..doctor import Check
from ..errors import EnvironmentMissing
from ..targets import socs
from ..targets.base import DeviceInfo, Target
from ..artifacts.glibc import key
from ..artifacts.npu import CPU, npu_support
from .capability import NPU_ONLY, emulator_check, npu_check
from .probe import DeviceFacts, gather

# Libraries whose glibc needs stand for the whole package when it is only on the device.
_GLIBC_SAMPLES = ("lib/libggml-base.so", "lib/libggml-cpu.so", "lib/libllama.so", "lib/libggml-hexagon.so",
                  "bin/llama-cli", "bin/llama-completion")


def _mib(n: int) -> str:
    return f"{n / 1024 ** 2:.0f} MiB"


def arch_number(arch: str | None) -> int | None:
    digits = (arch or "").lower().lstrip("v")
    return int(digits) if digits.isdigit() else None


def package_manifest(package: str | Path | None) -> dict[str, Any] | None:
    """A local package's metadata (``PKG/manifest.json``) with its files' sizes and sha256, read
    the way deploy reads a package: hashes through deploy's cache, not all of them again."""
    if package is None:
        return None
    from ..artifacts.manifest import require_package_dir
    from ..deploy.package import load_package

    pkg = load_package(require_package_dir(Path(package)))
    try:
        return {**pkg.meta, "files": [{"path": rel, "size": f.size, "sha256": f.sha256} for rel, f in pkg.files.items()]}
    finally:
        pkg.close()


def _files(manifest: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    files = (manifest or {}).get("files")
    if not isinstance(files, list):
        return {}
    return {str(f.get("path")): f for f in files if isinstance(f, dict) and f.get("path")}


def check_device(target: Target, *, dest: str | None = None, package: str | Path | None = None,
                 model: str | Path | None = None) -> tuple[DeviceInfo, list[Check]]:
    """Every device check against ``target`` (the install at ``dest``, the manifest hexbuild
    left there unless ``package`` names a local package to compare with)."""
    from ..runner.install import default_dest, read_manifest

    dest = dest or default_dest(target)
    if hasattr(target, "expand"):
        dest = target.expand(dest)  # type: ignore[attr-defined]
    info = target.probe(dest)
    if info.state not in ("device", "ready"):
        return info, [Check("device", "missing", f"{target.spec} is {info.state}", required=True,
                            fix="bring the device online (adb devices -l) and retry")]
    arch = info.htp_arch
    os_name = info.os
    runtime = data.table("fastrpc_runtime")
    side = runtime.get(os_name, runtime["linux"])
    lib_dir = posixpath.join(dest, "lib")
    skel = posixpath.join(lib_dir, f"libggml-htp-{arch}.so") if arch else posixpath.join(lib_dir, "libggml-htp-unknown.so")
    # the facts and the deployed manifest are two device calls that do not depend on each other
    with ThreadPoolExecutor(max_workers=2) as pool:
        manifest_call = pool.submit(read_manifest, target, dest)
        facts = gather(target, os_name=os_name, skel=skel, libraries=list(side["libraries"]),
                       nodes=list(side["nodes"]), shells=list(side["unsigned_shells"]))
        deployed = manifest_call.result()
    local = package_manifest(package)
    manifest = local if local is not None else deployed
    ctx = _Context(target, info, facts, dest, lib_dir, skel, arch, manifest, deployed, local is not None, side)
    emulated = target.caps.emulator  # capability.py: no NPU there, and the runtime is the sysroot's
    if target.caps.virtual_npu:  # qemu+npu: the FastRPC checks ask its virtual NPU (vnpu.py)
        from .vnpu import vnpu_checks

        checks = [emulator_check(target), npu_check(target, manifest, dest, emulated=True), *vnpu_checks(ctx, package)]
    elif emulated:
        checks = [emulator_check(target), npu_check(target, manifest, dest, emulated=True)]
    else:
        checks = [ctx.soc(), npu_check(target, manifest, dest, emulated=False), ctx.htp_lib(), ctx.sessions(),
                  ctx.library(), ctx.nodes(), ctx.adsp_path(), ctx.unsigned_shell(), ctx.selinux()]
    if os_name == "android":
        checks.append(ctx.android())
    if model is not None:
        checks.append(ctx.memory(model))
    if os_name == "linux":
        checks.append(ctx.glibc(package))
    checks += [ctx.shell(), ctx.tools()]
    cpu_only = npu_support(manifest) == CPU
    for c in checks:
        c.required = c.status == "missing" and not (cpu_only and c.name in NPU_ONLY)
    return info, checks


class _Context:
    def __init__(self, target, info, facts: DeviceFacts, dest, lib_dir, skel, arch, manifest, deployed,
                 from_package, side):
        self.target, self.info, self.facts = target, info, facts
        self.dest, self.lib_dir, self.skel, self.arch = dest, lib_dir, skel, arch
        self.manifest, self.deployed, self.from_package, self.side = manifest, deployed, from_package, side
        self.files = _files(manifest)

    @property
    def skel_rel(self) -> str:
        return f"lib/libggml-htp-{self.arch}.so"

    # -- the SoC and the package -----------------------------------------------------------------
    def soc(self) -> Check:
        i = self.info
        name = i.soc or i.platform or "unknown SoC"
        if i.htp_arch:
            found = socs.lookup(i.soc, i.platform)
            return Check("soc", "ok", f"{name} ({found.name if found else '?'}): HTP {i.htp_arch}")
        return Check("soc", "warn", f"{name}: not in hexbuild's SoC table, HTP arch unknown",
                     fix="the backend asks the DSP itself; to pin it, run with --hex-arch vNN (GGML_HEXAGON_ARCH) "
                         "and add the SoC to hexbuild/data/socs.toml with its source")

    def _no_package(self, name: str) -> Check:
        return Check(name, "missing", f"nothing hexbuild deployed at {self.dest} (no .hexbuild/manifest.json)",
                     fix=f"hexbuild deploy PKG --target {self.target.spec}, or pass --package PKG")

    def htp_lib(self) -> Check:
        if self.manifest is None:
            return self._no_package("package:htp-lib")
        if npu_support(self.manifest) == CPU:
            return Check("package:htp-lib", "info", "a CPU-only package has no HTP libraries")
        have = sorted({p[len("lib/libggml-htp-"):-3] for p in self.files if p.startswith("lib/libggml-htp-")
                       and p.endswith(".so")}, key=lambda v: arch_number(v) or 0)
        where = "the package" if self.from_package else f"the install at {self.dest}"
        if not self.arch:
            return Check("package:htp-lib", "warn", f"{where} has HTP {' '.join(have) or 'none'}; the device's arch is unknown",
                         fix="check the 'Hexagon Arch version' line of a run against this list")
        if self.skel_rel in self.files:
            return Check("package:htp-lib", "ok", f"{where} has {self.skel_rel} for this {self.arch} device")
        return Check("package:htp-lib", "missing",
                     f"{where} has no {self.skel_rel} (it has {' '.join(have) or 'no HTP libraries'}): "
                     f"the DSP cannot load a skel for {self.arch} (error 0x80000406)",
                     fix=f"hexbuild build --htp {self.arch} (the arch must be one the revision builds), then deploy")

    def sessions(self) -> Check:
        n = arch_number(self.arch)
        if self.info.os == "android" and n is not None and n < 75:
            ndev = (self.deployed or {}).get("ndev")
            if isinstance(ndev, int) and ndev > 1:
                return Check("package:sessions", "missing",
                             f"launch scripts written for {ndev} sessions, but llama.cpp opens one on Android below v75",
                             fix=f"hexbuild deploy --target {self.target.spec} --ndev 1")
            return Check("package:sessions", "info", f"Android on {self.arch}: llama.cpp opens one HTP session only "
                         "(forcing ndev to 1 for SoCs archs lower than v75)")
        return Check("package:sessions", "ok", "several HTP sessions are possible" if n else "session limit unknown")

    # -- the FastRPC runtime -----------------------------------------------------------------------
    def library(self) -> Check:
        found = [f for f in self.facts.found.get("lib", []) if f.type != "dangling"]
        exact = [f.path for f in found if f.path.endswith("/libcdsprpc.so")]
        if exact:
            return Check("fastrpc:library", "ok", f"{exact[0]} ({self.side['library_source']})")
        if found:
            return Check("fastrpc:library", "missing",
                         f"only {found[0].path}: the backend dlopens the name libcdsprpc.so, which no search directory has",
                         fix=f"install the development link (ln -s {posixpath.basename(found[0].path)} libcdsprpc.so "
                             "in that directory, or the fastrpc -dev package)")
        looked = ", ".join(p.replace("/libcdsprpc.so*", "") for p in self.side["libraries"])
        fix = ("this vendor image exposes no FastRPC library to the shell: not a Snapdragon phone, or a ROM without "
               "the Qualcomm vendor blobs" if self.info.os == "android" else
               "install the board's FastRPC user library (the vendor's fastrpc package, or qualcomm/fastrpc built "
               "for the board) so that libcdsprpc.so is in /usr/lib")
        return Check("fastrpc:library", "missing", f"no libcdsprpc.so in {looked}: the backend cannot load its driver "
                     "(ggml-hex: failed to load libcdsprpc.so)", fix=fix)

    def nodes(self) -> Check:
        found = self.facts.found.get("node", [])
        chars = [f for f in found if f.type == "char"]
        usable = [f for f in chars if f.rw]
        patterns = ", ".join(self.side["nodes"])
        if usable:
            return Check("fastrpc:device-node", "ok", ", ".join(f.path for f in usable) + " (read/write)")
        if chars:
            user = self.facts.get("user") or self.facts.get("uid") or "this user"
            return Check("fastrpc:device-node", "missing",
                         f"{', '.join(f.path for f in chars)} not readable and writable by {user}",
                         fix="add the user to the node's group (Linux: usermod -aG fastrpc USER, then log in again)")
        if found:
            return Check("fastrpc:device-node", "missing", f"{found[0].path} is not a character device",
                         fix="the FastRPC driver did not create it: reload the fastrpc kernel module or reboot")
        return Check("fastrpc:device-node", "missing", f"no FastRPC device node ({patterns}): the kernel driver is not "
                     "loaded or the compute DSP is not up",
                     fix="Linux: modprobe fastrpc and check the cDSP remoteproc is running "
                         "(/sys/class/remoteproc/*/state); Android: this kernel has no FastRPC driver")

    def adsp_path(self) -> Check:
        env = self.facts.get("adsp")
        note = ""
        if env and env != "<unset>" and ":" in env:
            note = f"; note: this shell's own ADSP_LIBRARY_PATH={env} holds ':', which FastRPC reads as one directory " \
                   "name (qualcomm/fastrpc#379) — hexbuild's runs replace it"
        if not self.facts.get("libdir"):
            return Check("adsp-library-path", "missing", f"ADSP_LIBRARY_PATH={self.lib_dir} (as hexbuild run sets it) "
                         "does not exist" + note, fix=f"hexbuild deploy PKG --target {self.target.spec}")
        if not self.arch:
            return Check("adsp-library-path", "warn", f"ADSP_LIBRARY_PATH={self.lib_dir}; arch unknown, skel not checked" + note)
        size, sha = self.facts.get("skelsize").strip(), self.facts.get("skelsha")
        if not size:
            return Check("adsp-library-path", "missing", f"no {posixpath.basename(self.skel)} in ADSP_LIBRARY_PATH="
                         f"{self.lib_dir}: the DSP cannot find the skel (error 0x80000406)" + note,
                         fix=f"deploy a package built with --htp {self.arch}")
        want = self.files.get(self.skel_rel)
        if want is None:
            return Check("adsp-library-path", "warn", f"{self.skel} is there ({size} bytes) but no manifest lists it" + note,
                         fix="deploy with hexbuild so the install can be checked")
        if str(want.get("size")) != size or (want.get("sha256") and want.get("sha256") != sha):
            whose = "the package" if self.from_package else "the manifest"
            return Check("adsp-library-path", "missing",
                         f"{self.skel} differs from {whose} ({size} bytes, sha256 {sha[:12]}…; expected "
                         f"{want.get('size')} bytes, {str(want.get('sha256'))[:12]}…)" + note,
                         fix=f"hexbuild deploy --target {self.target.spec} --verify (repairs drift)")
        return Check("adsp-library-path", "ok", f"ADSP_LIBRARY_PATH={self.lib_dir} (one directory); "
                     f"{posixpath.basename(self.skel)} matches (size, sha256)" + note)

    def unsigned_shell(self) -> Check:
        found = [f for f in self.facts.found.get("shell", []) if f.type != "dangling"]
        if found:
            return Check("fastrpc:unsigned-pd-shell", "ok", f"{found[0].path}: the unsigned PD the backend asks for "
                         "(DSPRPC_CONTROL_UNSIGNED_MODULE) can start")
        return Check("fastrpc:unsigned-pd-shell", "missing",
                     "no fastrpc_shell_unsigned_3: the backend runs its skel in an unsigned PD on every session, so "
                     "the session fails (failed to enable unsigned PD / 0x80000406)",
                     fix="this firmware cannot run unsigned code on the cDSP: use a device whose image ships the unsigned "
                         "PD shell, or sign the skel for it")

    def selinux(self) -> Check:
        mode = self.facts.get("selinux")
        ctx = self.facts.get("context")
        if mode in ("", "-"):
            return Check("selinux", "info", "no getenforce: SELinux not in use")
        detail = f"SELinux {mode}" + (f", context {ctx}" if ctx else "")
        if mode.lower() == "enforcing" and ctx and not any(s in ctx for s in (":shell:", ":su:", "unconfined")):
            return Check("selinux", "warn", detail + ": an app context may be denied the unsigned PD shell "
                         "(avc denied read fastrpc_shell_unsigned_3)",
                         fix="run through adb shell (hexbuild's adb targets do) rather than from an app such as Termux")
        return Check("selinux", "ok", detail)

    def android(self) -> Check:
        rel, sdk = self.facts.get("release") or "?", self.facts.get("sdk") or "?"
        return Check("android", "info", f"Android {rel} (SDK {sdk}); the deployed revision enables an unsigned PD per "
                     "session and stops that session if the device refuses ('failed to enable unsigned PD')")

    # -- memory, glibc, tools ---------------------------------------------------------------------
    def memory(self, model: str | Path) -> Check:
        from ..plan import plan_model
        from ..plan_rules import ASSUMED, rules_from_manifest

        # the install's own rules (its budget among them), as plan --target reads them
        rules = rules_from_manifest((self.manifest or {}).get("llama_cpp"), "target") or ASSUMED
        plan = plan_model(str(model), rules=rules)
        need = sum(plan["per_session_bytes"]) + sum(plan["per_session_other_bytes"]) + \
            plan["cpu"]["input_bytes"] + plan["cpu"]["row_limited_bytes"]
        avail = self.facts.kb("memavail")
        per = ", ".join(_mib(b) for b in plan["per_session_bytes"])
        detail = f"{Path(str(model)).name}: {plan['ndev']} session(s) of {per} (plan); needs about {_mib(need)}"
        if avail is None:
            return Check("memory", "warn", detail + "; free memory unknown (no MemAvailable)")
        detail += f", {_mib(avail)} available"
        if avail < need:
            return Check("memory", "missing", detail, fix="close other apps, or use a smaller quantization of the model")
        return Check("memory", "ok", detail)

    def glibc(self, package: str | Path | None) -> Check:
        """The package's GLIBC needs (its manifest's record, read from the ELF files when it has
        none) against the device's glibc (hexbuild.artifacts.glibc does the reading)."""
        from ..artifacts.glibc import parse_version, summary

        if self.target.caps.emulator:  # the programs see the sysroot's glibc, not this machine's
            try:
                have = self.target.glibc_version()
            except EnvironmentMissing:  # no sysroot: the emulator check says so
                have = None
            dev = "sysroot"
        else:
            have = parse_version(self.facts.get("glibc")) if "libc" in self.facts.get("glibc").lower() else None
            dev = "device"
        per_file = self._glibc_needs(package)
        need = summary(per_file).get("GLIBC")
        if (self.manifest or {}).get("runtime"):
            return Check("glibc", "ok", f"the install brings its own runtime (deploy --bundle-runtime); {dev} glibc "
                         f"{have or 'unknown'}")
        if need is None:
            return Check("glibc", "info", f"{dev} glibc {have or 'unknown'}; the package asks for no GLIBC_ version "
                         "(static, or nothing deployed)")
        who = max((r for r, v in per_file.items() if v.get("GLIBC") == need), default="?")
        if have is None:
            return Check("glibc", "warn", f"the package needs GLIBC_{need} ({who}); the {dev}'s glibc is unknown "
                         "(musl, or no getconf/ldd)")
        if key(have) < key(need):
            return Check("glibc", "missing", f"the package needs GLIBC_{need} ({who}) but the {dev} has glibc {have}: "
                         "its programs will not start", fix="hexbuild deploy --bundle-runtime (ships the image's loader "
                         "and libc), or build against glibc " + have + " or older")
        return Check("glibc", "ok", f"{dev} glibc {have} >= GLIBC_{need} ({who})")

    def _glibc_needs(self, package: str | Path | None) -> dict[str, dict[str, str]]:
        from ..artifacts.glibc import needs, package_needs

        recorded = (self.manifest or {}).get("glibc")
        if isinstance(recorded, dict) and isinstance(recorded.get("files"), dict):
            return {k: v for k, v in recorded["files"].items() if isinstance(v, dict)}
        if package is not None:
            return package_needs(Path(package), [r for r in self.files if r.startswith(("bin/", "lib/"))])
        out: dict[str, dict[str, str]] = {}
        rels = [r for r in _GLIBC_SAMPLES if r in self.files] or list(_GLIBC_SAMPLES[:2])
        with tempfile.TemporaryDirectory(prefix="hexbuild-doctor-") as tmp:
            for rel in rels:  # a few libraries stand for an install with no glibc record
                raw = self.target.read_file(posixpath.join(self.dest, rel))
                if raw is None:
                    continue
                local = Path(tmp) / posixpath.basename(rel)
                local.write_bytes(raw)
                found = needs(local)
                if found:
                    out[rel] = found
        return out

    def _tools(self):
        from ..targets.tools import REQUIRED, DeviceTools, probe_tools

        known = self.info.extra.get("tools")
        return (DeviceTools(**known) if isinstance(known, dict) else probe_tools(self.target)), REQUIRED

    def shell(self) -> Check:
        t, _ = self._tools()
        suite = (f"toybox {t.toybox}" if t.toybox else f"busybox {t.busybox}" if t.busybox
                 else t.coreutils or "unknown utilities")
        return Check("shell", "info", f"shell {t.shell}; {suite} ({t.userland} userland)")

    def tools(self) -> Check:
        t, required = self._tools()
        if t.problem:
            return Check("tools", "missing", f"the device's tools lack what hexbuild's deploy and run scripts need: "
                         f"{t.problem}", fix="install them on the device (toybox or coreutils, findutils), or use a "
                         "device that has them")
        return Check("tools", "ok", f"all {len(required)} programs hexbuild's scripts call, with the flags they use")

