"""What `hexbuild serve` costs against starting the server by hand, measured in one run.

Time to ready, medians of alternating pairs (by hand, then hexbuild; the next pair the other way),
the ratio's with its 95% confidence interval (order statistics: no assumption about the spread):
- qemu: the real llama-server of the 0.3.28 tree's open build (the test cache's, built by
  tests/infra/real_build.py when missing) with the tiny real GGUF, deployed once into a qemu:
  directory. hexbuild: `hexbuild serve --target qemu:DIR --model tiny.gguf --port P --detach`
  until it returns. By hand: `qemu-aarch64 -L SYSROOT ./bin/llama-server <the same arguments and
  environment hexbuild's record shows>` from the install directory, /health polled every 10 ms.
  SYSROOT is the open toolchain image's runtime, extracted once by hexbuild as a user has it (a
  Docker engine of the benchmark's own for that, up until the qemu: pairs end, as a user's
  engine is), or --sysroot.
- adb: a virtual phone (a real adbd behind a private adb server) with the HTTP stand-in for
  llama-server (tests/tools; a phone cannot run an Android llama-server here), so what is measured
  is the path, where device round trips dominate. By hand: `adb shell "cd DEST && ENV nohup
  ./bin/llama-server ARGS </dev/null >LOG 2>&1 & echo $!"`, `adb forward`, /health polled every 10 ms.
Also per target: `hexbuild serve stop --port P` against the server's own exit by hand (SIGTERM and
wait, or `adb shell kill` and `adb forward --remove`); `hexbuild --version` (the start-up floor);
the load average. Then, as before, streamed tokens/s through each forward (adb, ssh) against the
same request on the device itself.

hexbuild runs from this checkout installed as a wheel in a venv of its own (benchmarks/wheel.py),
or --hexbuild checkout; --revision REV measures that revision instead (installed the same way).

Usage (root): python benchmarks/serve.py [--pairs 7] [--sysroot DIR] [--tokens 2000] [--runs 5]
                                         [--hexbuild wheel|checkout] [--revision REV]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hexbuild.serve.openai_http import chat  # noqa: E402
from tests.infra.devices import free_port, new_device, start_adb_server, start_sshd, stop_sshd  # noqa: E402
from tests.infra.runner_tools import make_install  # noqa: E402
from wheel import hexbuild_command, installed_hexbuild, revision_tree  # noqa: E402

TEST_CACHE = Path(os.environ.get("HEXBUILD_TEST_CACHE") or Path.home() / ".cache" / "hexbuild-tests")
OPEN_PACKAGE = TEST_CACHE / "open-build" / "llama.cpp-0.3.28" / "pkg-open-linux" / "llama.cpp"


def run(argv: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, **kw)
    if cp.returncode != 0:
        raise SystemExit(f"failed ({cp.returncode}): {' '.join(argv)}\n{cp.stderr[-3000:]}")
    return cp


def healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def wait_health(port: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not healthy(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing answered /health on port {port} within {timeout:g}s")
        time.sleep(0.01)


def med(xs) -> float:
    return statistics.median(xs)


def median_ci(xs, level: float = 0.95) -> tuple[float, float]:
    """The order statistics that hold the true median with at least ``level`` probability
    (binomial, whatever the distribution): how far a median of this many pairs can be trusted."""
    s, n = sorted(xs), len(xs)
    tail, k = 0.0, 0
    while k < n // 2 and tail + math.comb(n, k) / 2 ** n <= (1 - level) / 2:
        tail += math.comb(n, k) / 2 ** n
        k += 1
    return (s[0], s[-1]) if k == 0 else (s[k - 1], s[n - k])


class Target:
    """One target's two ways to start (``by_hand`` and ``hexbuild``, each returning
    (seconds to ready, seconds to stop)), measured in alternating pairs."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], serve_args: list[str], cwd: Path):
        self.name, self.cmd, self.env, self.serve_args, self.cwd = name, cmd, env, serve_args, cwd
        self.port = free_port()

    def hexbuild(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        run([*self.cmd, "-q", "--json", "serve", *self.serve_args, "--port", str(self.port), "--detach"], self.env,
            cwd=self.cwd)
        ready = time.perf_counter() - t0
        t1 = time.perf_counter()
        run([*self.cmd, "-q", "serve", "stop", "--port", str(self.port)], self.env)
        return ready, time.perf_counter() - t1

    def record(self) -> dict:
        """A warm-up start (the model pushed, caches filled) and the record it leaves: the very
        command, environment and directory to start by hand."""
        run([*self.cmd, "-q", "--json", "serve", *self.serve_args, "--port", str(self.port), "--detach"], self.env,
            cwd=self.cwd)
        state = Path(self.env["XDG_STATE_HOME"]) / "hexbuild" / "servers" / f"{self.port}.json"
        rec = json.loads(state.read_text())
        run([*self.cmd, "-q", "serve", "stop", "--port", str(self.port)], self.env)
        return rec

    def measure(self, by_hand, pairs: int) -> dict:
        rows = []
        for i in range(pairs):
            if i % 2:
                h = self.hexbuild()
                b = by_hand()
            else:
                b = by_hand()
                h = self.hexbuild()
            rows.append((b, h))
            print(f"  {self.name} pair {i + 1}: by hand {b[0]:.3f} s, hexbuild {h[0]:.3f} s ({h[0] / b[0]:.2f}x); "
                  f"stop {h[1]:.3f} s, by hand {b[1]:.3f} s", file=sys.stderr)
        version = []
        for _ in range(5):
            t0 = time.perf_counter()
            run([*self.cmd, "--version"], self.env)
            version.append(time.perf_counter() - t0)
        return {"target": self.name, "pairs": pairs,
                "by_hand_ready_s": round(med(b[0] for b, _ in rows), 3),
                "hexbuild_ready_s": round(med(h[0] for _, h in rows), 3),
                "ready_ratio": round(med(h[0] / b[0] for b, h in rows), 3),
                "ready_ratio_range": [round(min(h[0] / b[0] for b, h in rows), 2), round(max(h[0] / b[0] for b, h in rows), 2)],
                "ready_ratio_ci95": [round(x, 3) for x in median_ci([h[0] / b[0] for b, h in rows])],
                "by_hand_stop_s": round(med(b[1] for b, _ in rows), 3),
                "hexbuild_stop_s": round(med(h[1] for _, h in rows), 3),
                "hexbuild_version_s": round(med(version), 3)}


def qemu_target(cmd: list[str], env: dict[str, str], base: Path, model: Path, sysroot: str | None, pairs: int) -> dict:
    if not OPEN_PACKAGE.is_dir():
        from tests.infra.docker_engine import engine_for_benchmark
        from tests.infra.real_build import build_open_package

        print("building the 0.3.28 tree's open package (the test suite's; a cold build is long) ...", file=sys.stderr)
        daemon, host = engine_for_benchmark()
        try:
            build_open_package(host, TEST_CACHE)
        finally:
            if daemon is not None:
                daemon.stop()
    inst = base / "qemu" / "llama.cpp"
    env = dict(env, XDG_CACHE_HOME=str(base / "xdg"), XDG_STATE_HOME=str(base / "state"))
    deploy = [*cmd, "-q", "deploy", str(OPEN_PACKAGE), "--target", f"qemu:{inst}"]
    daemon = None
    if sysroot:
        env["HEXBUILD_LINUX_SYSROOT"] = sysroot
        run(deploy, env)
    else:  # the open image's runtime, extracted as a user's first qemu: deploy does; the engine
        import docker  # stays up, as a user's does (hexbuild before issue 37 asked it each time)

        from tests.infra.docker_engine import engine_for_benchmark
        from tests.infra.real_build import ensure_open_image_on

        daemon, host = engine_for_benchmark()
        client = docker.DockerClient(base_url=host, timeout=300)
        ensure_open_image_on(client, TEST_CACHE)
        client.close()
        env["DOCKER_HOST"] = host
        run(deploy, env)
        (sysroot,) = map(str, (base / "xdg" / "hexbuild" / "sysroots").glob("*/aarch64-linux-gnu"))
    try:
        return _qemu_pairs(cmd, env, inst, model, sysroot, pairs)
    finally:
        if daemon is not None:
            daemon.stop()


def _qemu_pairs(cmd: list[str], env: dict[str, str], inst: Path, model: Path, sysroot: str, pairs: int) -> dict:
    t = Target("qemu", cmd, env, ["--target", f"qemu:{inst}", "--model", model.name], model.parent)
    rec = t.record()
    qemu = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
    argv = [qemu, "-L", sysroot, *rec["argv"]]
    hand_env = {**os.environ, **rec["env"]}
    print(f"  by hand: cd {rec['dest']} && {' '.join(f'{k}={shlex.quote(v)}' for k, v in rec['env'].items())} "
          f"{shlex.join(argv)}", file=sys.stderr)

    def by_hand() -> tuple[float, float]:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=rec["dest"], env=hand_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_health(t.port)
            ready = time.perf_counter() - t0
        finally:
            t1 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        return ready, time.perf_counter() - t1

    return {**t.measure(by_hand, pairs), "sysroot": sysroot, "package": str(OPEN_PACKAGE)}


def adb_target(cmd: list[str], env: dict[str, str], server, device, model: Path, pairs: int) -> dict:
    t = Target("adb", cmd, env, ["-t", f"adb:{device.serial}", "--model", model.name, "--device-port",
                                 str(free_port())], model.parent)
    rec = t.record()
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in rec["env"].items())
    line = (f"cd {shlex.quote(rec['dest'])}; {assigns} nohup {shlex.join(rec['argv'])} "
            f"</dev/null >/data/local/tmp/by-hand.log 2>&1 & echo $!")
    adb = [server.adb, "-P", str(server.port), "-s", device.serial]
    print(f"  by hand: adb shell {shlex.quote(line)}; adb forward tcp:{t.port} tcp:{rec['device_port']}",
          file=sys.stderr)

    def by_hand() -> tuple[float, float]:
        t0 = time.perf_counter()
        pid = run([*adb, "shell", line], env).stdout.split()[-1]
        run([*adb, "forward", f"tcp:{t.port}", f"tcp:{rec['device_port']}"], env)
        wait_health(t.port)
        ready = time.perf_counter() - t0
        t1 = time.perf_counter()
        run([*adb, "shell", "kill", pid], env)
        run([*adb, "forward", "--remove", f"tcp:{t.port}"], env)
        return ready, time.perf_counter() - t1

    return t.measure(by_hand, pairs)


