"""`hexbuild doctor --target qemu+npu:DIR`: the qemu: board's checks and, in place of a phone's
FastRPC runtime, its virtual NPU (hexbuild/diagnose/vnpu.py): the parts, the emulator, the skel
for qemu.npu, HMX, and a session that really opens. The real 0.3.28 build deployed by hexbuild
(its skels HMX-free: the toolchain double built their HMX units empty) must pass every one; a
skel with HMX code is refused by doctor and, before any session, by run (exit 12)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild import errors
from tests import elf_factory as ef
from tests.infra.qemu_npu import ROOT, hexbuild_env

VIRTUAL_NPU_CHECKS = ("device:fastrpc:library", "device:vnpu:emulator", "device:package:htp-lib",
                      "device:adsp-library-path", "device:vnpu:hmx", "device:fastrpc:session")


def hexbuild(*argv: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hexbuild", *argv], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


def checks_of(done: subprocess.CompletedProcess) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def test_the_real_build_on_qemu_npu_passes_every_check(qemu_npu_install, vnpu_cache, docker_host):
    done = hexbuild("--json", "doctor", "--target", f"qemu+npu:{qemu_npu_install}",
                    env=hexbuild_env(vnpu_cache, docker_host))
    assert done.returncode == 0, done.stderr[-3000:]
    checks = checks_of(done)
    for name in ("device:emulator", "device:npu", *VIRTUAL_NPU_CHECKS, "device:glibc", "device:tools"):
        assert checks[name]["status"] == "ok", checks[name]
    assert "virtual NPU" in checks["device:npu"]["detail"]
    assert "built without HMX (hmx-" in checks["device:vnpu:hmx"]["detail"]
    assert "-cpu v73 runs the virtual NPU's DSP runtime" in checks["device:vnpu:emulator"]["detail"]
    assert "libggml-htp-v73.so opened on the emulated v73 cDSP" in checks["device:fastrpc:session"]["detail"]
    assert json.loads(done.stdout)["device"]["htp_arch"] == "v73"
    assert not any(c["name"].startswith(("device:soc", "device:fastrpc:device-node", "device:selinux"))
                   for c in checks.values())  # a phone's, which would only probe this machine


@pytest.fixture
def hmx_install(qemu_npu_install, tmp_path):
    """The install with a v73 skel that holds HMX code in place of its own (put back afterwards)."""
    skel = qemu_npu_install / "lib" / "libggml-htp-v73.so"
    saved = tmp_path / "real.so"
    shutil.copy2(skel, saved)
    ef.hexagon_so(skel, "v73", exports=(ef.SKEL_SYMBOL, "op_matmul", "hmx_mat_mul_qk_0_d16a32"))
    try:
        yield qemu_npu_install
    finally:
        os.replace(saved, skel)


def test_an_hmx_skel_fails_doctor_and_run_refuses_it_before_any_session(hmx_install, vnpu_cache, docker_host,
                                                                      tmp_path):
    env = hexbuild_env(vnpu_cache, docker_host)
    done = hexbuild("--json", "doctor", "--target", f"qemu+npu:{hmx_install}", env=env)
    assert done.returncode == errors.ENVIRONMENT, done.stderr[-3000:]
    hmx = checks_of(done)["device:vnpu:hmx"]
    assert hmx["status"] == "missing" and "holds HMX code (hmx_mat_mul_qk_0_d16a32)" in hmx["detail"]
    assert "--hex-hmx 0 (GGML_HEXAGON_USE_HMX=0)" in hmx["fix"]  # 0.3.28 reads it
    results = tmp_path / "results"
    run = hexbuild("run", "completion", "--target", f"qemu+npu:{hmx_install}", "--results-dir", str(results),
                   "--", "-n", "4", env=env)
    assert run.returncode == errors.CPU_FALLBACK, run.stderr[-3000:]
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    errs = [i for i, ln in enumerate(lines) if ln.startswith("hexbuild: error: ")]
    assert len(errs) == 1 and "its HMX matmul cannot be emulated" in lines[errs[0]], lines
    assert all(ln.startswith("hint:") for ln in lines[errs[0] + 1:]) and "--hex-hmx 0" in run.stderr
    assert not any("session opened" in ln for ln in lines)
    assert not results.exists()  # nothing ran: no log


@pytest.mark.skipif(not Path("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1").exists(),
                    reason="no AArch64 runtime at /usr/aarch64-linux-gnu (libc6-arm64-cross)")
def test_doctor_says_which_image_the_parts_need(qemu_npu_install, docker_env, cli, tmp_path, monkeypatch):
    """No parts in the cache and no kernel check image to make them from (the engine's copy hidden
    from the lookup, no cached root filesystem): fastrpc:library names the command that makes it,
    and the checks that need the parts say they were not run."""
    from hexbuild.kernels import image as kimage

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(kimage, "find", lambda client: None)
    r = cli("--json", "doctor", "--target", f"qemu+npu:{qemu_npu_install}", "--sysroot", "/usr/aarch64-linux-gnu")
    assert r.rc == errors.ENVIRONMENT, r.err
    assert "checks" in r.json, (r.out, r.err)
    checks = {c["name"]: c for c in r.json["checks"]}
    lib = checks["device:fastrpc:library"]
    assert lib["status"] == "missing" and "the kernel check's image" in lib["detail"]
    assert lib["fix"].startswith("hexbuild toolchain kernels")
    for name in ("device:vnpu:emulator", "device:fastrpc:session"):
        assert checks[name]["status"] == "info" and checks[name]["detail"].startswith("not checked"), checks[name]
    assert not (tmp_path / "xdg" / "hexbuild" / "vnpu").exists()  # nothing made
