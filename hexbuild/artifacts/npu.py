"""What a package brings for the NPU, read from its manifest: the one rule that ``run``, ``bench``,
``serve``, ``chat``, ``test``, ``release --smoke`` and ``deploy`` follow.

- ``cpu``: no Hexagon host library (``lib/libggml-hexagon.so``; the open toolchain's build, or one
  made with GGML_HEXAGON=OFF). It runs on the CPU with one line saying so, unless NPU sessions
  were asked for explicitly (``--ndev``, ``--devices``, ``run.ndev``/``deploy.ndev``): nothing can
  open them, so that is exit 12 in one line. The line is a note when the build chose it (its
  manifest records ``toolchain: open`` or ``lacks: [htp]``): a fact the user chose is no warning,
  and ``--strict`` (release under CI) must not fail on it; a package that merely lacks the
  library, with no build saying why, gets a warning.
- ``npu``: the host library is there. Sessions are asked for as usual, whether or not a skel for
  the device's arch came along: such a package is an NPU package that cannot open a session.
  ``deploy`` warns when the device's skel is missing and ``verify`` fails a package without skels;
  at run time the backend's own lines are the evidence, and a session failure it prints is exit 12
  unless ``--allow-cpu-fallback``, whatever the manifest says.
- ``unknown``: no manifest, or one that lists no libraries: as ``npu`` (the backend's lines decide).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .elf import HTP_NAME, htp_key

HOST_LIB = "libggml-hexagon.so"
CPU, NPU, UNKNOWN = "cpu", "npu", "unknown"


def _paths(manifest: Mapping[str, Any]) -> set[str] | None:
    files = manifest.get("files")
    if not isinstance(files, list):
        return None
    return {str(f.get("path")) for f in files if isinstance(f, dict)}


def npu_support(manifest: Mapping[str, Any] | None) -> str:
    """``cpu``, ``npu`` or ``unknown`` for a package's (or an install's) manifest."""
    if not manifest:
        return UNKNOWN
    if "htp" in (manifest.get("lacks") or []) or manifest.get("toolchain") == "open":
        return CPU  # the build says so
    paths = _paths(manifest)
    if paths is not None and any(p.startswith("lib/") and ".so" in p for p in paths):
        return NPU if f"lib/{HOST_LIB}" in paths else CPU
    if paths is not None and manifest.get("htp_versions") == []:
        return CPU  # a file list without libraries whose build recorded no HTP version
    return UNKNOWN  # no libraries listed: not enough to tell


def skel_versions(manifest: Mapping[str, Any] | None) -> list[str]:
    """The HTP versions whose skel (``lib/libggml-htp-vNN.so``) the package lists."""
    found = {m.group(1) for p in _paths(manifest or {}) or () if p.startswith("lib/") and (m := HTP_NAME.match(p[4:]))}
    return sorted(found, key=htp_key)


@dataclass(frozen=True)
class CpuOnly:
    """The one line for a CPU-only package, and whether its build chose it (a note) or not (a warning)."""

    text: str
    chosen: bool

    def say(self) -> None:
        """Said once per command: bisect deploys and measures the good revision beside every
        step's, bench plans every target, and one package's line is one fact."""
        from ..ui import ui

        if self.text in ui.warnings or self.text in ui.notes:
            return
        (ui.note if self.chosen else ui.warn)(self.text)


def cpu_only_note(manifest: Mapping[str, Any] | None) -> CpuOnly | None:
    """The one line for a CPU-only package; None for any other."""
    if npu_support(manifest) != CPU:
        return None
    m = manifest or {}
    how = "the open toolchain" if m.get("toolchain") == "open" else "no Hexagon backend"
    chosen = m.get("toolchain") == "open" or "htp" in (m.get("lacks") or [])
    return CpuOnly(f"this package was built with {how} and has no NPU libraries ({HOST_LIB}): it runs on the "
                   "CPU only", chosen)


def sessions_refused(where: str, asked: str) -> tuple[str, str]:
    """(message, hint) of the exit-12 line for NPU sessions asked of a CPU-only package."""
    return (f"the package on {where} has no NPU libraries ({HOST_LIB}): the HTP sessions {asked} asks for "
            "cannot open",
            "deploy a package built with the Hexagon toolchain, or leave out --ndev/--devices (and run.ndev, "
            "deploy.ndev) to run on the CPU")


def missing_skel_note(manifest: Mapping[str, Any] | None, arch: str | None) -> str | None:
    """One line when an NPU package has no skel for a device of HTP ``arch`` (None: arch unknown)."""
    if not arch or npu_support(manifest) != NPU:
        return None
    have = skel_versions(manifest)
    if arch in have:
        return None
    return (f"the package has the Hexagon backend but no skel for this {arch} device (lib/libggml-htp-{arch}.so; "
            f"it has {', '.join(have) or 'none'}): no HTP session can open there (error 0x80000406), "
            f"so runs fall back to the CPU; build with --htp {arch}")
