"""What `hexbuild lab run` adds to a LAVA job: submit-to-result time against the job's own
duration in LAVA, and against the same job submitted and waited for with plain REST calls (what
`lavacli jobs submit` + `jobs wait` do), measured in one run on the test lab.

The lab is the tests' own (tests/infra/lava.py: LAVA 2026.10, PostgreSQL, publisher, scheduler
and a worker pinging every second, two trixie boards over SSH whose AArch64 programs run under
qemu); the job is a
real llama-completion of the open-toolchain package (the tests' ``real_linux_package``, built
once in the test cache) on the tiny model. Per run:

- hexbuild: the whole `hexbuild lab run` process, and from its "submitted job" line to its exit
  (the result document written);
- plain: the same job definition and tarball, `POST /jobs/`, `GET /jobs/N/` every --poll
  seconds until Finished, then `GET /jobs/N/tests/` and `GET /jobs/N/logs/`;
- LAVA: the job's own start-to-end and its time in the queue; the program on the board.

Usage (root, after scripts/setup-test-env.sh):
    python benchmarks/lab_overhead.py [--runs 3] [--poll 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from tests.infra import lava, lava_chroot  # noqa: E402
from tests.infra.board import binfmt_aarch64, cache_dir, start_board  # noqa: E402
from tests.infra.real_build import TREE_VERSION  # noqa: E402
from tests.infra.tiny_model import write_tiny_gguf  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog"
WORDS = ["completion", "-t", "2", "-n", "16", "--ignore-eos", "-p", PROMPT]


def hexbuild_run(lab, package: Path, model: Path, work: Path, poll: float) -> dict:
    env = {**os.environ, **lab.env, "HEXBUILD_LAB_POLL": str(poll), "XDG_CACHE_HOME": str(work / "xdg")}
    argv = [sys.executable, "-m", "hexbuild", "--json", "lab", "run", str(package), "--model", str(model),
            "--serve-artifacts", "127.0.0.1:0", "--results-dir", str(work / "res"), "--", *WORDS]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=work)
    submitted: list[float] = []

    def watch() -> None:
        for line in p.stderr:  # type: ignore[union-attr]
            if line.startswith("submitted job ") and not submitted:
                submitted.append(time.monotonic())

    reader = threading.Thread(target=watch)
    reader.start()
    out = p.stdout.read()  # type: ignore[union-attr]
    p.wait()
    end = time.monotonic()
    reader.join()
    if p.returncode != 0:
        raise SystemExit(f"hexbuild lab run exited {p.returncode}: {out[-2000:]}")
    doc = json.loads(out)
    return {"wall_s": end - t0, "submit_to_result_s": end - submitted[0], "job_s": doc["job"]["duration_s"],
            "queued_s": doc["job"]["queued_s"], "program_s": doc["duration_s"], "job_id": doc["job"]["id"]}


def plain_run(lab, definition: str, poll: float) -> dict:
    """The same job through bare REST calls: submit, poll, read the results and the log."""
    s = requests.Session()
    s.headers["Authorization"] = f"Token {lab.token}"
    api = f"{lab.url}/api/v0.2"
    t0 = time.monotonic()
    jid = s.post(f"{api}/jobs/", json={"definition": definition}, timeout=30).json()["job_ids"][0]
    while True:
        job = s.get(f"{api}/jobs/{jid}/", timeout=30).json()
        if job["state"] == "Finished":
            break
        time.sleep(poll)
    s.get(f"{api}/jobs/{jid}/tests/", params={"limit": 500}, timeout=30).raise_for_status()
    s.get(f"{api}/jobs/{jid}/logs/", timeout=120).raise_for_status()
    end = time.monotonic()
    from datetime import datetime

    t = lambda k: datetime.fromisoformat(job[k].replace("Z", "+00:00"))  # noqa: E731
    return {"submit_to_result_s": end - t0, "job_s": (t("end_time") - t("start_time")).total_seconds(),
            "queued_s": (t("start_time") - t("submit_time")).total_seconds(), "health": job["health"]}


def the_job(package: Path, model: Path, work: Path):
    """hexbuild's own tarball and definition for the same request, served by hexbuild's server."""
    from hexbuild.lab import bundle, definition, job as jobmod, plan as lab_plan, session

    req = lab_plan.LabRequest(kind="completion", package=package, model=str(model), extra=WORDS[1:])
    planned = lab_plan.plan(req, "lava:ssh")
    try:
        request = jobmod.request_doc("completion", planned.steps, args={})
        tarball = bundle.make(session.tarball_members(planned, jobmod.script("plain", planned.steps, request), "plain"),
                              where=work / "plain")
    finally:
        planned.close()
    server = bundle.ArtifactServer(tarball, "127.0.0.1", 0)
    spec = definition.JobSpec("ssh", server.url, "plain REST")
    return server, definition.dump(definition.board_job(spec))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--poll", type=float, default=5.0, help="seconds between looks, both ways (hexbuild's default: 5)")
    args = ap.parse_args()
    if not lava_chroot.ready():
        raise SystemExit("no LAVA chroot: run scripts/setup-test-env.sh first")
    package = cache_dir() / "open-build" / f"llama.cpp-{TREE_VERSION}" / "pkg-open-linux" / "llama.cpp"
    if not (package / "bin" / "llama-completion").is_file():
        raise SystemExit(f"no real package at {package}: run the tests once (real_linux_package builds it)")
    with tempfile.TemporaryDirectory(prefix="hexbuild-lab-bench-") as tmp, binfmt_aarch64():
        work = Path(tmp)
        model = write_tiny_gguf(work / "tiny-q4_0.gguf")
        boards = [start_board(work / f"board{i}", lava_chroot.chroot_path(), glibc=lava_chroot.BOARD_GLIBC)
                  for i in (1, 2)]
        t = time.monotonic()
        lab = lava.start_lab(work / "lab", boards)
        print(f"lab up in {time.monotonic() - t:.1f}s ({lab.url})", file=sys.stderr)
        try:
            server, definition_text = the_job(package, model, work)
            rows = []
            try:
                for i in range(args.runs):
                    h = hexbuild_run(lab, package, model, work, args.poll)
                    p = plain_run(lab, definition_text, args.poll)
                    rows.append((h, p))
                    print(f"run {i + 1}: hexbuild {h['submit_to_result_s']:.1f}s submit-to-result "
                          f"({h['wall_s']:.1f}s in all), plain REST {p['submit_to_result_s']:.1f}s, "
                          f"LAVA job {h['job_s']:.1f}s / {p['job_s']:.1f}s", file=sys.stderr)
            finally:
                server.close()
        finally:
            lava.stop_lab(lab)
            for b in boards:
                b.stop()
    med = lambda xs: statistics.median(xs)  # noqa: E731
    h_sr, h_wall = med([h["submit_to_result_s"] for h, _ in rows]), med([h["wall_s"] for h, _ in rows])
    p_sr = med([p["submit_to_result_s"] for _, p in rows])
    h_job, p_job = med([h["job_s"] for h, _ in rows]), med([p["job_s"] for _, p in rows])
    print(f"\nmedian of {args.runs} runs, one completion job (llama-completion -n 16 on the tiny model, under qemu), "
          f"polling every {args.poll:g}s")
    print("| | hexbuild lab run | plain REST (submit, poll, tests, log) |")
    print("|---|---:|---:|")
    print(f"| submit to result | {h_sr:.1f} s | {p_sr:.1f} s |")
    print(f"| the job in LAVA (start to end) | {h_job:.1f} s | {p_job:.1f} s |")
    print(f"| queued | {med([h['queued_s'] for h, _ in rows]):.1f} s | {med([p['queued_s'] for _, p in rows]):.1f} s |")
    print(f"| the program on the board | {med([h['program_s'] for h, _ in rows]):.1f} s | |")
    print(f"| whole process | {h_wall:.1f} s | |")
    h_over = med([h["submit_to_result_s"] - h["job_s"] for h, _ in rows])
    p_over = med([p["submit_to_result_s"] - p["job_s"] for _, p in rows])
    print(f"| submit to result beyond the job's own duration | {h_over:.1f} s | {p_over:.1f} s |")
    print(f"\noverhead: submit-to-result / job duration = {h_sr / h_job:.2f}x for hexbuild, {p_sr / p_job:.2f}x plain; "
          f"hexbuild / plain submit-to-result = {h_sr / p_sr:.2f}x; before the submission (start, plan, pack, "
          f"serve, token, validate) {h_wall - h_sr:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
