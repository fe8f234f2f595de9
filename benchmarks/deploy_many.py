"""`hexbuild deploy` to four virtual phones at once against one phone, measured in one run.
Target: four take under 1.5x the time of one.

Each phone is a real adbd reached through one real adb server. Two set-ups:
- USB-like links: every phone in its own network namespace behind its own veth pair shaped to
  --link-mbit (default 320 Mbit/s, USB 2.0 class), as four phones on four USB ports are;
- loopback: no link limit, so every byte costs CPU in this process, the adb server and adbd —
  on a 2-core machine the four copies compete for the same cores (shown for honesty, not a
  model of real phones).
The package (random bytes, --mb MiB in --files files) is hashed once before timing; each run
is a first deploy to a fresh directory.

Usage (root): python benchmarks/deploy_many.py [--mb 200] [--files 80] [--link-mbit 320]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.deploy_incremental import MB, make_package  # noqa: E402
from hexbuild.deploy import DeployOptions, deploy, load_package  # noqa: E402
from hexbuild.targets import parse_target  # noqa: E402
from tests.infra.devices import new_device, start_adb_server  # noqa: E402


def timed_deploy(pkg, devices, dest: str) -> float:
    targets = [parse_target(f"adb:{d.serial}", {"deploy.timeout": 3600.0}) for d in devices]
    t0 = time.perf_counter()
    results = deploy(pkg, targets, DeployOptions(dest=dest, parallel=len(targets)))
    elapsed = time.perf_counter() - t0
    bad = [r for r in results if r.status != "ok"]
    if bad:
        raise SystemExit(f"deploy failed: {bad[0].serial}: {bad[0].error}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--files", type=int, default=80)
    ap.add_argument("--link-mbit", type=int, default=320, help="USB-like link rate; 0 skips that run")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-"))
    server = None
    devices = []
    try:
        os.environ["XDG_CACHE_HOME"] = str(base / "cache")  # hexbuild's hash cache, thrown away after
        pkg_dir = make_package(base, args.mb, args.files)
        pkg = load_package(pkg_dir)
        server = start_adb_server(base)
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        print(f"package: {len(pkg.files)} files, {pkg.bytes / MB:.0f} MiB; {os.cpu_count()} CPU cores here")
        setups = ([(f"USB-like links, {args.link_mbit} Mbit/s each", args.link_mbit)] if args.link_mbit else [])
        setups.append(("loopback (CPU-bound)", None))
        ok = True
        for name, rate in setups:
            devices = [new_device(server, base, soc, link_mbit=rate) for soc in ("SM8650", "SM8550", "SM8750", "SM8650")]
            one = timed_deploy(pkg, devices[:1], "/data/local/tmp/one/llama.cpp")
            four = timed_deploy(pkg, devices, "/data/local/tmp/four/llama.cpp")
            for d in devices:
                d.stop()
            devices = []
            ratio = four / one
            if rate:
                ok &= ratio < 1.5
            print(f"\n{name}:")
            print(f"  one phone  : {one:6.2f} s  ({pkg.bytes / MB / one:6.1f} MiB/s)")
            print(f"  four phones: {four:6.2f} s  ({4 * pkg.bytes / MB / four:6.1f} MiB/s in total)")
            print(f"  => four take {ratio:.2f}x the time of one (serial would be ~4x)")
        if args.link_mbit:
            print(f"\ntarget (four under 1.5x one, USB-like links): {'met' if ok else 'MISSED'}")
        pkg.close()
        return 0 if ok else 1
    finally:
        for d in devices:
            d.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
