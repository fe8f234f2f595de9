"""`hexbuild doctor --target T`: every device check shown to pass and to fail, with its cause
named, on virtual devices built to have or lack each piece (real adbd phones whose /dev and
/vendor are their own, a Linux board that is this machine under its own /dev and /usr/lib, and
real sshd). Nothing on this machine's own /dev or /usr/lib is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.elf_factory import make_package
from tests.infra.device_files import BOARD_RUNTIME, PHONE_RUNTIME, board_root, run_in_board
from tests.infra.tiny_model import write_tiny_gguf

ADB_DEST = "/data/local/tmp/llama.cpp"
SKEL_V73 = f"{ADB_DEST}/lib/libggml-htp-v73.so"


def device_checks(result) -> dict[str, dict]:
    return {c["name"][len("device:"):]: c for c in result.json["checks"] if c["name"].startswith("device:")}


def doctor(cli, target: str, *extra: str, env: dict | None = None):
    return cli("doctor", "--target", target, "--json", *extra, env=env)


@pytest.fixture(scope="module")
def android_pkg(tmp_path_factory):
    return make_package(tmp_path_factory.mktemp("pkg-android"), "android", ("v68", "v69", "v73"))


@pytest.fixture
def v73_phone(make_fastrpc_phone, cli, android_pkg):
    """An 8 Gen 2 phone with a working FastRPC runtime and the package deployed."""
    dev = make_fastrpc_phone("SM8550")
    r = cli("deploy", str(android_pkg), "--target", f"adb:{dev.serial}")
    assert r.rc == 0, r.err
    return dev


def test_a_complete_phone_passes_every_check(cli, v73_phone):
    r = doctor(cli, f"adb:{v73_phone.serial}")
    assert r.rc == 0, r.err
    checks = device_checks(r)
    for name in ("soc", "package:htp-lib", "fastrpc:library", "fastrpc:device-node", "adsp-library-path",
                 "fastrpc:unsigned-pd-shell", "selinux", "tools"):
        assert checks[name]["status"] == "ok", (name, checks[name])
    assert "v73" in checks["soc"]["detail"] and "SM8550" in checks["soc"]["detail"]
    assert PHONE_RUNTIME["lib"] in checks["fastrpc:library"]["detail"]
    assert "/dev/adsprpc-smd" in checks["fastrpc:device-node"]["detail"]
    assert f"ADSP_LIBRARY_PATH={ADB_DEST}/lib" in checks["adsp-library-path"]["detail"]
    assert "Enforcing" in checks["selinux"]["detail"]
    assert checks["android"]["status"] == "info" and "Android 14 (SDK 34)" in checks["android"]["detail"]
    assert checks["package:sessions"]["status"] == "info" and "one HTP session" in checks["package:sessions"]["detail"]
    assert checks["shell"]["status"] == "info"
    assert r.json["device"] == {"target": f"adb:{v73_phone.serial}", "kind": "adb", "os": "android",
                                "soc": "SM8550", "htp_arch": "v73"}


def _fails(cli, dev, name: str, *, cause: str, fix: str) -> dict:
    r = doctor(cli, f"adb:{dev.serial}")
    assert r.rc == 3, r.out
    check = device_checks(r)[name]
    assert check["status"] == "missing" and check["required"], check
    assert cause in check["detail"], check
    assert fix in (check["fix"] or ""), check
    assert f"device:{name}" in r.err  # the one-line error names the failed checks
    return check


def test_each_runtime_piece_missing_is_named_with_its_fix(cli, v73_phone):
    files = v73_phone.files
    files.remove(PHONE_RUNTIME["lib"])
    _fails(cli, v73_phone, "fastrpc:library", cause="no libcdsprpc.so in /vendor/lib64",
           fix="exposes no FastRPC library")
    files.add_file("/vendor/lib64/libcdsprpc.so.1")
    _fails(cli, v73_phone, "fastrpc:library", cause="only /vendor/lib64/libcdsprpc.so.1", fix="ln -s")
    files.add_file(PHONE_RUNTIME["lib"])

    files.remove(PHONE_RUNTIME["node"])
    _fails(cli, v73_phone, "fastrpc:device-node", cause="no FastRPC device node", fix="no FastRPC driver")
    files.add_file(PHONE_RUNTIME["node"])  # a plain file where the driver's node should be
    _fails(cli, v73_phone, "fastrpc:device-node", cause="is not a character device", fix="reload the fastrpc")
    files.add_node(PHONE_RUNTIME["node"])

    files.remove(PHONE_RUNTIME["shell"])
    _fails(cli, v73_phone, "fastrpc:unsigned-pd-shell", cause="no fastrpc_shell_unsigned_3",
           fix="cannot run unsigned code")
    files.add_file(PHONE_RUNTIME["shell"])
    assert doctor(cli, f"adb:{v73_phone.serial}").rc == 0


def test_the_skel_on_adsp_library_path_must_be_the_manifests(cli, v73_phone):
    assert v73_phone.shell(f"echo drift >> {SKEL_V73}").returncode == 0
    check = _fails(cli, v73_phone, "adsp-library-path", cause="differs from the manifest", fix="--verify")
    assert "libggml-htp-v73.so" in check["detail"]
    assert v73_phone.shell(f"rm {SKEL_V73}").returncode == 0
    _fails(cli, v73_phone, "adsp-library-path", cause="no libggml-htp-v73.so in ADSP_LIBRARY_PATH",
           fix="--htp v73")


def test_a_package_without_the_devices_arch(cli, make_fastrpc_phone, android_pkg):
    dev = make_fastrpc_phone("SM8650")  # v75; the package has v68 v69 v73
    assert cli("deploy", str(android_pkg), "--target", f"adb:{dev.serial}").rc == 0
    check = _fails(cli, dev, "package:htp-lib", cause="has no lib/libggml-htp-v75.so", fix="hexbuild build --htp v75")
    assert "v68 v69 v73" in check["detail"] and "0x80000406" in check["detail"]


def test_a_local_package_is_compared_with_the_device(cli, v73_phone, tmp_path):
    other = make_package(tmp_path, "android", ("v73",))
    (other / "lib" / "libggml-htp-v73.so").write_bytes(b"\x7fELF another build")
    r = doctor(cli, f"adb:{v73_phone.serial}", "--package", str(other))
    assert r.rc == 3
    check = device_checks(r)["adsp-library-path"]
    assert check["status"] == "missing" and "differs from the package" in check["detail"]


def test_nothing_deployed_and_no_runtime(cli, make_fastrpc_phone):
    dev = make_fastrpc_phone("SM8750", runtime=False, selinux=None)
    r = doctor(cli, f"adb:{dev.serial}")
    assert r.rc == 3
    checks = device_checks(r)
    assert "nothing hexbuild deployed" in checks["package:htp-lib"]["detail"]
    assert "hexbuild deploy PKG" in checks["package:htp-lib"]["fix"]
    for name in ("fastrpc:library", "fastrpc:device-node", "fastrpc:unsigned-pd-shell", "adsp-library-path"):
        assert checks[name]["status"] == "missing", name
    assert checks["selinux"]["status"] == "info"  # no getenforce on this device


def test_selinux_context_of_an_app_is_a_warning(cli, v73_phone):
    v73_phone.files.add_program("id", '#!/system/bin/sh\n[ "$1" = -Z ] && { echo u:r:untrusted_app:s0:c512,c768; exit 0; }\n'
                                      'exec toybox id "$@"\n')
    r = doctor(cli, f"adb:{v73_phone.serial}")
    check = device_checks(r)["selinux"]
    assert check["status"] == "warn" and "untrusted_app" in check["detail"]
    assert "adb shell" in check["fix"]
    assert not check["required"] and r.rc == 0 and r.json["ok"], r.err  # a warning is not a failure


def test_memory_against_the_plan(cli, make_fastrpc_phone, tmp_path, android_pkg):
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    dev = make_fastrpc_phone("SM8550")
    cli("deploy", str(android_pkg), "--target", f"adb:{dev.serial}")
    ok = device_checks(doctor(cli, f"adb:{dev.serial}", "--model", str(model)))["memory"]
    assert ok["status"] == "ok" and "1 session(s)" in ok["detail"] and "available" in ok["detail"]

    # a phone with almost no free memory: its own /proc/meminfo inside its namespace
    (tmp_path / "meminfo").write_text("MemTotal: 4096 kB\nMemAvailable: 16 kB\n")
    low = make_fastrpc_phone("SM8550", setup_extra=f'mount --bind {tmp_path / "meminfo"} "$R/proc/meminfo" && ')
    cli("deploy", str(android_pkg), "--target", f"adb:{low.serial}")
    r = doctor(cli, f"adb:{low.serial}", "--model", str(model))
    check = device_checks(r)["memory"]
    assert r.rc == 3 and check["status"] == "missing" and "0 MiB available" in check["detail"]
    assert "smaller quantization" in check["fix"]


def test_a_missing_tool_is_named_and_the_shell_reported(cli, make_fastrpc_phone):
    dev = make_fastrpc_phone("SM8550", without=("sha256sum",))  # a trimmed toybox
    r = doctor(cli, f"adb:{dev.serial}", "--for", "deploy")
    check = device_checks(r)["tools"]
    assert check["status"] == "missing" and "sha256sum" in check["detail"]
    shell = device_checks(r)["shell"]
    assert shell["status"] == "info" and "MIRBSD KSH" in shell["detail"] and "toybox 0.8" in shell["detail"]


def test_bad_input_is_one_line(cli, tmp_path):
    r = cli("doctor", "--package", str(tmp_path))
    assert r.rc == 2 and "give --target T too" in r.err
    r = cli("doctor", "--target", "local:/tmp", "--model", str(tmp_path / "nope.gguf"))
    assert r.rc == 2 and "no such file" in r.err
    r = cli("doctor", "--target", "bogus://x")
    assert r.rc == 2 and "unknown target" in r.err


# -- a Linux board (local: target) -------------------------------------------------------------------
def _glibc_program(out: Path) -> Path:
    """A real AArch64 program linked against the cross sysroot's glibc (needs GLIBC_2.34)."""
    src = out.with_suffix(".c")
    src.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    cc = "aarch64-linux-gnu-gcc"
    cp = subprocess.run([cc, "-O1", "-o", str(out), str(src)], capture_output=True, text=True)
    if cp.returncode != 0:
        pytest.fail(f"{cc} failed (scripts/setup-test-env.sh installs g++-aarch64-linux-gnu): {cp.stderr}")
    return out


