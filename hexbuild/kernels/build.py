"""Building a tree's HTP sources into the kernel harness, one program per HTP version.

The tree's units are compiled unchanged, as its CMake compiles them for the DSP (-O3, HVX
128-byte with IEEE floats, NDEBUG, its quantizer group size), against hexbuild's SDK and C library
headers, and linked statically with hexbuild's runtime and harness (hexbuild/dsp/). Ninja keeps it
incremental: after an edit of one unit, only that unit compiles again.

A unit that does not compile is dropped from the link when its errors come from HMX (which open
LLVM cannot assemble): its ops are reported as not covered. Any other compiler error is the
revision's: the check stops there (BuildFailed) with the first error and its file:line.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BuildFailed
from .image import CLANG, LLD
from .tree import KernelTree

SRC = "/src"        # the checkout, read-only, in the container
WORK = "/work"      # hexbuild's work directory for this checkout

# clang's own names for the HTP versions it knows (open LLVM 21: v68-v79)
CPU = {"v68": "v68", "v69": "v69", "v71": "v71", "v73": "v73", "v75": "v75"}
RUNTIME = ("start", "libc", "stdio", "heap", "libm", "rt", "hap", "sdk")  # hexbuild/dsp/runtime/*.c
_ERROR_RE = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.*)$", re.M)
_FAILED_RE = re.compile(r"^FAILED: (?:\[code=\d+\] )?(?P<out>\S+\.o)\b", re.M)
_UNDEF_RE = re.compile(r"undefined symbol: (\S+)")
_DEFINES_RE = re.compile(r"^\s*int\s+(op_[a-z0-9_]+)\s*\(\s*struct\s+htp_ops_context\s*\*[^;]*\)\s*\{", re.M)


@dataclass
class UnitFailure:
    unit: str
    hmx: bool
    first_error: str        # "file:line: message"
    log: str


@dataclass
class HarnessBuild:
    htp: str
    elf: str                               # path in the container
    failures: list[UnitFailure] = field(default_factory=list)
    undefined: list[str] = field(default_factory=list)


def dsp_sources() -> dict[str, bytes]:
    """hexbuild's DSP-side sources (relative path -> bytes), to copy into the work directory."""
    root = Path(__file__).resolve().parent.parent / "dsp"  # package data of hexbuild itself
    out: dict[str, bytes] = {}
    for sub in ("include", "include/qurt", "runtime", "harness"):
        d = root.joinpath(sub)
        for p in d.iterdir():
            if p.name.endswith((".h", ".c")):
                out[f"{sub}/{p.name}"] = p.read_bytes()
    return out


def sync_dsp_sources(work: Path) -> None:
    """Copy the DSP sources into work/dsp, rewriting only what changed (ninja goes by mtime)."""
    for rel, data in dsp_sources().items():
        path = work / "dsp" / rel
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def ops_header(tree: KernelTree) -> str:
    """hxk_ops.h: the tree's ops and their entry functions, weakly referenced so that an entry
    whose unit was dropped (HMX) links as NULL and the harness says so."""
    entries = sorted(set(tree.ops.values()))
    lines = ["/* written by hexbuild for this tree: the ops its enum has and their entry functions */"]
    lines += [f"#pragma weak {e}" for e in entries]
    rows = " ".join(f"X({name}, {entry})" for name, entry in sorted(tree.ops.items()))
    lines.append(f"#define HXK_OPS(X) {rows}")
    return "\n".join(lines) + "\n"


def entry_units(tree: KernelTree) -> dict[str, str]:
    """entry function -> the unit that defines it."""
    out: dict[str, str] = {}
    for unit in tree.units:
        for fn in _DEFINES_RE.findall((tree.htp / unit).read_text(errors="replace")):
            out.setdefault(fn, unit)
    return out


