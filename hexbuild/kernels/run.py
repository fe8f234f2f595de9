"""``hexbuild test kernels``: build a tree's HTP sources for the emulated DSP, run its kernels on
generated cases, compare each with its reference.

One container of the kernel check's image does the work (the tree read-only, hexbuild's work
directory for that tree read-write, no network, the invoking user): per HTP version, ninja
builds the harness (incrementally), then qemu-hexagon runs every case in one process. The host
writes the cases and judges the results.
"""

from __future__ import annotations

import os
import secrets
import shlex
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EnvironmentMissing, UsageError
from ..paths import cache_root
from ..toolchain.spec import ContainerSpec, Mount
from ..ui import ui
from . import build, cases as kc
from .image import QEMU_BIN
from .ops import families
from .tree import KernelTree, read_tree

EMULATED = ("v68", "v69", "v73", "v75")
RUN_TIMEOUT = 1800  # seconds for one version's cases: a hung emulator is stopped
SEED = 20261127


@dataclass
class KernelRequest:
    source: Path
    htp: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    out: Path | None = None
    threads: int = 4
    seed: int = SEED
    compare_device: Path | None = None


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def resolve(req: KernelRequest) -> tuple[KernelTree, list[str], list[str], dict[str, list[str]]]:
    """Check everything cheap before any work: the tree, the versions, the ops, the types.
    Returns (tree, versions, ops to run, {op: types})."""
    tree = read_tree(req.source)
    htps = req.htp or ["v73"]
    for v in htps:
        if v in ("v79", "v81"):
            raise UsageError(f"--htp {v}: qfloat rounding changed in v79 and the emulator models the pre-v79 "
                             "qfloat: a v79/v81 kernel cannot be checked here", hint="check v73 or v75")
        if v not in EMULATED:
            raise UsageError(f"--htp {v}: not an HTP version the emulator runs ({', '.join(EMULATED)})")
        if tree.htp_versions and v not in tree.htp_versions:
            raise UsageError(f"--htp {v}: this tree builds {', '.join(tree.htp_versions)} only")
    fams = families()
    if req.ops:
        unknown = [o for o in req.ops if o not in tree.ops]
        if unknown:
            raise UsageError(f"unknown op {unknown[0]}: this tree's HTP ops are {', '.join(sorted(tree.ops))}")
        ops = list(req.ops)
    else:
        ops = [o for o in sorted(tree.ops) if o in fams]
    types: dict[str, list[str]] = {}
    for op in ops:
        fam = fams.get(op)
        if fam is None:
            continue
        if req.types:
            bad = [t for t in req.types if all(t not in f.types for f in {fams[o] for o in ops if o in fams})]
            if bad:
                known = sorted({t for o in ops if o in fams for t in fams[o].types})
                which = f" for {', '.join(ops)}" if req.ops else ""
                raise UsageError(f"unknown type {bad[0]}{which}: known types are {', '.join(known)}")
            types[op] = [t for t in req.types if t in fam.types]
        else:
            types[op] = list(fam.default_types)
    if req.types and not req.ops:
        ops = [o for o in ops if types.get(o)]  # --types alone: the ops that have one of those types
    return tree, htps, ops, types


def make_cases(tree: KernelTree, ops: list[str], types: dict[str, list[str]], seed: int,
               threads: int) -> list[kc.KernelCase]:
    fams = families()
    out: list[kc.KernelCase] = []
    for op in ops:
        for t in types.get(op, []):
            # the same cases in every run (a stable key, not hash(): Python salts that per process)
            rng = np.random.default_rng([seed, zlib.crc32(op.encode()), zlib.crc32(t.encode())])
            for c in fams[op].make(tree, op, t, rng):
                c.id = len(out)
                c.n_threads = threads
                out.append(c)
    return out


MAX_RESTARTS = 64  # cases that may kill the emulator in one run before the rest is given up


def container_script(tree: KernelTree, htps: list[str], cases_file: str, ops: list[str]) -> str:
    """Build each version, then run its cases; when the emulator dies on a case (an instruction it
    lacks, a fault in the kernel), run again from the next case, so one bad case costs one case."""
    units = build.units_for(tree, ops) if tree.runnable else tree.units
    lines = ["set -u", *build.build_script(htps, build.objects_for(tree, units), link=tree.runnable)]
    for v in htps:
        d = f"{build.WORK}/build-{v}"
        lines += [
            f"if [ -f {d}/kernels.elf ]; then",
            f"  cd {d}; first=0; n=0",
            "  while :; do",
            f"    timeout {RUN_TIMEOUT} {QEMU_BIN} -cpu {v} kernels.elf {shlex.quote(cases_file)} results.$n.bin $first"
            " > emulator.$n.log 2>&1; rc=$?; echo $rc > emulator.$n.rc",
            "    [ $rc = 0 ] && break",
            "    p=''; read -r p < results.$n.bin.progress 2>/dev/null",
            f'    [ -n "$p" ] && [ $n -lt {MAX_RESTARTS} ] || break',
            "    first=$((p + 1)); n=$((n + 1))",
            "  done",
            "fi",
        ]
    return "\n".join(lines) + "\n"


