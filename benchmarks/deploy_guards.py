"""What the deploy guards cost: the device-tools probe (one device call) and the deploy lock
(one call to take it, one to release it), against the deploy they guard, measured in one run.

One virtual phone with mksh + toybox (a real adbd behind a real adb server, tests/infra). For
--runs repetitions, medians of:
- the guards alone: probe_tools + DeployLock acquire/release, in-process;
- an unchanged redeploy (the cheapest real deploy: nothing is pushed), in-process, which
  includes the guards;
- a redeploy after one 2 MB library changed (one push, a new release, the switch).
Prints each time and the guards' share of each deploy.

Usage (root): python benchmarks/deploy_guards.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hexbuild.deploy import DeployOptions, deploy  # noqa: E402
from hexbuild.deploy.layout import Layout  # noqa: E402
from hexbuild.deploy.lock import DeployLock  # noqa: E402
from hexbuild.targets import parse_target  # noqa: E402
from hexbuild.targets.tools import probe_tools  # noqa: E402
from tests import elf_factory as ef  # noqa: E402
from tests.infra.devices import new_device, start_adb_server  # noqa: E402

DEST = "/data/local/tmp/llama.cpp"


def median_time(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-guards-"))
    os.environ["XDG_CACHE_HOME"] = str(base / "xdg")
    server = device = None
    try:
        server = start_adb_server(base)
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        device = new_device(server, base, "SM8650")
        pkg = ef.make_package(base / "build", os="android", htp=["v68", "v73"])
        lib = pkg / "lib" / "libggml-cpu.so"
        lib.write_bytes(os.urandom(2_000_000))
        target = parse_target(f"adb:{device.serial}")
        (first,) = deploy(pkg, [target], DeployOptions())
        assert first.status == "ok", first.error

        def guards() -> None:
            assert probe_tools(target).problem is None
            with DeployLock(target, Layout(DEST), wait=0, stale=3600):
                pass

        def unchanged() -> None:
            (res,) = deploy(pkg, [target], DeployOptions())
            assert res.status == "unchanged", res.error

        def one_changed() -> None:
            lib.write_bytes(os.urandom(2_000_000))
            (res,) = deploy(pkg, [target], DeployOptions())
            assert res.status == "ok" and res.files_pushed == 1, res.error

        g = median_time(guards, args.runs)
        u = median_time(unchanged, args.runs)
        c = median_time(one_changed, args.runs)
        target.close()
        print(f"phone: mksh + toybox, {args.runs} runs each, medians")
        print(f"guards alone (tools probe + lock take/release): {g * 1000:7.1f} ms")
        print(f"unchanged redeploy (guards included):           {u * 1000:7.1f} ms   guards = {g / u:.1%} of it")
        print(f"redeploy, one 2 MB library changed:             {c * 1000:7.1f} ms   guards = {g / c:.1%} of it")
    finally:
        if device is not None:
            device.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
