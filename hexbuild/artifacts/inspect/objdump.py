"""Finding a disassembler for Hexagon code and running it.

Open LLVM's ``llvm-objdump`` (17 or newer) disassembles Hexagon shared objects with packet
braces and ``:endloopN`` markers; so does the SDK's ``hexagon-llvm-objdump``. Objects for v75
and newer only show their HVX code when ``--mattr=+hvxvNN,+hvx-length128b`` names the version:
without it the vector code is ``<unknown>`` words and no vector spill can be seen. The float
HVX that v68 and newer can hold (IEEE ``.sf``/``.hf`` and qfloat) is named too
(``+hvx-ieee-fp,+hvx-qfloat``) where the disassembler knows those features. The newest
disassembler found wins: llvm-objdump 21 knows v79, 19 only v73. What each disassembler said
(its version, the flags it takes) is remembered in the cache (cache.py) until its file changes.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import EnvironmentMissing, UsageError
from ...ui import ui
from .cache import tools

MIN_VERSION = 17
DEBIAN_PACKAGE = "llvm-19"
# Where the Snapdragon toolchain image (and a local Hexagon SDK) keep the vendor disassembler.
_SDK_GLOBS = ("{sdk}/tools/HEXAGON_Tools/*/Tools/bin/hexagon-llvm-objdump",
              "/opt/hexagon/*/tools/HEXAGON_Tools/*/Tools/bin/hexagon-llvm-objdump")
_VERSION = re.compile(r"version (\d+)\.(\d+)")
_UNKNOWN_FEATURE = "is not a recognized feature"
_HVX_VERSIONS = (81, 79, 75, 73, 71, 69, 68, 67, 66, 65, 62, 60)
# The float HVX features a version's code can hold (IEEE float and qfloat came with v68).
HVX_FLOAT_FEATURES = ("+hvx-ieee-fp", "+hvx-qfloat")
HVX_FLOAT_SINCE = 68
OBJDUMP_TIMEOUT = 600.0


@dataclass(frozen=True)
class Objdump:
    path: str
    version: tuple[int, int]

    @property
    def name(self) -> str:
        return f"{os.path.basename(self.path)} {self.version[0]}.{self.version[1]}"

    def flags(self, arch: str | None, probe_file: Path) -> tuple[list[str], str | None]:
        """(``--mcpu=hexagonvNN --mattr=+hvxvNN,+hvx-length128b[,+hvx-ieee-fp,+hvx-qfloat]`` for
        an object of ``arch``, a warning when this disassembler does not know that version and an
        older one stands in). Without --mcpu the base instruction set is older than the
        object's: some scalar words of v73 code are <unknown>; without --mattr no HVX is decoded
        on v75 and newer; the float features are only given where the disassembler knows them."""
        if not arch or not arch[1:3].isdigit():
            return [], None
        want = int(arch[1:3])
        known = tools.get("flags", self.path, f"v{want}")
        if isinstance(known, list) and all(isinstance(f, str) for f in known):
            return list(known), None
        probe = (self.path, str(probe_file), _code_start(str(probe_file)))
        for nn in [v for v in _HVX_VERSIONS if v <= want]:
            if _accepts(*probe, f"--mcpu=hexagonv{nn}", f"+hvxv{nn}"):
                warn = None
                if nn != want:
                    warn = (f"{self.name} does not know Hexagon v{want}; decoding as v{nn} "
                            "(newer instructions show as <unknown>): use llvm-objdump 21 or newer")
                features = [f"+hvxv{nn}", "+hvx-length128b"]
                if nn >= HVX_FLOAT_SINCE:
                    features += [f for f in HVX_FLOAT_FEATURES
                                 if _accepts(*probe, f"--mcpu=hexagonv{nn}", f"+hvxv{nn},{f}")]
                flags = [f"--mcpu=hexagonv{nn}", "--mattr=" + ",".join(features)]
                if nn == want:  # an older version standing in is asked again: a newer LLVM may come
                    tools.put("flags", self.path, flags, f"v{want}")
                return flags, warn
        return [], f"{self.name} knows no Hexagon version up to v{want}: vector code is not decoded"

    def argv(self, lib: Path, flags: list[str], *, start: int | None = None, stop: int | None = None) -> list[str]:
        argv = [self.path, "-d", "--no-show-raw-insn", *flags]
        if start is not None and stop is not None:
            argv += [f"--start-address={start:#x}", f"--stop-address={stop:#x}"]
        return argv + [str(lib)]

    def disassemble(self, lib: Path, flags: list[str], **window: int) -> str:
        argv = self.argv(lib, flags, **window)
        ui.command(argv)
        try:
            cp = subprocess.run(argv, capture_output=True, timeout=OBJDUMP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise EnvironmentMissing(f"{self.name} did not finish within {OBJDUMP_TIMEOUT:g}s on {lib}") from None
        if cp.returncode != 0:
            err = cp.stderr.decode("utf-8", "replace").strip().splitlines()
            raise UsageError(f"{self.name} cannot disassemble {lib}: {err[-1] if err else 'exit ' + str(cp.returncode)}")
        return cp.stdout.decode("utf-8", "replace")


@functools.lru_cache(maxsize=None)
def _code_start(probe_file: str) -> int | None:
    """The address of the file's first executable section: the probe must disassemble a word,
    as only then does llvm-objdump check --mcpu and --mattr (an empty window passes anything)."""
    from elftools.elf.elffile import ELFFile

    try:
        with open(probe_file, "rb") as f:
            for sec in ELFFile(f).iter_sections():
                if sec["sh_flags"] & 0x4 and sec["sh_size"] >= 4:  # SHF_EXECINSTR
                    return int(sec["sh_addr"])
    except Exception:  # not an ELF file pyelftools reads: the disassembler says what it thinks
        return None
    return None


@functools.lru_cache(maxsize=None)
def _accepts(path: str, probe_file: str, start: int | None, mcpu: str, mattr: str) -> bool:
    """Whether this disassembler takes ``mcpu`` and ``mattr`` (one word disassembled)."""
    window = [f"--start-address={start:#x}", f"--stop-address={start + 4:#x}"] if start is not None else \
        ["--start-address=0x0", "--stop-address=0x1"]
    cp = subprocess.run([path, "-d", mcpu, f"--mattr={mattr}", *window, probe_file], capture_output=True, timeout=60)
    err = cp.stderr.decode("utf-8", "replace")
    return (cp.returncode == 0 and _UNKNOWN_FEATURE not in err and "invalid CPU" not in err
            and "not a recognized processor" not in err and "no subtarget info" not in err)


@functools.lru_cache(maxsize=None)
def _version(path: str) -> tuple[int, int] | None:
    known = tools.get("version", path)
    if isinstance(known, list) and len(known) == 2:
        return int(known[0]), int(known[1])
    try:
        cp = subprocess.run([path, "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(cp.stdout.decode("utf-8", "replace"))
    if not m:
        return None
    tools.put("version", path, [int(m.group(1)), int(m.group(2))])
    return int(m.group(1)), int(m.group(2))


def _candidates() -> list[str]:
    found: list[str] = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d:
            continue
        for pattern in ("llvm-objdump", "llvm-objdump-[0-9]*", "hexagon-llvm-objdump"):
            found += sorted(glob.glob(os.path.join(d, pattern)))
    tools = os.environ.get("HEXAGON_TOOLS_ROOT")
    if tools:
        found.append(os.path.join(tools, "Tools", "bin", "hexagon-llvm-objdump"))
    sdk = os.environ.get("HEXAGON_SDK_ROOT", "/nonexistent")
    for pattern in _SDK_GLOBS:
        found += sorted(glob.glob(pattern.format(sdk=sdk)))
    out = []
    for p in found:
        if os.path.isfile(p) and os.access(p, os.X_OK) and p not in out:
            out.append(p)
    return out


def find_objdump(explicit: str | None = None) -> Objdump:
    """The newest usable disassembler: ``explicit`` when given, else llvm-objdump(-NN) or
    hexagon-llvm-objdump on PATH, else the Hexagon SDK's. EnvironmentMissing (exit 3) when none."""
    hint = (f"install the Debian package {DEBIAN_PACKAGE} (apt-get install {DEBIAN_PACKAGE}), "
            "or name one with --objdump PATH (inspect.objdump)")
    if explicit:
        path = shutil.which(explicit) or (explicit if os.path.isfile(explicit) else None)
        if path is None:
            raise EnvironmentMissing(f"disassembler not found: {explicit}", hint=hint)
        version = _version(path)
        if version is None or version[0] < MIN_VERSION:
            raise EnvironmentMissing(f"{explicit} is not llvm-objdump {MIN_VERSION} or newer"
                                     + (f" (version {version[0]})" if version else ""), hint=hint)
        return Objdump(path, version)
    best: Objdump | None = None
    for path in _candidates():
        version = _version(path)
        if version and version[0] >= MIN_VERSION and (best is None or version > best.version):
            best = Objdump(path, version)
    if best is None:
        raise EnvironmentMissing(f"no llvm-objdump {MIN_VERSION} or newer found (llvm-objdump, llvm-objdump-NN "
                                 "or hexagon-llvm-objdump on PATH, or in the Hexagon SDK)", hint=hint)
    return best
