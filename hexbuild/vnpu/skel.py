"""What the virtual NPU can run of an install, decided from its files before any session opens:

- the skel for the emulated HTP version (``qemu.npu``): ``lib/libggml-htp-<npu>.so``, as the
  DSP's loader looks for it (without it no session opens: a phone's 0x80000406);
- no HMX code in it (hexbuild.artifacts.hmx): qemu-hexagon has no HMX, and the first HMX
  instruction would stop the emulated DSP mid-run. A revision that can turn HMX off
  (``GGML_HEXAGON_USE_HMX``, later ``GGML_HEXAGON_NHMX``) runs its HVX paths with it set to 0.

hexbuild does not set that variable itself: the HMX matmul is what such a skel runs on a phone
for every prompt of 32 rows or more, and a run or a ``test ops`` that quietly took the HVX path
instead would pass for code it never ran. The user turns it off, and the run says so.

Either refusal is exit 12 (CpuFallback): the HTP sessions the run asks for cannot work there, as
``sessions_refused`` says for a CPU-only package; nothing has run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import CpuFallback

EMULATED = ("v68", "v69", "v73", "v75")  # the HTP versions hexbuild's qemu-hexagon models (pre-v79 qfloat)
# the variable that turns HMX off, by revision: USE_HMX (0.3.x trees of 2026), NHMX after it
HMX_SWITCHES = ("GGML_HEXAGON_USE_HMX", "GGML_HEXAGON_NHMX")
HOST_LIB = "libggml-hexagon.so"


def hmx_switch(manifest: Mapping[str, Any] | None, lib_dir: Path | None) -> str | None:
    """The variable this revision reads to run without HMX: from the manifest's record of what
    the tree reads, else from the host library's own strings; None when it has none."""
    env_vars = ((manifest or {}).get("llama_cpp") or {}).get("env_vars")
    if isinstance(env_vars, list):
        return next((v for v in HMX_SWITCHES if v in env_vars), None)
    host = lib_dir / HOST_LIB if lib_dir else None
    if host is not None and host.is_file():
        data = host.read_bytes()
        return next((v for v in HMX_SWITCHES if v.encode() + b"\0" in data), None)
    return None


def knob_of(switch: str) -> str:
    """The --hex-* flag that sets ``switch`` (runner/knobs.py: --hex-hmx is USE_HMX)."""
    return "--hex-hmx" if switch == "GGML_HEXAGON_USE_HMX" else "--hex-" + switch[len("GGML_HEXAGON_"):].lower()


def _versions(manifest: Mapping[str, Any] | None, lib_dir: Path) -> list[str]:
    from ..artifacts.elf import HTP_NAME, htp_key
    from ..artifacts.npu import skel_versions

    have = skel_versions(manifest) if manifest else []
    if not have and lib_dir.is_dir():
        have = sorted({m.group(1) for p in lib_dir.iterdir() if (m := HTP_NAME.match(p.name))}, key=htp_key)
    return have


def _has_backend(manifest: Mapping[str, Any] | None, lib_dir: Path) -> bool:
    """The install has the Hexagon backend: its manifest says so, or (none, or one that lists no
    libraries) the host library is there."""
    from ..artifacts.npu import NPU, UNKNOWN, npu_support

    support = npu_support(manifest)
    return support == NPU or (support == UNKNOWN and (lib_dir / HOST_LIB).is_file())


def check_install(lib_dir: Path, npu: str, manifest: Mapping[str, Any] | None, env: Mapping[str, str], *,
                  where: str) -> str | None:
    """CpuFallback (exit 12) in one line when the virtual NPU cannot run the install's skel for
    ``npu``; else None, or a note to say (HMX code that the run turned off, or cannot be told)."""
    from ..artifacts.elf import NotElf
    from ..artifacts.hmx import PRESENT, UNKNOWN, skel_hmx

    forced = str(env.get("GGML_HEXAGON_ARCH", "")).strip().lower()
    if forced:  # --hex-arch: the backend loads that version's skel whatever the DSP says it is
        arch = forced if forced.startswith("v") else "v" + forced
        if arch not in EMULATED:
            raise CpuFallback(f"{where}: GGML_HEXAGON_ARCH={forced} asks for the {arch} skel, which the virtual NPU "
                              f"does not model (it emulates {', '.join(EMULATED)}; qemu-hexagon's qfloat is the "
                              "pre-v79 model, and v79 changed its rounding)",
                              hint=f"leave out --hex-arch to run the {npu} skel (qemu.npu), or run the {arch} skel on "
                                   "a phone")
        npu = arch
    rel = f"lib/libggml-htp-{npu}.so"
    skel = lib_dir / f"libggml-htp-{npu}.so"
    if not skel.is_file():
        if not _has_backend(manifest, lib_dir):
            return None  # no Hexagon backend: nothing asks for a session (the one rule: artifacts/npu.py)
        have = _versions(manifest, lib_dir)
        other = [v for v in have if v in EMULATED]
        fix = f"build with --htp {npu}" + (f", or set qemu.npu = \"{other[-1]}\" (HEXBUILD_QEMU_NPU={other[-1]}), "
                                           "a version the package has" if other else
                                           " (the virtual NPU models " + ", ".join(EMULATED) + ")")
        raise CpuFallback(f"{where}: the package has no skel for the virtual NPU's {npu} ({rel}; it has "
                          f"{', '.join(have) or 'none'}): no HTP session can open there", hint=fix)
    try:
        facts = skel_hmx(skel)
    except NotElf as e:
        raise CpuFallback(f"{where}: {rel} is not a skel the virtual NPU can load: {e}",
                          hint="deploy the package again (hexbuild deploy --verify repairs a damaged file)") from None
    if facts.state == UNKNOWN:
        return (f"{rel} has no symbol table: whether it holds HMX code cannot be told; an HMX instruction would stop "
                "the emulated DSP (qemu: unhandled CPU exception 0x15)")
    if facts.state != PRESENT:
        return None
    switch = hmx_switch(manifest, lib_dir)
    if switch and str(env.get(switch, "")).strip() == "0":
        return (f"{rel} holds HMX code ({facts.evidence()}), turned off by {switch}=0: the run takes the HVX "
                "paths, its HMX matmul is not exercised")
    message = (f"{where}: {rel} holds HMX code ({facts.evidence()}): its HMX matmul cannot be emulated "
               "(qemu-hexagon has no HMX)")
    if switch:
        hint = (f"this revision runs with HMX off: add {knob_of(switch)} 0 ({switch}=0) to run its HVX paths "
                "emulated, or run on a phone")
    else:
        hint = "this revision cannot turn HMX off: run it on a phone, or build its skels without HMX"
    raise CpuFallback(message, hint=hint)