def board_doctor(files, install: Path, *extra: str, path_prefix: str | None = None):
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{os.environ['PATH']}"
    cp = run_in_board(files, [sys.executable, "-m", "hexbuild", "doctor", "--target", f"local:{install}",
                              "--json", *extra], env=env)
    assert cp.stdout, cp.stderr
    doc = json.loads(cp.stdout)
    return cp.returncode, {c["name"][len("device:"):]: c for c in doc["checks"] if c["name"].startswith("device:")}, cp


@pytest.fixture
def linux_pkg(tmp_path):
    pkg = make_package(tmp_path / "build", "linux", ("v68",))  # QCM6490
    _glibc_program(pkg / "bin" / "llama-hello")
    return pkg


def test_a_linux_board_passes_and_fails_at_the_real_paths(cli, tmp_path, linux_pkg):
    install = tmp_path / "board" / "llama.cpp"
    assert cli("deploy", str(linux_pkg), "--target", f"local:{install}").rc == 0
    files = board_root(tmp_path / "devroot")
    rc, checks, cp = board_doctor(files, install, "--package", str(linux_pkg))
    for name in ("fastrpc:library", "fastrpc:device-node", "fastrpc:unsigned-pd-shell", "adsp-library-path",
                 "glibc", "tools"):
        assert checks[name]["status"] == "ok", (name, checks[name])
    assert BOARD_RUNTIME["lib"] in checks["fastrpc:library"]["detail"]
    assert "/dev/fastrpc-cdsp" in checks["fastrpc:device-node"]["detail"]
    assert "GLIBC_2.34" in checks["glibc"]["detail"]
    assert not Path(BOARD_RUNTIME["lib"]).exists()  # only inside the board's namespace

    # an older board userland: its getconf answers glibc 2.31
    old = tmp_path / "old-glibc"
    old.mkdir()
    (old / "getconf").write_text("#!/bin/sh\necho glibc 2.31\n")
    (old / "getconf").chmod(0o755)
    rc, checks, _ = board_doctor(files, install, "--package", str(linux_pkg), path_prefix=str(old))
    assert rc == 3
    assert checks["glibc"]["status"] == "missing"
    assert "needs GLIBC_2.34 (bin/llama-hello) but the device has glibc 2.31" in checks["glibc"]["detail"]
    assert "--bundle-runtime" in checks["glibc"]["fix"]

    bare = board_root(tmp_path / "bare", runtime=False)
    bare.add_file("/usr/lib/libcdsprpc.so.1")
    rc, checks, cp = board_doctor(bare, install)
    assert rc == 3, cp.stderr
    assert "only /usr/lib/libcdsprpc.so.1" in checks["fastrpc:library"]["detail"]
    assert "modprobe fastrpc" in checks["fastrpc:device-node"]["fix"]
    assert checks["fastrpc:unsigned-pd-shell"]["status"] == "missing"
    assert "device:fastrpc:library" in cp.stderr


