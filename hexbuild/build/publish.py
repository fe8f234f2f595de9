"""After the build ran: a failure explained from its log, or the install moved into place,
verified and given its manifest (``BuildResult``)."""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BuildFailed, VerifyFailed
from ..toolchain import commands as cmds
from ..toolchain.buildlog import BuildLog, diagnose
from ..ui import ui
from .container import default_user
from .plan import BuildPlan

_VERSION_TAG = re.compile(r":v?(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass
class BuildResult:
    package: Path
    build_dir: Path
    log: Path
    os: str
    build_type: str
    preset: str
    htp_versions: list[str]
    image: str | None
    digest: str | None
    duration_s: float
    verify: dict[str, Any]
    engine: str
    container: str | None = None
    manifest: dict[str, Any] | None = None
    status: str = "ok"
    toolchain: str = "vendor"
    build_targets: list[str] = field(default_factory=list)
    lacks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "package": str(self.package), "build_dir": str(self.build_dir),
                "log": str(self.log), "image": self.image, "digest": self.digest, "preset": self.preset,
                "build_type": self.build_type, "os": self.os, "htp_versions": self.htp_versions,
                "toolchain": self.toolchain, "build_targets": self.build_targets, "lacks": self.lacks,
                "duration_s": round(self.duration_s, 3), "verify": self.verify}


# What deploy and run need to know about the revision inside a package, long after the checkout
# is gone: how it selects sessions, which knobs and tools it has, whose scripts it follows.
MANIFEST_FACTS = ("revision", "device_selection", "device_names", "env_vars", "tools", "scripts", "htp_versions",
                  "plan_rules")


def revision_facts(facts) -> dict:
    data = facts.to_json()
    return {k: data[k] for k in MANIFEST_FACTS}



def preload_checks() -> None:
    """Import what verify and the manifest need on a thread of its own while the build runs:
    the main thread only waits on the container (or the compiler) then, so the imports cost
    the build nothing; an up-to-date build is over in well under a second."""
    import importlib
    import threading

    def load() -> None:
        try:
            for name in ("elftools.elf.elffile", "elftools.elf.gnuversions", "..artifacts.manifest",
                         "..artifacts.verify"):
                importlib.import_module(name, __package__)
        except Exception:  # the checks import them again and report what is missing
            pass

    threading.Thread(target=load, daemon=True, name="hexbuild-preload").start()


def finish(plan: BuildPlan, rc: int, log: BuildLog, start: float, *, image: str | None, digest: str | None,
            container: str | None) -> BuildResult:
    from ..artifacts.elf import parse_once

    if rc != 0:
        raise _failure(plan, rc, log, image)
    _publish(plan)
    with parse_once():  # verify and the manifest read the same ELF files: parse each once
        return _verified(plan, log, start, image=image, digest=digest, container=container)


def _verified(plan: BuildPlan, log: BuildLog, start: float, *, image: str | None, digest: str | None,
              container: str | None) -> BuildResult:
    from ..artifacts import verify_package, write_manifest

    report = verify_package(plan.package, os=plan.os, htp_versions=plan.htp_versions, toolchain=plan.toolchain.name)
    for note in report.notes:
        ui.info(f"verify: note: {note}")
    for c in report.checks:
        if c.status == "warn":
            ui.warn(f"verify: {c.file}: {c.check}: {c.detail}")
    if not report.ok:
        first = report.failed()[0]
        more = f" (and {report.failures - 1} more)" if report.failures > 1 else ""
        for c in report.failed()[1:]:
            ui.error(f"verify: {c.file}: {c.check}: {c.detail}")
        raise VerifyFailed(f"the built package {plan.install_dir} fails verification: {first.file}: {first.check}: "
                           f"{first.detail}{more}", hint=f"hexbuild verify {plan.package} --os {plan.os} -v",
                           details={"verify": report.to_json()})
    meta = {"os": plan.os, "llama_cpp": revision_facts(plan.facts),
            "image": {"reference": image, "digest": digest}, "preset": plan.preset, "build_type": plan.build_type,
            "htp_versions": plan.htp_versions, "engine": plan.options.engine,
            "cmake_args": list(plan.options.cmake_args), "toolchain": plan.toolchain.name,
            "lacks": plan.toolchain.lacks}
    if plan.targets:
        meta["build_targets"] = plan.targets
    manifest = write_manifest(plan.package, meta)
    _say_no_hmx(manifest)
    if plan.options.engine == "docker":
        _hand_over([plan.package / "manifest.json"], plan.options.user or default_user())
    duration = time.monotonic() - start
    ui.detail(f"build finished in {duration:.1f}s; log: {log.path}")
    return BuildResult(package=plan.package, build_dir=plan.build_path, log=log.path, os=plan.os,
                       build_type=plan.build_type, preset=plan.preset, htp_versions=plan.htp_versions, image=image,
                       digest=digest, duration_s=duration, verify=report.to_json(), engine=plan.options.engine,
                       container=container, manifest=manifest, toolchain=plan.toolchain.name,
                       build_targets=plan.targets, lacks=list(manifest.get("lacks") or []))


