"""What `hexbuild serve` costs: time until the endpoint is ready, and streamed tokens/s through
its forward against the same request sent on the device itself, measured in one run.

Two real transports, each with a fresh device:
- adb: a virtual phone (a real adbd behind a private real adb server), the forward a real
  `adb forward` held by the adb server;
- ssh: the test sshd on loopback, the forward hexbuild's own listener carrying each connection
  over an SSH direct-tcpip channel.
The server on the device is the HTTP stand-in from tests/tools (a phone cannot run an Android
llama-server here), answering a streamed chat of --tokens server-sent events with no delay of its
own, so what is measured is the path: hexbuild's listener/adb server, the transport, the device.
"On the device itself" is the same request to the device's own port (the virtual devices share
this machine's network, so that is exactly what a client on the device would get).

Figures: time to ready of `hexbuild serve --detach` (a new process: deploy check, start, forward,
/health), the median tokens/s of --runs streamed answers both ways, and their ratio.

Usage (root): python benchmarks/serve.py [--tokens 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hexbuild.serve.openai_http import chat  # noqa: E402
from tests.infra.devices import free_port, new_device, start_adb_server, start_sshd, stop_sshd  # noqa: E402
from tests.infra.runner_tools import make_install  # noqa: E402


def hexbuild(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hexbuild.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def tokens_per_s(port: int, tokens: int, runs: int) -> float:
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        answer = chat(port, [{"role": "user", "content": "go"}], max_tokens=tokens)
        elapsed = time.perf_counter() - t0
        assert answer.completion_tokens == tokens, answer
        rates.append(tokens / elapsed)
    return statistics.median(rates)


def measure(name: str, spec: str, model: Path, env: dict[str, str], extra: list[str], tokens: int,
            runs: int) -> dict:
    port, device_port = free_port(), free_port()
    t0 = time.perf_counter()
    r = hexbuild("--json", "-q", "serve", "-t", spec, "--model", str(model), "--port", str(port),
                 "--device-port", str(device_port), "--detach", *extra, env=env)
    ready_s = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{name}: serve failed: {r.stderr.strip()}")
    try:
        through = tokens_per_s(port, tokens, runs)
        direct = tokens_per_s(device_port, tokens, runs)
    finally:
        hexbuild("serve", "stop", "--port", str(port), env=env)
    return {"transport": name, "forward": json.loads(r.stdout)["forward"], "ready_s": round(ready_s, 3),
            "tokens_per_s_forwarded": round(through), "tokens_per_s_on_device": round(direct),
            "ratio": round(through / direct, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2000, help="tokens per streamed answer")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hexbuild-bench-serve-"))
    server = device = sshd = None
    rows = []
    try:
        stand_in = base / "llama-server"
        subprocess.run(["cc", "-O2", "-D_GNU_SOURCE", "-o", str(stand_in), str(ROOT / "tests" / "tools" / "http_stand_in.c")],
                       check=True)
        model = base / "tiny.gguf"
        from tests.infra.tiny_model import write_tiny_gguf

        write_tiny_gguf(model)
        server = start_adb_server(base)
        env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(server.port), "XDG_STATE_HOME": str(base / "state")}
        os.environ.update(ANDROID_ADB_SERVER_PORT=str(server.port))
        device = new_device(server, base, "SM8650")
        make_install(device.root / "tmp" / "llama.cpp", {"llama-server": stand_in})
        rows.append(measure("adb", f"adb:{device.serial}", model, env, [], args.tokens, args.runs))

        sshd = start_sshd(base / "sshd", server.port)
        board = base / "board" / "llama.cpp"
        make_install(board, {"llama-server": stand_in})
        ssh_env = {**env, "HEXBUILD_SSH_KNOWN_HOSTS": str(sshd.known_hosts), "HEXBUILD_SSH_IDENTITY": str(sshd.identity)}
        rows.append(measure("ssh", f"ssh://root@127.0.0.1:{sshd.port}", model, ssh_env,
                            ["--dest", str(board), "--models-dir", str(base / "board" / "gguf")], args.tokens, args.runs))
    finally:
        if sshd is not None:
            stop_sshd(sshd)
        if device is not None:
            device.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"streamed answers of {args.tokens} tokens, median of {args.runs} runs")
    print(f"{'transport':<10}{'ready (s)':>10}{'forwarded tok/s':>17}{'on device tok/s':>17}{'ratio':>8}")
    for row in rows:
        print(f"{row['transport']:<10}{row['ready_s']:>10.2f}{row['tokens_per_s_forwarded']:>17}"
              f"{row['tokens_per_s_on_device']:>17}{row['ratio']:>8.2f}")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