def test_over_ssh_the_same_checks_run(cli, sshd_host):
    r = cli("doctor", "--target", f"ssh://root@127.0.0.1:{sshd_host.port}", "--json", env=sshd_host.env)
    checks = device_checks(r)
    assert r.rc == 3  # this machine is no Snapdragon board
    assert r.json["device"]["kind"] == "ssh"
    assert checks["fastrpc:library"]["status"] == "missing"
    assert checks["tools"]["status"] == "ok"


def test_the_virtual_board_glibc_is_read_for_real(cli, tmp_path, virtual_board, argv_echo_aarch64, monkeypatch):
    """The bullseye arm64 board (glibc 2.31, tests/infra/board.py) against a package built with
    Debian's cross gcc (glibc 2.36: needs GLIBC_2.34); with --bundle-runtime it passes."""
    import shutil

    for k, v in virtual_board.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", "/usr/aarch64-linux-gnu")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    pkg = tmp_path / "pkg" / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    shutil.copy(argv_echo_aarch64, pkg / "bin" / "llama-completion")
    (pkg / "manifest.json").write_text(json.dumps({"os": "linux"}))
    r = doctor(cli, virtual_board.spec, "--package", str(pkg), "--dest", "/opt/doctor/llama.cpp")
    check = device_checks(r)["glibc"]
    assert check["status"] == "missing", check
    assert "needs GLIBC_2.34 (bin/llama-completion) but the device has glibc 2.31" in check["detail"]

    dest = "/opt/doctor-bundled/llama.cpp"
    assert cli("deploy", str(pkg), "--target", virtual_board.spec, "--dest", dest, "--bundle-runtime").rc == 0
    check = device_checks(doctor(cli, virtual_board.spec, "--dest", dest))["glibc"]
    assert check["status"] == "ok" and "its own runtime" in check["detail"]