def _say_no_hmx(manifest: dict[str, Any]) -> None:
    """One warning when the skels were built without HMX (the manifest's lacks says so too)."""
    from ..artifacts.manifest import no_hmx

    skels = no_hmx(manifest.get("files") or [])
    if skels:
        first, units = next(iter(skels.items()))
        more = f" and {len(skels) - 1} more NPU libraries" if len(skels) > 1 else ""
        ui.warn(f"no HMX in the NPU libraries: the toolchain cannot assemble it ({first}{more}: "
                f"{', '.join(units)} built empty); the manifest records lacks: hmx")


def up_to_date(recorded: dict[str, Any], start: float) -> BuildResult:
    """The result of the last build, whose inputs and package are unchanged (build/uptodate.py)."""
    ui.info(f"up to date: {recorded['package']} (nothing changed since the build logged in {recorded['log']}; "
            "--force builds anyway)")
    return BuildResult(package=Path(recorded["package"]), build_dir=Path(recorded["build_dir"]),
                       log=Path(recorded["log"]), os=recorded["os"], build_type=recorded["build_type"],
                       preset=recorded["preset"], htp_versions=list(recorded["htp_versions"]),
                       image=recorded.get("image"), digest=recorded.get("digest"),
                       duration_s=time.monotonic() - start, verify=recorded.get("verify") or {}, engine="docker",
                       status="up-to-date", toolchain=recorded.get("toolchain", "vendor"),
                       build_targets=list(recorded.get("build_targets") or []),
                       lacks=list(recorded.get("lacks") or []))


def _failure(plan: BuildPlan, rc: int, log: BuildLog, image: str | None) -> BuildFailed:
    text = log.text()
    step = "the build"
    for line in reversed(log.tail):
        m = re.match(r"^\+ cmake (--preset|--build|--install)\b", line)
        if m:
            step = {"--preset": "configure (cmake --preset)", "--build": "cmake --build",
                    "--install": "cmake --install"}[m.group(1)]
            break
    tail = log.last()
    if not ui.quiet:
        ui.info(f"last lines of {log.path}:")
        for line in tail:
            ui.info(f"  | {line}")
    rule = diagnose(text, image_older_than_pin=image_is_older(image, plan.image_pinned))
    hint = rule.hint if rule else f"the whole log is {log.path}"
    return BuildFailed(f"{step} failed (exit {rc}) for {plan.preset}; log: {log.path}", hint=hint,
                       details={"exit_code": rc, "log": str(log.path), "log_tail": tail,
                                "known_failure": rule.id if rule else None})


def image_is_older(used: str | None, pinned: str | None) -> bool:
    """True when ``used`` is the pinned image's repository at a lower vMAJOR.MINOR tag."""
    u, p = _repo_version(used), _repo_version(pinned)
    return bool(u and p and u[0] == p[0] and u[1] < p[1])


def _repo_version(ref: str | None) -> tuple[str, tuple[int, ...]] | None:
    if not ref:
        return None
    base = ref.split("@", 1)[0]
    m = _VERSION_TAG.search(base)
    if not m:
        return None
    return base[: m.start()].rsplit("/", 1)[-1], tuple(int(g or 0) for g in m.groups())


def _publish(plan: BuildPlan) -> None:
    """Move the finished install (<install-dir>.hexbuild-partial) into place, replacing the
    previous package as a whole."""
    final = plan.package
    staging = Path(str(final) + cmds.STAGING_SUFFIX)
    if not staging.is_dir():
        raise BuildFailed(f"the install step left nothing in {staging}",
                          hint="check that the preset enables GGML_HEXAGON and installs to the prefix")
    _check_targets(plan, staging)
    old = Path(str(final) + ".hexbuild-old")
    try:
        if old.exists():
            shutil.rmtree(old)
        if final.exists() or final.is_symlink():
            os.rename(final, old)
        os.rename(staging, final)
    except OSError as e:
        raise BuildFailed(f"cannot move the new package into {final}: {e.strerror or e}") from None
    shutil.rmtree(old, ignore_errors=True)
    if old.exists():
        ui.warn(f"could not remove the previous package at {old}")


def _check_targets(plan: BuildPlan, staging: Path) -> None:
    """Every --build-target left something in the package (a program in bin/ or a library in
    lib/): the install step skips what was not built, so a target that installs nothing would
    otherwise go unnoticed."""
    missing = [t for t in plan.targets if not (staging / "bin" / t).exists()
               and not any((staging / "lib").glob(f"lib{t}.so*")) and not (staging / "lib" / f"{t}.so").exists()]
    if missing:
        raise BuildFailed(f"built, but nothing in the package for --build-target {', '.join(missing)} "
                          f"(no bin/NAME or lib/libNAME.so in {staging.name})",
                          hint="name program or library targets; the build log lists what was installed")


def _hand_over(paths: list[Path], user: str) -> None:
    """When hexbuild runs as root for another build user, what it created belongs to that user
    (the container writes into the build directory as that user)."""
    if os.geteuid() != 0:
        return
    if not user.partition(":")[0].isdigit():
        return
    uid, gid = _numeric_user(user)
    if uid == 0:
        return
    for p in paths:
        try:
            os.chown(p, uid, gid)
        except OSError:
            pass


def _numeric_user(user: str) -> tuple[int, int]:
    uid_s, _, gid_s = user.partition(":")
    uid = int(uid_s) if uid_s.isdigit() else 0
    return uid, int(gid_s) if gid_s.isdigit() else uid