def cflags(tree: KernelTree, htp: str) -> list[str]:
    htp_dir = f"{SRC}/{tree.htp.relative_to(tree.root)}"
    return [f"--target=hexagon-unknown-linux-musl", f"-m{CPU[htp]}", "-mhvx", "-mhvx-length=128b", "-mhvx-ieee-fp",
            "-O3", "-G0", "-fno-pic", "-ffreestanding", "-nostdlibinc",
            f"-isystem{WORK}/dsp/include", f"-isystem{WORK}/dsp/include/qurt", f"-isystem{WORK}/resource-dir/include",
            f"-I{htp_dir}", f"-I{htp_dir}/..", f"-I{htp_dir}/../..", f"-I{htp_dir}/../../../include",
            "-DNDEBUG=1", f"-DFP32_QUANTIZE_GROUP_SIZE={tree.group_size}", "-Wno-unused-command-line-argument"]


def ninja_file(tree: KernelTree, htp: str) -> str:
    """build.ninja for one HTP version (written into work/build-<htp>/)."""
    htp_dir = f"{SRC}/{tree.htp.relative_to(tree.root)}"
    flags = " ".join(shlex.quote(f) for f in cflags(tree, htp))
    out = ["# written by hexbuild test kernels", f"cflags = {flags}",
           "rule cc", f"  command = {CLANG} $cflags $extra -MD -MF $out.d -c $in -o $out", "  depfile = $out.d",
           "  deps = gcc", "  description = CC $in"]
    objs = []
    for unit in tree.units:
        obj = f"obj/{unit[:-2]}.o"
        objs.append(obj)
        out.append(f"build {obj}: cc {htp_dir}/{unit}")
    objs += [f"obj/rt-{rt}.o" for rt in RUNTIME] + ["obj/harness.o"]
    for rt in RUNTIME:
        out += [f"build obj/rt-{rt}.o: cc {WORK}/dsp/runtime/{rt}.c", "  extra = -fno-builtin"]
    out += [f"build obj/harness.o: cc {WORK}/dsp/harness/harness.c | {WORK}/hxk_ops.h",
            f"  extra = -DHXK_ABI={tree.abi} -I{WORK}"
            + "".join(f" -D{k}={v}" for k, v in sorted(tree.defines.items())),
            "build objects: phony " + " ".join(objs)]
    return "\n".join(out) + "\n"


def units_for(tree: KernelTree, ops: list[str]) -> list[str]:
    """The units a run needs: those defining the ops' entry functions, and every unit that defines
    none (shared code such as hex-dma.c). Units of other ops are not compiled (their entries link
    as NULL), so an edit of one op's unit costs one compile."""
    defined = entry_units(tree)
    op_units = set(defined.values())
    wanted = {defined[tree.ops[o]] for o in ops if o in tree.ops and tree.ops[o] in defined}
    return [u for u in tree.units if u in wanted or u not in op_units]


def objects_for(tree: KernelTree, units: list[str]) -> list[str]:
    own = [f"obj/rt-{rt}.o" for rt in RUNTIME] + ["obj/harness.o"] if tree.runnable else []
    return [f"obj/{u[:-2]}.o" for u in units] + own


def build_script(htps: list[str], objects: list[str], *, link: bool = True) -> list[str]:
    """The shell lines that build each version's harness: the objects it needs, then a link of
    what compiled (a failed unit's object is removed, so an old one never links)."""
    objs = " ".join(objects)
    lines = ["resource=$(" + CLANG + " -print-resource-dir)", f"ln -sfn \"$resource\" {WORK}/resource-dir"]
    for htp in htps:
        d = f"{WORK}/build-{htp}"
        lines += [
            f"cd {d}",
            f"ninja -k 0 {objs} > ninja.log 2>&1; echo $? > ninja.rc",
            "sed -n 's/^FAILED: \\(\\[code=[0-9]*\\] \\)\\{0,1\\}\\([^ ]*\\.o\\).*/\\2/p' ninja.log | xargs -r rm -f",
        ]
        if link:
            lines += [f"objs=$(for o in {objs}; do [ -f \"$o\" ] && echo \"$o\"; done)",
                      f"rm -f kernels.elf; {LLD} -static -e _start --warn-unresolved-symbols -o kernels.elf $objs"
                      " > link.log 2>&1; echo $? > link.rc"]
    return lines