# -- what the package and the target can do: CPU-only packages, qemu: ----------------------------------
SYSROOT = "/usr/aarch64-linux-gnu"  # Debian's libc6-arm64-cross (scripts/setup-test-env.sh)
NPU_CHECKS = ("fastrpc:library", "fastrpc:device-node", "fastrpc:unsigned-pd-shell", "adsp-library-path")


def cpu_only(pkg: Path, os_name: str) -> Path:
    """What the open toolchain (or GGML_HEXAGON=OFF) builds: no Hexagon host library, no skels."""
    for p in (pkg / "lib").glob("libggml-h*.so*"):
        p.unlink()
    (pkg / "manifest.json").write_text(json.dumps({"os": os_name, "toolchain": "open", "lacks": ["htp"]}))
    return pkg


def test_a_cpu_only_package_needs_no_fastrpc_runtime(cli, make_fastrpc_phone, tmp_path):
    dev = make_fastrpc_phone("SM8750", runtime=False, selinux=None)  # no libcdsprpc, node or unsigned PD
    pkg = cpu_only(make_package(tmp_path / "cpu", "android", ()), "android")
    assert cli("deploy", str(pkg), "--target", f"adb:{dev.serial}").rc == 0
    r = doctor(cli, f"adb:{dev.serial}")
    assert r.rc == 0, r.err
    checks = device_checks(r)
    assert checks["npu"]["status"] == "info" and "CPU only" in checks["npu"]["detail"]
    for name in NPU_CHECKS:  # still shown (what an NPU package would meet), never required
        assert checks[name]["status"] == "missing" and not checks[name]["required"], name
    # the same phone with an NPU package: the same checks are required again
    assert cli("deploy", str(make_package(tmp_path / "npu", "android", ("v73",))), "--target",
               f"adb:{dev.serial}").rc == 0
    again = doctor(cli, f"adb:{dev.serial}")
    assert again.rc == 3 and all(device_checks(again)[n]["required"] for n in NPU_CHECKS)


