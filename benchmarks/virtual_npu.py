#!/usr/bin/env python3
"""The virtual NPU (`qemu+npu:`) timed on the real 0.3.28 package built on the toolchain double.

- session open: from the backend's "HTP0 allocating new session" line to the stand-in
  libcdsprpc.so's "session opened" line (the DSP process started, the runtime loaded the skel, the
  skel's open answered), read as llama-completion prints them;
- `test-backend-ops -o MUL_MAT` for Q4_0 on HTP0, warm: `hexbuild test ops` against the plain way,
  the same test-backend-ops typed by hand under qemu-aarch64 with the environment hexbuild gives it
  (the stand-in first on the library path, host buffers off);
- tokens per second of the tiny model (tests/infra/tiny_model.py), decode and prompt, on HTP0 of
  the virtual NPU against the same program on the emulated CPU alone (`--device none`, qemu:).

Emulated figures, all of them: the DSP is qemu-hexagon (one host thread per DSP thread, HVX
instructions interpreted), not a phone. They say how long a developer waits, never how fast a
phone is.

Alternates the two sides REPEAT times, prints medians and ratios. Uses DOCKER_HOST if set, else
starts the test engine (images from the test cache's root filesystems; the real Hexagon build from
the test cache, made if missing: tests/infra/real_hexagon.py).

    python benchmarks/virtual_npu.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.infra.docker_engine import cache_dir, engine_for_benchmark  # noqa: E402
from tests.infra.kernel_image import kernel_cache  # noqa: E402
from tests.infra.tiny_model import write_tiny_gguf  # noqa: E402

PROMPT = "hello world the NPU is fast and the model runs on it"
_EVAL = re.compile(r"(?:llama_perf_context_print|common_perf_print):\s+(prompt eval|eval) time =.*?([\d.]+) tokens per second")


def package(docker_host: str) -> Path:
    from tests.infra.real_hexagon import build, tree_copy

    pkg = tree_copy(cache_dir()) / "pkg-snapdragon"
    if (pkg / "bin" / "test-backend-ops").is_file() and (pkg / "lib" / "libggml-htp-v73.so").is_file():
        return pkg
    return build(docker_host, cache_dir())[0]


def hexbuild(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    cp = subprocess.run([sys.executable, "-m", "hexbuild", *args], env=env, capture_output=True, text=True,
                        errors="replace", stdin=subprocess.DEVNULL)
    if check and cp.returncode != 0:
        raise SystemExit(f"hexbuild {' '.join(args)} failed ({cp.returncode}):\n{cp.stderr[-3000:]}")
    return cp


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def session_open_s(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds between the backend asking for HTP0's session and the session being open (a
    program that prints the backend's "allocating new session" line)."""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         errors="replace")
    asked = opened = None
    for line in p.stderr:
        if asked is None and "HTP0 allocating new session" in line:
            asked = time.perf_counter()
        elif "HTP0: session opened on the virtual NPU" in line:
            opened = time.perf_counter()
    p.wait()
    if p.returncode or asked is None or opened is None:
        raise SystemExit(f"{argv[0]}: exit {p.returncode}; no session opened (asked {asked}, opened {opened})")
    return opened - asked


