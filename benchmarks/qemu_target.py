"""What the `qemu:` target costs over the plain commands, measured in one run.

Stages, each --runs times, medians reported with the ratio to the plain way:
- deploy, cold: `hexbuild deploy PKG --target qemu:DIR` into an empty DIR vs `cp -a PKG DIR`;
- deploy, unchanged: the same deploy again (nothing to send) vs `cp -a` again (rm -rf + cp);
- deploy, one library changed: vs `cp -a` again;
- run: `hexbuild run completion --target qemu:DIR -- ARGS` (a new process: manifest read,
  command rendered, log and JSON result saved) vs `qemu-aarch64 -L SYSROOT ./bin/llama-completion
  ARGS` typed by hand with LD_LIBRARY_PATH.

The default package is the AArch64 argv echo program (tests/tools/argv_echo.c, built with
Debian's cross gcc) as bin/llama-completion beside 48 MiB of libraries, so the measured time is
the wrapper's, not llama.cpp's. `--package DIR --model FILE.gguf` measures a real build instead
(then the run stage includes the real inference, identical on both sides).

Usage: python benchmarks/qemu_target.py [--runs 5] [--sysroot /usr/aarch64-linux-gnu]
                                         [--package DIR --model tiny.gguf]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["-n", "16", "-p", "The quick brown fox jumps over the lazy dog"]


def median_time(fn, runs: int, before=None) -> float:
    samples = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def synthetic_package(base: Path) -> Path:
    pkg = base / "pkg" / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-o", str(pkg / "bin" / "llama-completion"),
                    str(ROOT / "tests" / "tools" / "argv_echo.c")], check=True)
    for i in range(6):
        (pkg / "lib" / f"libggml-part{i}.so").write_bytes(os.urandom(8 * 1024 * 1024))
    (pkg / "manifest.json").write_text('{"os": "linux"}')
    return pkg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sysroot", default="/usr/aarch64-linux-gnu")
    ap.add_argument("--package", type=Path)
    ap.add_argument("--model", type=Path)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-qemu-"))
    # bytecode cached as an installed hexbuild has it (in a private prefix: the checkout stays clean)
    env = dict(os.environ, XDG_CACHE_HOME=str(base / "xdg"), HEXBUILD_LINUX_SYSROOT=args.sysroot,
               PYTHONPYCACHEPREFIX=str(base / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        pkg = args.package or synthetic_package(base)
        inst, plain_dir, results = base / "inst", base / "plain", base / "results"
        spec = f"qemu:{inst}"
        hexbuild = [sys.executable, "-m", "hexbuild", "-q"]
        model_args = []
        if args.model:
            (base / "gguf").mkdir()
            shutil.copy(args.model, base / "gguf" / args.model.name)
            model_args = ["-m", str(base / "gguf" / args.model.name)]

        def deploy() -> None:
            subprocess.run([*hexbuild, "deploy", str(pkg), "--target", spec], check=True, env=env, capture_output=True)

        def clear_inst() -> None:
            for p in base.glob(".inst*"):
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            if inst.is_symlink() or inst.exists():
                inst.unlink() if inst.is_symlink() else shutil.rmtree(inst)

        def copy() -> None:
            shutil.rmtree(plain_dir, ignore_errors=True)
            subprocess.run(["cp", "-a", str(pkg), str(plain_dir)], check=True)

        lib = next(p for p in sorted((pkg / "lib").iterdir()) if p.is_file() and not p.is_symlink())
        original = lib.read_bytes()

        def touch_lib() -> None:
            data = bytearray(lib.read_bytes())
            data[-1] ^= 0xFF
            lib.write_bytes(bytes(data))

        t_cold = median_time(deploy, args.runs, before=clear_inst)
        t_cold_plain = median_time(copy, args.runs)
        t_same = median_time(deploy, args.runs)
        t_same_plain = median_time(copy, args.runs)
        try:
            t_one = median_time(deploy, args.runs, before=touch_lib)
            t_one_plain = median_time(copy, args.runs, before=touch_lib)
        finally:
            lib.write_bytes(original)
        deploy()

        qemu = shutil.which("qemu-aarch64") or "qemu-aarch64"
        threads = ["-t", str(len(os.sched_getaffinity(0)))]
        plain_run = [qemu, "-L", args.sysroot, "--", "./bin/llama-completion", *model_args, *threads, *ARGS]
        run_env = dict(env, LD_LIBRARY_PATH=str(inst / "lib"))
        hex_run = [*hexbuild, "run", "completion", "-t", spec, "--results-dir", str(results), "--", *model_args,
                   *threads, *ARGS]

        def plain() -> None:
            subprocess.run(plain_run, check=True, cwd=inst, env=run_env, capture_output=True)

        def hexbuild_run() -> None:
            subprocess.run(hex_run, check=True, env=env, capture_output=True)

        t_run_plain = median_time(plain, args.runs)
        t_run = median_time(hexbuild_run, args.runs)
        local_spec = f"local:{base / 'local-inst'}"

        def deploy_local() -> None:
            subprocess.run([*hexbuild, "deploy", str(pkg), "--target", local_spec], check=True, env=env,
                           capture_output=True)

        deploy_local()
        t_same_local = median_time(deploy_local, args.runs)
        t_python = median_time(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, env=env), args.runs)
        size = sum(p.stat().st_size for p in pkg.rglob("*") if p.is_file())
        print(f"qemu: target, package {pkg} ({size / 2**20:.1f} MiB), {args.runs} runs each, medians")
        rows = [("deploy, cold", t_cold, t_cold_plain, "cp -a"),
                ("deploy, unchanged", t_same, t_same_plain, "cp -a"),
                ("deploy, one library changed", t_one, t_one_plain, "cp -a"),
                ("run completion", t_run, t_run_plain, "qemu-aarch64 -L … by hand")]
        for name, t_hex, t_plain, how in rows:
            print(f"  {name:30s} hexbuild {t_hex * 1000:8.1f} ms   plain ({how}) {t_plain * 1000:8.1f} ms   "
                  f"{t_hex / t_plain:5.2f}x")
        print(f"  the same unchanged deploy to local: {t_same_local * 1000:8.1f} ms   (qemu: / local: "
              f"{t_same / t_same_local:4.2f}x: the qemu: target adds the glibc check and the sysroot)")
        print(f"  python -c pass (start-up floor)    {t_python * 1000:8.1f} ms")
        print("hexbuild's deploy is incremental and atomic (a symlink switch, hard links for unchanged files);"
              " its run saves the log and a parsed JSON result")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