def prepare(tree: KernelTree, work: Path, htps: list[str]) -> None:
    """Write the work directory: hexbuild's DSP sources, hxk_ops.h, one build.ninja per version."""
    sync_dsp_sources(work)
    _write_if_changed(work / "hxk_ops.h", ops_header(tree))
    for htp in htps:
        d = work / f"build-{htp}"
        (d / "obj").mkdir(parents=True, exist_ok=True)
        _write_if_changed(d / "build.ninja", ninja_file(tree, htp))


def results(tree: KernelTree, work: Path, htp: str) -> HarnessBuild:
    """Read what the container's build left: unit failures (HMX or not), the link's outcome (none
    for a revision the harness cannot drive: its units are compiled only to know which need HMX)."""
    d = work / f"build-{htp}"
    log = _read(d / "ninja.log")
    failures = []
    for m in _FAILED_RE.finditer(log):
        unit = Path(m.group("out")).stem + ".c"
        chunk = _unit_log(log, m.start())
        first = _ERROR_RE.search(chunk)
        where = f"{_short(first.group('file'), tree)}:{first.group('line')}: {first.group('msg')}" if first else \
            chunk.strip().splitlines()[-1] if chunk.strip() else "no compiler message"
        failures.append(UnitFailure(unit, _is_hmx(chunk), where, chunk))
    hard = [f for f in failures if not f.hmx and not f.unit.startswith("rt-") and f.unit != "harness.c"]
    ours = [f for f in failures if f.unit.startswith("rt-") or f.unit == "harness.c"]
    if ours:
        raise BuildFailed(f"hexbuild's own DSP runtime did not compile for {htp}: {ours[0].first_error}",
                          hint=f"a bug in hexbuild; the compiler's output is in {d / 'ninja.log'}")
    if hard:
        f = hard[0]
        raise BuildFailed(f"the tree's kernels do not compile for {htp}: {f.unit}: {f.first_error}",
                          hint=f"the compiler's output is in {d / 'ninja.log'}")
    if not tree.runnable:
        return HarnessBuild(htp=htp, elf="", failures=failures)
    link = _read(d / "link.log")
    if _read(d / "link.rc").strip() != "0" or not (d / "kernels.elf").is_file():
        raise BuildFailed(f"linking the kernel harness for {htp} failed: {link.strip().splitlines()[-1:] or '?'}",
                          hint=f"the linker's output is in {d / 'link.log'}")
    undefined = sorted(set(_UNDEF_RE.findall(link)))
    return HarnessBuild(htp=htp, elf=f"{WORK}/build-{htp}/kernels.elf", failures=failures, undefined=undefined)


def work_dir_for(cache: Path, tree: KernelTree) -> Path:
    """One work directory per checkout (by its path): builds stay incremental across runs."""
    key = hashlib.sha256(str(tree.root.resolve()).encode()).hexdigest()[:16]
    return cache / "trees" / key


def _unit_log(log: str, start: int) -> str:
    nxt = _FAILED_RE.search(log, start + 1)
    end = nxt.start() if nxt else len(log)
    return log[start:end]


def _is_hmx(chunk: str) -> bool:
    for m in _ERROR_RE.finditer(chunk):
        if Path(m.group("file")).name.startswith("hmx"):
            return True
    return "HMX_" in chunk and "unrecognized instruction" in chunk


def _short(path: str, tree: KernelTree) -> str:
    prefix = f"{SRC}/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _write_if_changed(path: Path, text: str) -> None:
    if not (path.is_file() and path.read_text() == text):
        path.write_text(text)
