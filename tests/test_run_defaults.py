"""hexbuild/runner/defaults.py: one place decides a run's defaults for a target and a package, and
every command renders with it: `run` (each kind), `bench`, `serve`, `test ops|ppl`, the launch
scripts `deploy --ndev` writes and `lab`'s jobs. Compared on the three kinds of target a user
meets: qemu: (an AArch64 argv_echo run by the real qemu-aarch64), local: (argv_echo of this
machine) and a virtual Android phone (real adbd). The fake llama-bench and the HTTP stand-in for
llama-server are the tools bench and serve run.

The defaults: ``-t`` is this machine's cores on local: and qemu: (it was a phone's 6 in bench,
which made a 2-core machine's tokens/s 250x too slow) and 6 on a phone; ``--poll 1000``, ``-ngl
99`` and ``--device HTP…`` only for a package with the Hexagon backend (bench put ``--poll`` in
for every package).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hexbuild.artifacts import write_manifest
from hexbuild.runner.defaults import PHONE_THREADS, run_defaults
from hexbuild.targets import parse_target
from tests.infra.devices import free_port
from tests.infra.runner_tools import decode_echo

SYSROOT = "/usr/aarch64-linux-gnu"
CORES = str(len(os.sched_getaffinity(0)))
NPU_ONLY = ("--poll", "-ngl", "--device", "-dev")
CPU_ONLY_META = {"toolchain": "open", "lacks": ["htp"]}


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)
    monkeypatch.setenv("HEXBUILD_RUN_RESULTS_DIR", str(tmp_path / "results"))


def value_of(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def make_package(root: Path, *, os_name: str, program: Path, bench: Path, server: Path, npu: bool) -> Path:
    """A package whose llama tools are ``program`` (argv_echo), with the fake llama-bench and the
    HTTP stand-in; ``npu``: with the Hexagon host library (a dummy: nothing loads it here)."""
    pkg = root / "llama.cpp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    for name in ("llama-completion", "llama-cli", "test-backend-ops", "llama-perplexity"):
        (pkg / "bin" / name).write_bytes(program.read_bytes())
    (pkg / "bin" / "llama-bench").write_bytes(bench.read_bytes())
    (pkg / "bin" / "llama-server").write_bytes(server.read_bytes())
    for f in (pkg / "bin").iterdir():
        f.chmod(0o755)
    (pkg / "lib" / ("libggml-hexagon.so" if npu else "libggml-cpu.so")).write_bytes(b"not loaded here\n")
    write_manifest(pkg, {"os": os_name, **({} if npu else CPU_ONLY_META)})
    return pkg


@pytest.fixture(params=["qemu", "local", "adb"])
def kind(request):
    return request.param


@pytest.fixture
def place(kind, tmp_path, argv_echo, argv_echo_aarch64, fake_llama_bench, http_stand_in, request):
    """(spec, dest, models_dir, os, the threads expected, the package maker) for the target kind."""
    def maker(os_name, program):
        return lambda npu: make_package(tmp_path / ("npu" if npu else "cpu"), os_name=os_name, program=program,
                                        bench=fake_llama_bench, server=http_stand_in, npu=npu)

    if kind == "adb":
        phone = request.getfixturevalue("phones")["SM8750"]  # v79: several sessions allowed
        return (f"adb:{phone.serial}", "/data/local/tmp/defaults/llama.cpp", "/data/local/tmp/defaults/gguf",
                str(PHONE_THREADS), maker("android", argv_echo), phone)
    dest = str(tmp_path / kind / "llama.cpp")
    program = argv_echo_aarch64 if kind == "qemu" else argv_echo
    return f"{kind}:{dest}", dest, str(tmp_path / kind / "gguf"), CORES, maker("linux", program), None


def deploy(cli, pkg: Path, spec: str, dest: str, models: str, *more: str):
    r = cli("--json", "deploy", str(pkg), "-t", spec, "--dest", dest, "--models-dir", models, *more)
    assert r.rc == 0, r.err
    return r


def printed(cli, kind_: str, spec: str, dest: str, models: str) -> dict:
    r = cli("--json", "run", kind_, "--print", "-t", spec, "--dest", dest, "--models-dir", models, "--model", "m.gguf")
    assert r.rc == 0, r.err
    return r.json


# -- the one place --------------------------------------------------------------------------------
def test_the_target_and_the_package_decide(tmp_path):
    cpu = {"toolchain": "open", "files": [{"path": "bin/llama-cli"}]}
    npu = {"files": [{"path": "lib/libggml-hexagon.so"}]}
    local, qemu = parse_target(f"local:{tmp_path}/l"), parse_target(f"qemu:{tmp_path}/q")
    phone = parse_target("adb:R5CT0000TEST")  # nothing is asked of the device to decide
    for target in (local, qemu):
        d = run_defaults(target, cpu)
        assert (d.threads, d.npu) == (CORES, False)
        assert run_defaults(target, npu).npu and run_defaults(target, npu, cpu=True).npu is False
    d = run_defaults(phone, npu)
    assert (d.threads, d.cpu_mask, d.npu) == ("6", "0xfc", True)
    assert run_defaults(phone, cpu).npu is False
    assert run_defaults(phone, npu, threads=3).threads == "3" and run_defaults(local, None, threads=[2, 4]).threads == "2,4"


# -- every command, on each kind of target --------------------------------------------------------
def test_every_command_takes_the_same_defaults(cli, kind, place, tmp_path, tiny_gguf, serve_state):
    """A CPU-only package: every command's -t is the target's and none injects the NPU's flags;
    bench says the package is CPU only and shows CPU, not 'ndev 1'."""
    spec, dest, models, threads, make, _ = place
    deploy(cli, make(False), spec, dest, models, "--model", str(tiny_gguf))
    argvs = {f"run {k}": printed(cli, k, spec, dest, models)["argv"] for k in ("completion", "cli", "server", "bench")}

    r = cli("--json", "run", "completion", "-t", spec, "--dest", dest, "--models-dir", models, "--model", tiny_gguf.name)
    assert r.rc == 0, r.err
    assert decode_echo(Path(r.json["log"]).read_bytes())["argv"] == r.json["argv"]  # what ran is what was rendered
    argvs["run completion (ran)"] = r.json["argv"]

    r = cli("--json", "bench", "-t", spec, "--dest", dest, "--models-dir", models, "--model", tiny_gguf.name,
            "--out", str(tmp_path / "bench"), "--db", "")
    assert r.rc == 0, r.err
    runs = json.loads((tmp_path / "bench" / "results.json").read_text())["runs"]
    argvs["bench"] = runs[0]["argv"]
    assert {row["ndev"] for row in r.json["results"]} == {0} and {row["n_threads"] for row in r.json["results"]} == {int(threads)}
    assert "| CPU |" in (tmp_path / "bench" / "results.md").read_text()
    assert sum("runs on the CPU only" in line for line in r.err.splitlines()) == 1  # said once
    assert any("runs on the CPU only" in n for n in r.json["notes"])

    port = free_port()
    apart = ["--device-port", str(free_port())] if kind == "adb" else []  # the virtual phone shares this network
    r = cli("--json", "serve", "-t", spec, "--dest", dest, "--models-dir", models, "--model", tiny_gguf.name,
            "--port", str(port), "--detach", *apart)
    assert r.rc == 0, r.err
    argvs["serve"] = json.loads((serve_state / f"{port}.json").read_text())["argv"]
    assert cli("serve", "stop", "--port", str(port)).rc == 0

    from hexbuild.checks import ops, ppl
    from hexbuild.config import load

    text = tmp_path / "wiki.test.raw"
    text.write_text("the text llama-perplexity reads\n")
    with parse_target(spec, load()) as target:
        argvs["test ppl"] = ppl.invocation(target, ppl.PplRequest(target=spec, model=tiny_gguf.name, text=str(text),
                                                                  dest=dest, models_dir=models), cpu=False)[0].argv
        assert ops.sessions_to_test(target, ops.OpsRequest(target=spec, dest=dest)) == []  # nothing on the NPU

    for name, argv in argvs.items():
        if "-t" in argv or name != "test ppl":
            assert value_of(argv, "-t") == threads, (name, argv)
        assert not set(NPU_ONLY) & set(argv), (name, argv)
        assert "6" not in argv or threads == "6", (name, argv)


def test_an_npu_package_gets_the_npu_defaults_and_the_targets_threads(cli, kind, place, tmp_path):
    """With the Hexagon backend every llama tool (bench too) gets --poll, -ngl and the sessions,
    and -t stays the target's; the launch scripts deploy --ndev writes say the same."""
    spec, dest, models, threads, make, _ = place
    deploy(cli, make(True), spec, dest, models, "--ndev", "2")
    for k in ("completion", "cli", "server", "bench"):
        doc = printed(cli, k, spec, dest, models)
        argv = doc["argv"]
        assert value_of(argv, "-t") == threads and value_of(argv, "--poll") == "1000", (k, argv)
        assert value_of(argv, "-ngl") == "99" and (value_of(argv, "--device") or value_of(argv, "-dev")) == "HTP0", (k, argv)
        if kind == "qemu" and k in ("completion", "cli"):  # AArch64 programs: printed as they run, emulated
            assert " -L " + SYSROOT + " -- ./bin/" in doc["command"]
            pasted = subprocess.run(["sh", "-c", doc["command"]], capture_output=True, timeout=60)
            assert pasted.returncode == 0 and decode_echo(pasted.stdout)["argv"] == argv, pasted.stderr

    with parse_target(spec) as target:
        got = target.capture([f"{dest}/scripts/run-completion.sh", "-n", "4"], cwd=dest, timeout=60)
    assert got.rc == 0, got.err
    script_argv = decode_echo(got.out)["argv"]
    assert value_of(script_argv, "-t") == threads and value_of(script_argv, "--poll") == "1000"
    assert value_of(script_argv, "--device") == "HTP0,HTP1" and script_argv[-2:] == ["-n", "4"]


def test_a_lab_board_renders_with_the_same_place(tmp_path, argv_echo_aarch64, fake_llama_bench, http_stand_in):
    """lab's jobs: the board's cores are unknown here, so a phone's 6, and the package decides the NPU flags."""
    from hexbuild.lab import plan as lab_plan

    for npu in (False, True):
        pkg = make_package(tmp_path / str(npu), os_name="linux", program=argv_echo_aarch64, bench=fake_llama_bench,
                           server=http_stand_in, npu=npu)
        for what in ("completion", "bench"):
            planned = lab_plan.plan(lab_plan.LabRequest(kind=what, package=pkg, model="/models/m.gguf"), "lava:board")
            try:
                argv = planned.steps[0].invocation.argv
            finally:
                planned.close()
            assert value_of(argv, "-t") == str(PHONE_THREADS), argv
            assert (value_of(argv, "--poll") == "1000") is npu and ("-ngl" in argv) is npu, argv
