"""What the virtual NPU can run of an install, read from its files (hexbuild/vnpu/skel.py) and
whether a skel holds HMX code (hexbuild/artifacts/hmx.py): genuine Hexagon ELF files (clang-19),
with HMX units' code (functions hmx_*), built empty (the toolchain double's .hexbuild.no_hmx), or
none at all."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hexbuild.artifacts.hmx import EMPTY, NONE, PRESENT, UNKNOWN, skel_hmx
from hexbuild.errors import CPU_FALLBACK, CpuFallback
from hexbuild.vnpu.skel import check_install, hmx_switch, knob_of
from tests import elf_factory as ef

SKEL = ef.SKEL_SYMBOL
# what the toolchain double leaves in a skel whose HMX units it built empty (artifacts/elf.py)
EMPTY_UNITS = ('__attribute__((used, section(".hexbuild.no_hmx"))) static const char no_hmx[] = '
               '"hmx-matmul-ops.c\\0hmx-queue.c";\n')


def hmx_skel(out: Path, version: str = "v73") -> Path:
    """A skel whose HMX units have code: what a vendor build of a v73+ skel holds."""
    return ef.hexagon_so(out, version, exports=(SKEL, "op_matmul", "hmx_mat_mul_qk_0_d16a32", "hmx_queue_push"))


def empty_hmx_skel(out: Path) -> Path:
    source = EMPTY_UNITS + f"int {SKEL}(int x) {{ return x + 1; }}\nint op_matmul(int x) {{ return x; }}\n"
    built = ef._compile(source, ["--target=hexagon", "-mv73", "-mhvx", "-mhvx-length=128b", "-fPIC", "-shared"])
    return ef._place(built, out, 0o644)


def test_what_a_skel_says_of_hmx(tmp_path):
    found = skel_hmx(hmx_skel(tmp_path / "hmx.so"))
    assert (found.state, found.arch, found.emulable) == (PRESENT, "v73", False)
    assert set(found.functions) == {"hmx_mat_mul_qk_0_d16a32", "hmx_queue_push"}
    assert found.evidence().startswith("hmx_")
    empty = skel_hmx(empty_hmx_skel(tmp_path / "empty.so"))
    assert (empty.state, empty.units, empty.emulable) == (EMPTY, ("hmx-matmul-ops.c", "hmx-queue.c"), True)
    assert skel_hmx(ef.hexagon_so(tmp_path / "v68.so", "v68")).state == NONE
    assert skel_hmx(ef.hexagon_so(tmp_path / "plain.so", "v73")).state == NONE  # a symbol table, no HMX in it


@pytest.mark.skipif(not shutil.which("llvm-strip-19"), reason="no llvm-strip-19")
def test_a_stripped_v73_skel_cannot_tell(tmp_path):
    skel = ef.hexagon_so(tmp_path / "s.so", "v73")
    subprocess.run(["llvm-strip-19", "--strip-all", str(skel)], check=True)
    assert skel_hmx(skel).state == UNKNOWN


def install(tmp_path: Path, *skels: tuple[str, Path], env_vars: list[str] | None = None) -> tuple[Path, dict]:
    lib = tmp_path / "inst" / "lib"
    lib.mkdir(parents=True)
    for name, src in skels:
        shutil.copyfile(src, lib / name)
    manifest = {"files": [{"path": f"lib/{n}"} for n, _ in skels] + [{"path": "lib/libggml-hexagon.so"}]}
    if env_vars is not None:
        manifest["llama_cpp"] = {"env_vars": env_vars}
    return lib, manifest


def test_no_skel_for_the_emulated_version_is_exit_12_naming_what_would_run(tmp_path):
    lib, manifest = install(tmp_path, ("libggml-htp-v75.so", ef.hexagon_so(tmp_path / "a.so", "v73")),
                            ("libggml-htp-v79.so", ef.hexagon_so(tmp_path / "b.so", "v73")))
    with pytest.raises(CpuFallback) as e:
        check_install(lib, "v73", manifest, {}, where="qemu+npu:/x")
    assert e.value.exit_code == CPU_FALLBACK
    assert "has no skel for the virtual NPU's v73 (lib/libggml-htp-v73.so; it has v75, v79)" in e.value.message
    assert 'qemu.npu = "v75"' in e.value.hint and "--htp v73" in e.value.hint  # v79 is not one it models


@pytest.mark.parametrize("env_vars, knob", [(["GGML_HEXAGON_USE_HMX", "GGML_HEXAGON_NHVX"], "--hex-hmx"),
                                            (["GGML_HEXAGON_NHMX"], "--hex-nhmx"), ([], None)])
def test_an_hmx_skel_is_refused_unless_the_run_turns_hmx_off(tmp_path, env_vars, knob):
    lib, manifest = install(tmp_path, ("libggml-htp-v73.so", hmx_skel(tmp_path / "h.so")), env_vars=env_vars)
    with pytest.raises(CpuFallback) as e:
        check_install(lib, "v73", manifest, {}, where="qemu+npu:/x")
    assert "lib/libggml-htp-v73.so holds HMX code (hmx_" in e.value.message
    assert "its HMX matmul cannot be emulated (qemu-hexagon has no HMX)" in e.value.message
    if knob is None:
        assert "cannot turn HMX off" in e.value.hint
        return
    assert f"{knob} 0" in e.value.hint
    switch = env_vars[0]
    note = check_install(lib, "v73", manifest, {switch: "0"}, where="qemu+npu:/x")
    assert note and f"turned off by {switch}=0" in note and "not exercised" in note
    assert knob_of(switch) == knob


def test_hmx_free_skels_pass(tmp_path):
    lib, manifest = install(tmp_path, ("libggml-htp-v73.so", empty_hmx_skel(tmp_path / "e.so")),
                            ("libggml-htp-v68.so", ef.hexagon_so(tmp_path / "v68.so", "v68")))
    assert check_install(lib, "v73", manifest, {}, where="qemu+npu:/x") is None
    assert check_install(lib, "v68", manifest, {}, where="qemu+npu:/x") is None


def test_the_hmx_switch_is_read_from_the_manifest_else_the_host_library(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    assert hmx_switch({"llama_cpp": {"env_vars": ["GGML_HEXAGON_NHMX"]}}, lib) == "GGML_HEXAGON_NHMX"
    assert hmx_switch({"llama_cpp": {"env_vars": []}}, lib) is None
    (lib / "libggml-hexagon.so").write_bytes(b"\0ELF...GGML_HEXAGON_NHVX\0GGML_HEXAGON_USE_HMX\0...")
    assert hmx_switch(None, lib) == "GGML_HEXAGON_USE_HMX"
    assert hmx_switch({}, tmp_path / "nowhere") is None


def test_a_forced_arch_names_the_skel_and_v79_is_not_emulated(tmp_path):
    """--hex-arch (GGML_HEXAGON_ARCH) makes the backend load that version's skel whatever the DSP
    answers: the check follows it, and refuses a version the emulator does not model."""
    lib, manifest = install(tmp_path, ("libggml-htp-v73.so", ef.hexagon_so(tmp_path / "a.so", "v73")),
                            ("libggml-htp-v79.so", ef.hexagon_so(tmp_path / "b.so", "v73")))
    assert check_install(lib, "v75", manifest, {"GGML_HEXAGON_ARCH": "v73"}, where="t") is None
    with pytest.raises(CpuFallback) as e:
        check_install(lib, "v75", manifest, {"GGML_HEXAGON_ARCH": "79"}, where="t")
    assert "GGML_HEXAGON_ARCH=79 asks for the v79 skel, which the virtual NPU does not model" in e.value.message


def test_an_install_without_the_hexagon_backend_asks_for_no_skel(tmp_path):
    """No host library (a CPU-only build, or a hand-made install without a manifest): nothing
    asks for a session, so a missing skel is nobody's problem; with the host library on disk it is."""
    lib = tmp_path / "lib"
    lib.mkdir()
    assert check_install(lib, "v73", None, {}, where="t") is None
    assert check_install(lib, "v73", {"files": [{"path": "lib/libggml-cpu.so"}]}, {}, where="t") is None
    (lib / "libggml-hexagon.so").write_bytes(b"host library")
    with pytest.raises(CpuFallback):
        check_install(lib, "v73", None, {}, where="t")
