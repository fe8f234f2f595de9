"""What `hexbuild doctor --target` costs against asking the device by hand, measured in one run.

One virtual phone (real adbd behind a real adb server) with a FastRPC runtime at the real paths
inside its own namespace (tests/infra/device_files.py) and a package deployed by hexbuild. Two ways,
each --runs times, medians reported:
- plain: the `adb shell` lines a person types to answer the same questions (SoC, Android
  release, getenforce, the FastRPC library, node and unsigned PD shell, the skel's sha256,
  free memory, toybox and the tools), one adb call each;
- hexbuild: the device checks in-process (hexbuild.diagnose.check_device): the probe, the
  deployed manifest and the checks themselves.

Usage (root): python benchmarks/doctor_device.py [--runs 10]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run_overhead import median_time  # noqa: E402
from tests.elf_factory import make_package  # noqa: E402
from tests.infra.device_files import PHONE_RUNTIME, PHONE_SETUP, give_runtime, phone_files, prepare_phone  # noqa: E402
from tests.infra.devices import new_device, start_adb_server  # noqa: E402

DEST = "/data/local/tmp/llama.cpp"
BY_HAND = [
    "getprop ro.soc.model", "getprop ro.build.version.release", "getenforce",
    "ls -l /vendor/lib64/libcdsprpc.so", "ls -l /dev/adsprpc-smd", "ls -l /vendor/dsp/cdsp/fastrpc_shell_unsigned_3",
    f"ls {DEST}/lib", f"sha256sum {DEST}/lib/libggml-htp-v73.so", f"cat {DEST}/.hexbuild/manifest.json",
    "cat /proc/meminfo", "toybox --version",
    "for t in sh cat mkdir mv ln rm chmod find stat sha256sum df readlink dirname tail sed tr wc; do command -v $t; done",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-doctor-"))
    with ExitStack() as cleanup:  # undone in reverse: the phone, the server, the directory
        cleanup.callback(shutil.rmtree, base, ignore_errors=True)
        server = start_adb_server(base)
        cleanup.callback(server.stop)
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        device = new_device(server, base, "SM8550", prepare=prepare_phone, setup=PHONE_SETUP)
        cleanup.callback(device.stop)
        give_runtime(phone_files(device), PHONE_RUNTIME)
        pkg = make_package(base / "pkg", "android", ("v73",))
        from hexbuild.cli.main import main as hexbuild_main

        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            assert hexbuild_main(["deploy", str(pkg), "--target", f"adb:{device.serial}", "-q"]) == 0

        adb = shutil.which("adb")

        def plain() -> None:
            for cmd in BY_HAND:
                subprocess.run([adb, "-P", str(server.port), "-s", device.serial, "shell", cmd],
                               capture_output=True, check=False)

        from hexbuild.diagnose import check_device
        from hexbuild.targets import parse_target

        def hexbuild() -> None:
            with parse_target(f"adb:{device.serial}") as t:
                _, checks = check_device(t)
            assert not [c for c in checks if c.status == "missing"], checks

        plain()
        hexbuild()  # warm both
        t_plain = median_time(plain, args.runs)
        t_hex = median_time(hexbuild, args.runs)
        print(f"device facts over adb, median of {args.runs} runs:")
        print(f"  by hand ({len(BY_HAND)} adb shell calls, no checking): {t_plain * 1000:8.1f} ms")
        print(f"  hexbuild doctor device checks:                 {t_hex * 1000:8.1f} ms")
        print(f"  ratio hexbuild / by hand: {t_hex / t_plain:.2f}x")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