def tokens_per_s(port: int, tokens: int, runs: int) -> float:
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        answer = chat(port, [{"role": "user", "content": "go"}], max_tokens=tokens)
        elapsed = time.perf_counter() - t0
        assert answer.completion_tokens == tokens, answer
        rates.append(tokens / elapsed)
    return med(rates)


def throughput(name: str, spec: str, cmd: list[str], env: dict[str, str], model: Path, extra: list[str],
               tokens: int, runs: int) -> dict:
    port, device_port = free_port(), free_port()
    r = run([*cmd, "--json", "-q", "serve", "-t", spec, "--model", str(model), "--port", str(port), "--device-port",
             str(device_port), "--detach", *extra], env)
    try:
        through = tokens_per_s(port, tokens, runs)
        direct = tokens_per_s(device_port, tokens, runs)
    finally:
        run([*cmd, "serve", "stop", "--port", str(port)], env)
    return {"transport": name, "forward": json.loads(r.stdout)["forward"], "tokens_per_s_forwarded": round(through),
            "tokens_per_s_on_device": round(direct), "ratio": round(through / direct, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=7, help="alternating pairs per target (time to ready, stop)")
    ap.add_argument("--sysroot", help="qemu: an AArch64 sysroot for both sides (default: the open image's, "
                                      "extracted by hexbuild)")
    ap.add_argument("--tokens", type=int, default=2000, help="tokens per streamed answer")
    ap.add_argument("--runs", type=int, default=5, help="streamed answers per way (tokens/s)")
    ap.add_argument("--hexbuild", choices=("wheel", "checkout"), default="wheel")
    ap.add_argument("--revision", metavar="REV", help="measure that revision of hexbuild instead (installed as a "
                                                      "wheel), e.g. the one before a change")
    args = ap.parse_args()
    cmd, env = hexbuild_command(args.hexbuild)
    if args.revision:
        with tempfile.TemporaryDirectory(prefix="hexbuild-rev-") as tree:  # needed only to install it
            cmd = [str(installed_hexbuild(revision_tree(args.revision, Path(tree))))]
        args.hexbuild = f"revision {args.revision}, wheel"
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-serve-"))
    server = device = sshd = None
    load0 = os.getloadavg()
    try:
        stand_in = base / "llama-server"
        subprocess.run(["cc", "-O2", "-D_GNU_SOURCE", "-o", str(stand_in), str(ROOT / "tests" / "tools" / "http_stand_in.c")],
                       check=True)
        from tests.infra.tiny_model import write_tiny_gguf

        (base / "work").mkdir()
        model = write_tiny_gguf(base / "work" / "tiny.gguf", ascii_bytes=True)
        ready = [qemu_target(cmd, env, base, model, args.sysroot, args.pairs)]
        server = start_adb_server(base)
        env = {**env, "ANDROID_ADB_SERVER_PORT": str(server.port), "XDG_STATE_HOME": str(base / "state"),
               "XDG_CACHE_HOME": str(base / "xdg")}
        os.environ.update(ANDROID_ADB_SERVER_PORT=str(server.port))
        device = new_device(server, base, "SM8650")
        make_install(device.root / "tmp" / "llama.cpp", {"llama-server": stand_in})
        ready.append(adb_target(cmd, env, server, device, model, args.pairs))
        rows = [throughput("adb", f"adb:{device.serial}", cmd, env, model, [], args.tokens, args.runs)]
        sshd = start_sshd(base / "sshd", server.port)
        board = base / "board" / "llama.cpp"
        make_install(board, {"llama-server": stand_in})
        ssh_env = {**env, "HEXBUILD_SSH_KNOWN_HOSTS": str(sshd.known_hosts), "HEXBUILD_SSH_IDENTITY": str(sshd.identity)}
        rows.append(throughput("ssh", f"ssh://root@127.0.0.1:{sshd.port}", cmd, ssh_env, model,
                               ["--dest", str(board), "--models-dir", str(base / "board" / "gguf")], args.tokens,
                               args.runs))
    finally:
        if sshd is not None:
            stop_sshd(sshd)
        if device is not None:
            device.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"hexbuild: {args.hexbuild} ({' '.join(cmd)}); {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, "
          f"{load1[0]:.2f} after")
    print(f"time to ready, medians of {args.pairs} alternating pairs (ratio: median of the pairs' ratios)")
    print(f"{'target':<8}{'by hand':>9}{'hexbuild':>10}{'ratio':>7}{'  (range)':<16}{'95% CI':<13}{'stop':>7}"
          f"{'by hand':>9}{'--version':>11}")
    for r in ready:
        lo, hi = r["ready_ratio_range"]
        clo, chi = r["ready_ratio_ci95"]
        print(f"{r['target']:<8}{r['by_hand_ready_s']:>9.3f}{r['hexbuild_ready_s']:>10.3f}{r['ready_ratio']:>7.2f}"
              f"{f'  ({lo:.2f}-{hi:.2f})':<16}{f'{clo:.2f}-{chi:.2f}':<13}"
              f"{r['hexbuild_stop_s']:>7.3f}{r['by_hand_stop_s']:>9.3f}"
              f"{r['hexbuild_version_s']:>11.3f}")
    print(f"\nstreamed answers of {args.tokens} tokens, median of {args.runs} runs")
    print(f"{'transport':<10}{'forwarded tok/s':>17}{'on device tok/s':>17}{'ratio':>8}")
    for row in rows:
        print(f"{row['transport']:<10}{row['tokens_per_s_forwarded']:>17}{row['tokens_per_s_on_device']:>17}"
              f"{row['ratio']:>8.2f}")
    print(json.dumps({"ready": ready, "throughput": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