def rates(log: str) -> dict[str, float]:
    return {("prompt" if m[1] == "prompt eval" else "decode"): float(m[2]) for m in _EVAL.finditer(log)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    daemon, host = engine_for_benchmark()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-vnpu-"))
    try:
        xdg = base / "xdg"
        (xdg / "hexbuild").mkdir(parents=True)
        (xdg / "hexbuild" / "kernel-check").symlink_to(kernel_cache())
        env = dict(os.environ, DOCKER_HOST=host, XDG_CACHE_HOME=str(xdg), PYTHONPYCACHEPREFIX=str(base / "pyc"))
        pkg = package(host)
        (base / "models").mkdir()
        model = write_tiny_gguf(base / "models" / "tiny-ascii-q4_0.gguf", ascii_bytes=True)
        inst = base / "inst"
        spec = f"qemu+npu:{inst}"
        t_deploy = timed(lambda: hexbuild("-q", "deploy", str(pkg), "-t", spec, "--model", str(model),
                                         "--models-dir", str(base / "models-dev"), env=env))
        os.environ.update(DOCKER_HOST=host, XDG_CACHE_HOME=str(xdg))
        from hexbuild.toolchain.sysroot import resolve_sysroot
        from hexbuild.vnpu.parts import ensure_parts

        parts, sysroot = ensure_parts(), resolve_sysroot("")
        qemu = shutil.which("qemu-aarch64") or "qemu-aarch64"
        run_env = dict(os.environ, LD_LIBRARY_PATH=f"{parts.host_lib_dir('aarch64')}:{inst / 'lib'}",
                       ADSP_LIBRARY_PATH=str(inst / "lib"), HEXBUILD_VNPU_QEMU=str(parts.qemu),
                       HEXBUILD_VNPU_RUNTIME=str(parts.runtime), HEXBUILD_VNPU_CPU="v73", GGML_HEXAGON_NDEV="1")
        m = str(base / "models-dev" / model.name)
        completion = [qemu, "-L", str(sysroot), "--", "./bin/llama-completion", "--no-mmap", "-m", m,
                      "-n", "32", "--ignore-eos", "--temp", "0", "-p", PROMPT]

        tbo = [qemu, "-L", str(sysroot), "--", "./bin/test-backend-ops", "test", "-o", "MUL_MAT", "-b", "HTP0",
               "-p", "type(_a)?=(q4_0),"]
        tbo_env = dict(run_env, GGML_HEXAGON_HOSTBUF="0")
        # test-backend-ops prints the backend's session lines (llama-completion of 0.3.28 opens its
        # session before -lv applies); a pattern no case matches: the session only
        opens = [session_open_s([*tbo[:-1], "^$"], tbo_env, inst) for _ in range(args.repeat)]
        ops_cmd = ("-q", "test", "ops", "-t", spec, "-o", "MUL_MAT", "--types", "q4_0", "--out", str(base / "ops"))
        t_ops, t_ops_plain = [], []
        for _ in range(args.repeat):
            t_ops.append(timed(lambda: hexbuild(*ops_cmd, env=env)))
            t_ops_plain.append(timed(lambda: subprocess.run(tbo, env=tbo_env, cwd=inst, capture_output=True)))

        npu, cpu = [], []
        for _ in range(args.repeat):
            p = subprocess.run([*completion, "--device", "HTP0"], env=run_env, cwd=inst, capture_output=True,
                               text=True, errors="replace")
            npu.append(rates(p.stderr + p.stdout))
            p = subprocess.run([*completion, "--device", "none"], env=run_env, cwd=inst, capture_output=True,
                               text=True, errors="replace")
            cpu.append(rates(p.stderr + p.stdout))

        def med(xs, key=None):
            return statistics.median([x[key] for x in xs] if key else xs)

        print(f"virtual NPU (qemu+npu:, v73, emulated), 0.3.28 built on the toolchain double, {args.repeat} runs, "
              f"medians, {os.cpu_count()} cores")
        print(f"  deploy (a new install; the first makes the parts)   {t_deploy:7.2f} s")
        print(f"  session open (HTP0 asked -> opened)                 {med(opens) * 1000:7.0f} ms")
        print(f"  test ops MUL_MAT q4_0 on HTP0                       {med(t_ops):7.2f} s   "
              f"plain (test-backend-ops by hand) {med(t_ops_plain):6.2f} s   {med(t_ops) / med(t_ops_plain):4.2f}x")
        for key in ("prompt", "decode"):
            print(f"  tiny model {key:6s} tokens/s: HTP0 (emulated) {med(npu, key):7.1f}   emulated CPU alone "
                  f"{med(cpu, key):7.1f}   {med(npu, key) / med(cpu, key):4.2f}x")
        print("Emulated: the DSP is qemu-hexagon interpreting HVX on this machine's cores; these are a developer's "
              "waiting times, not a phone's speed.")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if daemon is not None:
            daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
