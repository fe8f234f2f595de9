"""What `hexbuild run` costs over typing the `adb shell "…"` line by hand, measured in one run.

One virtual phone (a real adbd behind a real adb server); the installed tool is the argv/env echo
program from tests/tools, so the program's own time is negligible and what is measured is the
wrapper. Three ways, each --runs times, medians reported:
- plain: `adb -s SERIAL shell "cd … && LD_LIBRARY_PATH=… ADSP_LIBRARY_PATH=… ./bin/llama-cli …"`,
  the line llama.cpp's adb scripts build;
- hexbuild, a new process each run (`python -m hexbuild run cli …`), what a person pays;
- hexbuild in-process (the CLI's main() called again in one process): the run logic alone —
  reading the device manifest, rendering, the adb protocol, saving the log and JSON result;
- the fast path: `hexbuild run … --print` as a new process (reads the device manifest, renders,
  prints) against the start-up floor of any Typer CLI, `python -c 'import typer, rich.console'`
  from the same interpreter. The two alternate run by run, so that a busy machine slows both
  alike; wall and CPU time (user + system of the child) are both reported. Bytecode caching is
  on for these children (as in any installed package), whatever PYTHONDONTWRITEBYTECODE says.

Usage (root): python benchmarks/run_overhead.py [--runs 10]
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.infra.devices import new_device, start_adb_server  # noqa: E402
from tests.infra.runner_tools import make_install  # noqa: E402

ARGS = ["-n", "16", "-p", "a prompt with spaces; and $(not a subshell)"]


def paired(a_argv: list[str], b_argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, float, float]:
    """Median wall and CPU seconds of two commands, run alternately."""
    import resource

    samples: dict[int, tuple[list[float], list[float]]] = {0: ([], []), 1: ([], [])}
    for _ in range(runs):
        for i, argv in enumerate((a_argv, b_argv)):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, env=env)
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            samples[i][0].append(wall)
            samples[i][1].append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    med = statistics.median
    return med(samples[0][0]), med(samples[0][1]), med(samples[1][0]), med(samples[1][1])


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
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-run-"))
    server = device = None
    try:
        echo = base / "argv_echo"
        subprocess.run(["cc", "-O2", "-o", str(echo), str(ROOT / "tests" / "tools" / "argv_echo.c")], check=True)
        server = start_adb_server(base)
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        device = new_device(server, base, "SM8750")
        make_install(device.root / "tmp" / "llama.cpp", {"llama-cli": echo})
        dest = "/data/local/tmp/llama.cpp"
        target = f"adb:{device.serial}"
        results = base / "results"

        line = (f"cd {dest} && LD_LIBRARY_PATH={dest}/lib ADSP_LIBRARY_PATH={dest}/lib ./bin/llama-cli "
                f"-m /data/local/tmp/gguf/m.gguf -ngl 99 -fa on --device HTP0 " + shlex.join(ARGS))
        plain_argv = [server.adb, "-P", str(server.port), "-s", device.serial, "shell", line]
        hex_args = ["run", "cli", "-t", target, "--model", "m.gguf", "--results-dir", str(results), "--", *ARGS]

        def plain() -> None:
            subprocess.run(plain_argv, check=True, capture_output=True)

        def hexbuild_process() -> None:
            subprocess.run([sys.executable, "-m", "hexbuild", "-q", *hex_args], check=True, capture_output=True)

        from hexbuild.cli.main import main as cli_main
        from hexbuild.ui import ui

        def hexbuild_in_process() -> None:
            ui.quiet = True
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                rc = cli_main(hex_args)
            if rc != 0:
                raise SystemExit(f"hexbuild run failed in-process: {rc}")

        hexbuild_in_process()  # warm: imports and the first adb connection are not the steady state
        t_plain = median_time(plain, args.runs)
        t_proc = median_time(hexbuild_process, args.runs)
        t_inproc = median_time(hexbuild_in_process, args.runs)
        t_python = median_time(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.runs)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        print_argv = [sys.executable, "-m", "hexbuild", "run", "cli", "-t", target, "--model", "m.gguf", "--print",
                      "--", *ARGS]
        floor_argv = [sys.executable, "-c", "import typer, rich.console"]
        for argv in (print_argv, floor_argv):  # warm: bytecode and template caches written once
            subprocess.run(argv, check=True, capture_output=True, env=env)
        p_wall, p_cpu, f_wall, f_cpu = paired(print_argv, floor_argv, max(args.runs, 20), env)
        print(f"one virtual phone ({device.serial}), {args.runs} runs each, medians")
        print(f"  plain adb shell \"…\"               {t_plain * 1000:7.1f} ms")
        print(f"  hexbuild run (new process)         {t_proc * 1000:7.1f} ms   {t_proc / t_plain:5.1f}x plain")
        print(f"  hexbuild run (in-process, logic)   {t_inproc * 1000:7.1f} ms   {t_inproc / t_plain:5.1f}x plain")
        print(f"  python -c pass (start-up floor)    {t_python * 1000:7.1f} ms")
        print("the fast path, alternating, medians:")
        print(f"  import typer, rich.console         {f_wall * 1000:7.1f} ms wall {f_cpu * 1000:7.1f} ms CPU")
        print(f"  hexbuild run cli … --print         {p_wall * 1000:7.1f} ms wall {p_cpu * 1000:7.1f} ms CPU   "
              f"{p_wall / f_wall:4.2f}x wall  {p_cpu / f_cpu:4.2f}x CPU  (goal: at most 1.30x)")
        print("what hexbuild adds per run: the log and JSON result saved, exact argv, the revision's vocabulary")
        return 0
    finally:
        if device is not None:
            device.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