def run(req: KernelRequest, *, engine_factory: Any = None) -> dict[str, Any]:
    """The whole check; returns the result document (its files written under --out)."""
    from ..toolchain.buildlog import BuildLog
    from ..toolchain.engine import DockerEngine
    from .image import ensure_kernel_image

    started = time.monotonic()
    tree, htps, ops, types = resolve(req)
    if req.compare_device is not None:
        from .compare import load

        load(req.compare_device)  # bad input before any work
    engine = (engine_factory or DockerEngine.connect)()
    try:
        image = ensure_kernel_image(engine.client)
        work = build.work_dir_for(cache_root() / "kernels", tree)
        build.prepare(tree, work, htps)
        cases = make_cases(tree, ops, types, req.seed, req.threads) if tree.runnable else []
        run_dir = work / f"run-{os.getpid()}-{secrets.token_hex(3)}"
        run_dir.mkdir(parents=True)
        try:
            kc.write_cases(run_dir / "cases.bin", cases)
            cases_blob = (run_dir / "cases.bin").read_bytes()
            for v in htps:
                d = work / f"build-{v}"
                for old in [*d.glob("results.*"), *d.glob("emulator.*"), d / "ninja.rc", d / "link.rc"]:
                    old.unlink(missing_ok=True)
            spec = ContainerSpec(
                name=f"hexbuild-kernels-{secrets.token_hex(4)}", image=image.image,
                command=["sh", "-c", container_script(tree, htps, f"{build.WORK}/{run_dir.name}/cases.bin", ops)],
                user=f"{os.getuid()}:{os.getgid()}", working_dir=build.WORK,
                mounts=[Mount(str(tree.root), build.SRC, read_only=True), Mount(str(work), build.WORK)],
                env={"HOME": "/tmp"})
            ui.command(spec.docker_run_argv())
            with BuildLog(work / "kernels.log", title=f"building and running {len(cases)} kernel cases") as log:
                rc = engine.run(spec, log)
            if rc != 0:
                raise EnvironmentMissing(f"the kernel check's container exited {rc}",
                                         hint=f"its log: {work / 'kernels.log'}")
            per_version = [_judge(tree, work, v, cases) for v in htps]
        finally:
            _rmtree(run_dir)
    finally:
        engine.close()
    from .compare import case_key, compare, save_outputs
    from .report import document, write

    doc = document(tree, htps, ops, types, cases, per_version, image, time.monotonic() - started,
                   explicit_ops=bool(req.ops))
    out = _out_dir(req)
    save_outputs(per_version, out)
    (out / "cases.bin").write_bytes(cases_blob)
    if req.compare_device is not None:
        outputs = {case_key(v): v["output"] for pv in per_version for v in pv["cases"] if v.get("output") is not None}
        doc["compare_device"] = cmp = compare(doc, outputs, req.compare_device)
        if cmp["differ"]:
            doc["ok"] = False
            doc["reason"] = (f"{cmp['differ']} of {cmp['compared']} cases differ from {req.compare_device} beyond "
                             "their tolerance")
    doc["files_outputs"] = {"outputs": str(out / "outputs.npz"), "cases": str(out / "cases.bin")}
    write(doc, out)
    return doc


def _judge(tree: KernelTree, work: Path, htp: str, cases: list[kc.KernelCase]) -> dict[str, Any]:
    """One version: build outcome, the emulator's runs, each case's verdict."""
    hb = build.results(tree, work, htp)
    d = work / f"build-{htp}"
    raw: dict[int, kc.RawResult] = {}
    deaths: dict[int, str] = {}   # case id -> why the emulator died on it
    last_rc = None
    n = 0
    while (d / f"emulator.{n}.rc").is_file():
        last_rc = (d / f"emulator.{n}.rc").read_text().strip()
        raw.update(kc.read_results(d / f"results.{n}.bin"))
        if last_rc != "0":
            progress = (d / f"results.{n}.bin.progress")
            text = progress.read_text().strip() if progress.is_file() else ""
            if text.isdigit():
                deaths[int(text)] = emulator_death(last_rc, (d / f"emulator.{n}.log").read_text(errors="replace"))
        n += 1
    judged = []
    for c in cases:
        r = raw.get(c.id)
        verdict: dict[str, Any] = {"id": c.id, "op": c.op, "type": c.type, "shape": c.shape, "htp": htp,
                                   "tolerance": c.tolerance, "error": None, "passed": False}
        if r is None:
            verdict["reason"] = deaths.get(c.id) or "not run: the emulator stopped before this case"
        elif r.status == kc.STATUS_NO_OP:
            verdict["reason"] = "not in this build of the tree"
        elif r.status not in (0, kc.HTP_STATUS_OK):
            verdict["reason"] = f"the op returned status {r.status}"
        else:
            got = kc.decode(c.dst, r.data)
            err = (c.check or kc.nmse)(got, c.expected)
            verdict.update(error=err, passed=bool(err <= c.tolerance), emulated_ms=round(r.ns / 1e6, 3),
                           output=got)
            if not verdict["passed"]:
                verdict["reason"] = f"error {err:.3g} above the tolerance {c.tolerance:g}"
        judged.append(verdict)
    return {"htp": htp, "build": hb, "emulator_rc": last_rc, "runs": n, "cases": judged}


def emulator_death(rc: str, log: str) -> str:
    """One line: why the emulator died on a case."""
    lines = [x.strip() for x in log.splitlines() if x.strip() and not x.startswith("**")]
    if "code should not be reached" in log and "decode" in log:
        return "an instruction the emulator lacks (qemu-hexagon could not decode it)"
    if rc == "124":
        return f"timed out after {RUN_TIMEOUT} s in the emulator"
    signal = {"132": "SIGILL", "134": "SIGABRT", "135": "SIGBUS", "136": "SIGFPE", "139": "SIGSEGV"}.get(rc)
    tail = lines[-1] if lines else ""
    return f"the kernel crashed the emulated DSP ({signal or 'exit ' + rc})" + (f": {tail}" if tail else "")


def _out_dir(req: KernelRequest) -> Path:
    if req.out is not None:
        out = Path(req.out)
    else:
        out = Path("hexbuild-results") / f"test-kernels-{stamp()}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