def test_qemu_passes_a_cpu_only_package_and_takes_sysroot(cli, tmp_path):
    pkg = cpu_only(make_package(tmp_path / "cpu", "linux", ()), "linux")
    spec = f"qemu:{tmp_path / 'q' / 'llama.cpp'}"
    assert cli("deploy", str(pkg), "--target", spec, "--sysroot", SYSROOT).rc == 0
    r = doctor(cli, spec, "--sysroot", SYSROOT)
    assert r.rc == 0, r.err
    checks = device_checks(r)
    assert checks["emulator"]["status"] == "ok" and SYSROOT in checks["emulator"]["detail"]
    assert checks["npu"]["status"] == "info" and "CPU only" in checks["npu"]["detail"]  # as the README's table says
    assert not set(NPU_CHECKS) & set(checks)  # they would only probe this machine
    assert checks["glibc"]["status"] in ("ok", "info") and "sysroot" in checks["glibc"]["detail"]
    assert r.json["device"]["kind"] == "qemu"
    # no sysroot and no open toolchain image to take one from: the emulator check fails with the fix
    none = doctor(cli, spec, env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert none.rc == 3 and device_checks(none)["emulator"]["status"] == "missing", none.err
    assert "--sysroot" in device_checks(none)["emulator"]["fix"] and "device:emulator" in none.err
    # a directory that is no sysroot is bad input, as for run and deploy
    bad = doctor(cli, spec, "--sysroot", str(tmp_path))
    assert bad.rc == 2 and "not an AArch64 glibc sysroot" in bad.err


def test_qemu_with_an_npu_package_says_its_sessions_cannot_open(cli, tmp_path):
    pkg = make_package(tmp_path / "npu", "linux", ("v68",))
    spec = f"qemu:{tmp_path / 'q' / 'llama.cpp'}"
    assert cli("deploy", str(pkg), "--target", spec, "--sysroot", SYSROOT).rc == 0
    r = doctor(cli, spec, "--sysroot", SYSROOT)
    assert r.rc == 3
    check = device_checks(r)["npu"]
    assert check["status"] == "missing" and check["required"] and "exit 12" in check["detail"]
    assert "--toolchain open" in check["fix"] and "--allow-cpu-fallback" in check["fix"]
    assert r.err.count("hexbuild: error:") == 1 and "device:npu" in r.err


def test_the_human_table_prints_check_names_as_written(cli, tmp_path):
    pkg = cpu_only(make_package(tmp_path / "cpu", "linux", ()), "linux")
    spec = f"local:{tmp_path / 'l' / 'llama.cpp'}"
    assert cli("deploy", str(pkg), "--target", spec).rc == 0
    r = cli("doctor", "--target", spec)
    assert "package:" in r.out and "\U0001f4e6" not in r.out  # rich made ':package:' an emoji
