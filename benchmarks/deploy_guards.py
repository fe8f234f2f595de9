"""What the deploy guards cost: the device-tools check (riding in the device probe's call) and
the deploy lock (one call to take it, one to release it), against the deploy they guard,
measured in one run.

One virtual phone with mksh + toybox (a real adbd behind a real adb server, tests/infra). The
machine these run on is shared, so the variants are measured interleaved (A, B, A, B, …) and
medians of --runs repetitions are compared:
- the device probe as it was (no tools check) against the probe with the tools check;
- the lock: take + release;
- an unchanged redeploy (the cheapest real deploy: nothing is pushed), guards included;
- a redeploy after one 2 MB library changed (one push, a new release, the switch).
Prints each time and the guards' share of each deploy.

Usage (root): python benchmarks/deploy_guards.py [--runs 20]
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
from hexbuild.targets.adb import _PROBE as ADB_PROBE  # noqa: E402
from hexbuild.targets.tools import PROBE_SCRIPT  # noqa: E402
from tests import elf_factory as ef  # noqa: E402
from tests.infra.devices import new_device, start_adb_server  # noqa: E402

DEST = "/data/local/tmp/llama.cpp"


def interleaved(fns: dict, runs: int) -> dict[str, float]:
    """Median seconds of each callable, calling them in turn ``runs`` times."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


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

        def unchanged() -> None:
            (res,) = deploy(pkg, [target], DeployOptions())
            assert res.status == "unchanged", res.error

        def one_changed() -> None:
            lib.write_bytes(os.urandom(2_000_000))
            (res,) = deploy(pkg, [target], DeployOptions())
            assert res.status == "ok" and res.files_pushed == 1, res.error

        def lock() -> None:
            with DeployLock(target, Layout(DEST), wait=0, stale=3600):
                pass

        m = interleaved({"probe_plain": lambda: target.sh(ADB_PROBE, DEST),
                         "probe_tools": lambda: target.sh(ADB_PROBE + "\n" + PROBE_SCRIPT, DEST),
                         "lock": lock, "unchanged": unchanged, "changed": one_changed}, args.runs)
        target.close()
        tools = m["probe_tools"] - m["probe_plain"]
        g = tools + m["lock"]
        ms = lambda x: f"{x * 1000:7.1f} ms"  # noqa: E731
        print(f"phone: mksh + toybox, {args.runs} runs each, interleaved, medians")
        print(f"device probe without / with the tools check:  {ms(m['probe_plain'])} / {ms(m['probe_tools'])}"
              f"   (+{tools * 1000:.1f} ms)")
        print(f"deploy lock, take + release:                  {ms(m['lock'])}")
        print(f"guards in all:                                {ms(g)}")
        print(f"unchanged redeploy (guards included):         {ms(m['unchanged'])}   guards = {g / m['unchanged']:.1%} of it")
        print(f"redeploy, one 2 MB library changed:           {ms(m['changed'])}   guards = {g / m['changed']:.1%} of it")
    finally:
        if device is not None:
            device.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
