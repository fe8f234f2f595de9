"""Redeploy after one library changed: `hexbuild deploy` against what
`scripts/snapdragon/build.py --push` does (`adb shell rm -rf DEST` then `adb push` of the whole
install dir), measured in one run on a virtual phone (real adbd, real adb client and server).

The package: ~100 files of random bytes, ~1 GiB, made under a temporary directory and deleted
afterwards. Two links: loopback (as fast as this machine's CPUs move bytes) and a USB-2-like
link (a veth pair shaped with tbf to --link-mbit, default 320 Mbit/s = 40 MB/s) to a phone in its
own network namespace. hexbuild's time includes hashing the package on this machine.
Target: bytes pushed within 5 % of the changed bytes.

Usage (root): python benchmarks/deploy_incremental.py [--mb 1024] [--files 100] [--link-mbit 320]
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

from hexbuild.deploy import DeployOptions, deploy  # noqa: E402
from hexbuild.targets import parse_target  # noqa: E402
from tests.infra.devices import new_device, start_adb_server  # noqa: E402

CHANGED = "lib/libllama.so"
MB = 1 << 20


def make_package(root: Path, total_mb: int, files: int) -> Path:
    """bin/ and lib/ like an install prefix: a few big libraries, many mid-size programs."""
    pkg = root / "pkg-snapdragon" / "llama.cpp"
    big = [f"lib/libggml-{n}.so" for n in ("cpu", "opencl", "base", "hexagon")] + [CHANGED]
    big += [f"lib/libggml-htp-v{v}.so" for v in (68, 69, 73, 75, 79, 81)]
    small = [f"bin/llama-tool-{i:02d}" for i in range(files - len(big))]
    big_mb = total_mb * 0.7 / len(big)
    small_mb = total_mb * 0.3 / max(1, len(small))
    for rel, size_mb in [(r, big_mb) for r in big] + [(r, small_mb) for r in small]:
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(int(size_mb * MB)))
        path.chmod(0o755 if rel.startswith("bin/") else 0o644)
    return pkg


def package_bytes(pkg: Path) -> int:
    return sum(p.stat().st_size for p in pkg.rglob("*") if p.is_file())


def plain_push(server, serial: str, pkg: Path, parent: str) -> float:
    """build.py --push: remove the install, push the whole directory (to its parent, which
    makes <parent>/llama.cpp)."""
    t0 = time.perf_counter()
    server("-s", serial, "shell", f"rm -rf {parent}/llama.cpp && mkdir -p {parent}", timeout=600)
    server("-s", serial, "push", str(pkg), f"{parent}/", timeout=3600)
    return time.perf_counter() - t0


def one_link(server, base: Path, pkg: Path, link_mbit: int | None) -> dict:
    dev = new_device(server, base, "SM8650", link_mbit=link_mbit)
    try:
        target = parse_target(f"adb:{dev.serial}", {"deploy.timeout": 3600.0})
        first = deploy(pkg, [target], DeployOptions())[0]
        assert first.status == "ok", first.error
        plain_push(server, dev.serial, pkg, "/data/local/tmp/plain")  # the plain way's previous install
        changed = pkg / CHANGED
        changed.write_bytes(os.urandom(changed.stat().st_size))  # one library rebuilt
        changed_bytes = changed.stat().st_size

        t0 = time.perf_counter()
        res = deploy(pkg, [target], DeployOptions())[0]
        hex_time = time.perf_counter() - t0
        assert res.status == "ok", res.error
        plain_time = plain_push(server, dev.serial, pkg, "/data/local/tmp/plain")
        return {"first": first.duration_s, "changed": changed_bytes, "hex_bytes": res.bytes_pushed,
                "hex_files": res.files_pushed, "hex_time": hex_time, "plain_bytes": package_bytes(pkg),
                "plain_time": plain_time}
    finally:
        dev.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="package size in MiB")
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--link-mbit", type=int, default=320, help="USB-like link rate; 0 skips that run")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-"))
    server = None
    try:
        pkg = make_package(base, args.mb, args.files)
        server = start_adb_server(base)
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        os.environ["XDG_CACHE_HOME"] = str(base / "cache")  # hexbuild's hash cache, thrown away after
        total = package_bytes(pkg)
        print(f"package: {sum(1 for p in pkg.rglob('*') if p.is_file())} files, {total / MB:.0f} MiB; "
              f"changed: {CHANGED} ({(pkg / CHANGED).stat().st_size / MB:.1f} MiB)")
        links = [("loopback", None)] + ([(f"{args.link_mbit} Mbit/s (USB-2-like)", args.link_mbit)]
                                        if args.link_mbit else [])
        ok = True
        for name, rate in links:
            r = one_link(server, base, pkg, rate)
            excess = r["hex_bytes"] / r["changed"] - 1
            ok &= abs(excess) <= 0.05
            print(f"\nlink: {name}  (first full deploy by hexbuild: {r['first']:.2f} s)")
            print(f"  hexbuild deploy        : {r['hex_bytes'] / MB:9.1f} MiB pushed in {r['hex_files']} file(s), "
                  f"{r['hex_time']:6.2f} s  ({r['hex_bytes'] / r['changed']:.3f} x the changed bytes)")
            print(f"  build.py --push (plain): {r['plain_bytes'] / MB:9.1f} MiB pushed, {r['plain_time']:6.2f} s")
            print(f"  => {r['plain_time'] / r['hex_time']:.1f}x faster, {r['plain_bytes'] / max(1, r['hex_bytes']):.0f}x fewer bytes")
        print(f"\ntarget (bytes pushed within 5 % of the changed bytes): {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
