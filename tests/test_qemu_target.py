"""The ``qemu[:DIR]`` target: a Linux AArch64 package deployed into a directory of this machine
(the local: deploy code) and its programs run by the real qemu-aarch64 against a real AArch64
glibc sysroot (Debian's /usr/aarch64-linux-gnu, or one exported from a Docker image)."""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hexbuild import config, runner
from hexbuild.errors import EnvironmentMissing, UsageError
from hexbuild.targets import parse_target
from hexbuild.targets.qemu import QemuTarget
from tests import elf_factory as ef
from tests.infra.runner_tools import decode_echo, echo_linux_package

SYSROOT = "/usr/aarch64-linux-gnu"
NASTY = ["plain", "with space", "it's", 'say "hi"', "$(touch /tmp/pwned)", "`id`", "a;b", "line1\nline2",
         "naïve ünïcödé ✓", "*", "~", "-n", "", "\\", "$HOME", "--", "-L", "/etc"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))  # the default qemu dir and sysroot cache
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)


@pytest.fixture
def linux_pkg(tmp_path, argv_echo_aarch64) -> Path:
    """A Linux package whose programs are the AArch64 argv_echo."""
    return echo_linux_package(tmp_path / "pkg" / "llama.cpp", argv_echo_aarch64)


def deploy_json(cli, pkg, spec, *more):
    r = cli("--json", "deploy", str(pkg), "--target", spec, *more)
    return r, (r.json if r.out.strip() else None)


# -- grammar --------------------------------------------------------------------------------------
def test_grammar_default_dir_under_the_cache_and_explicit_dir(tmp_path):
    t = parse_target("qemu", None)
    assert isinstance(t, QemuTarget) and t.root == str(tmp_path / "xdg-cache" / "hexbuild" / "qemu" / "llama.cpp")
    t = parse_target(f"qemu:{tmp_path}/x", {"linux.sysroot": SYSROOT})
    assert t.root == f"{tmp_path}/x" and t.sysroot == Path(SYSROOT)
    assert (t.caps.package_oses, t.os, t.kind) == (("linux",), "linux", "qemu")
    with pytest.raises(UsageError, match="qemu\\[:DIR\\]"):
        parse_target("qemu:", None)


def test_a_directory_that_is_not_a_sysroot_is_refused(tmp_path):
    t = parse_target(f"qemu:{tmp_path}/x", {"linux.sysroot": str(tmp_path)})
    with pytest.raises(UsageError, match="not an AArch64 glibc sysroot"):
        t.sysroot


# -- running ------------------------------------------------------------------------------------
def test_aarch64_programs_go_through_qemu_and_shell_scripts_stay_native(tmp_path, argv_echo_aarch64):
    t = parse_target(f"qemu:{tmp_path}/inst", config.load(flags={}))
    got = t.capture([str(argv_echo_aarch64), *NASTY], cwd=str(tmp_path))
    assert got.rc == 0, got.err
    assert decode_echo(got.out)["argv"] == [str(argv_echo_aarch64), *NASTY]
    assert t.capture(["sh", "-c", "uname -m"]).out.strip() == os.uname().machine  # native
    assert t.emulated(["sh", "-c", "true"], None) == ["sh", "-c", "true"]
    assert t.emulated(["./prog"], str(argv_echo_aarch64.parent / "nowhere")) == ["./prog"]
    wrapped = t.emulated([str(argv_echo_aarch64), "-x"], None)
    assert wrapped[1:] == ["-L", SYSROOT, "--", str(argv_echo_aarch64), "-x"]
    assert t.capture([str(argv_echo_aarch64)], env={"GGML_HEXAGON_ECHO_EXIT": "4"}).rc == 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
                      max_size=6))
def test_arguments_reach_the_program_exactly_qemu(tmp_path, cli, linux_pkg, extra):
    spec = f"qemu:{tmp_path}/inst"
    if not (tmp_path / "inst").exists():
        assert deploy_json(cli, linux_pkg, spec)[0].rc == 0
    req = runner.RunRequest(kind="tool", target=spec, results_dir=str(tmp_path / "results"),
                            extra=["test-backend-ops", *extra])
    record = runner.run(req, config.load(flags={}))
    assert record.exit_code == 0
    got = decode_echo(Path(record.log).read_bytes())
    assert got["argv"] == record.invocation.argv and got["argv"][len(got["argv"]) - len(extra):] == extra


def test_deploy_is_incremental_and_atomic_like_local(cli, tmp_path, linux_pkg):
    spec = f"qemu:{tmp_path}/inst"
    r, doc = deploy_json(cli, linux_pkg, spec)
    assert r.rc == 0, r.err
    assert doc[0]["status"] == "ok" and doc[0]["files_pushed"] == 3 and doc[0]["glibc"] == {"target": "2.36", "package": "2.34"}
    assert (tmp_path / "inst").is_symlink() and (tmp_path / "inst" / "bin" / "llama-cli").is_file()
    r, doc = deploy_json(cli, linux_pkg, spec)
    assert doc[0]["status"] == "unchanged" and doc[0]["files_pushed"] == 0
    (linux_pkg / "bin" / "llama-cli").write_bytes(b"#!/bin/sh\necho changed\n")
    r, doc = deploy_json(cli, linux_pkg, spec)
    assert doc[0]["status"] == "ok" and doc[0]["files_pushed"] == 1
    r = cli("--json", "run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"), "--", "-n", "16")
    assert r.rc == 0, r.err
    got = decode_echo(Path(r.json["log"]).read_bytes())
    assert got["argv"][0] == "./bin/llama-completion" and got["argv"][-2:] == ["-n", "16"]
    assert got["env"]["LD_LIBRARY_PATH"] == f"{tmp_path}/inst/lib"


def test_launch_scripts_start_the_programs_through_the_emulator(cli, tmp_path, linux_pkg):
    """deploy --ndev writes launch scripts that start the install's AArch64 programs the way the
    target does (qemu-aarch64 -L SYSROOT --), so they run here as they would on a board."""
    (linux_pkg / "lib" / "libggml-hexagon.so").write_bytes(b"the Hexagon backend stand-in\n")  # an NPU package
    spec = f"qemu:{tmp_path}/inst"
    r, _ = deploy_json(cli, linux_pkg, spec, "--ndev", "2")
    assert r.rc == 0, r.err
    script = tmp_path / "inst" / "scripts" / "run-completion.sh"
    assert f"qemu-aarch64 -L {SYSROOT} -- ./bin/llama-completion" in script.read_text()
    cp = subprocess.run(["sh", str(script), "-p", "it's"], capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert cp.returncode == 0, cp.stderr
    got = decode_echo(cp.stdout)
    assert got["argv"][0] == "./bin/llama-completion" and got["argv"][-2:] == ["-p", "it's"]
    assert got["env"]["GGML_HEXAGON_NDEV"] == "2" and Path(got["cwd"]) == (tmp_path / "inst").resolve()


@pytest.fixture
def two_cores():
    """This process (the in-process CLI) on two cores, as the 2-core runner the audit used: the
    affinity hexbuild reads is the machine the programs run on."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(saved)[:2])
    yield len(os.sched_getaffinity(0))
    os.sched_setaffinity(0, saved)


def test_the_revisions_cpu_mask_is_left_out_where_this_machine_lacks_its_cores(cli, tmp_path, linux_pkg,
                                                                                 tree_0_3_20, two_cores):
    """The older trees' adb scripts pin their threads to a phone's cores 2-7 (--cpu-mask 0xfc
    --cpu-strict 1); on a machine without those cores the mask names no core and llama.cpp warns
    'failed to set affinity mask'. On qemu: the defaults come from this machine: no mask, and
    -t its cores. Launch scripts follow the same defaults."""
    from hexbuild.source import read_source

    facts = read_source(tree_0_3_20).to_json()
    (linux_pkg / "manifest.json").write_text(json.dumps({"os": "linux", "llama_cpp": facts}))
    (linux_pkg / "lib" / "libggml-hexagon.so").write_bytes(b"the Hexagon backend stand-in\n")
    (linux_pkg / "bin" / "llama-bench").write_bytes((linux_pkg / "bin" / "llama-cli").read_bytes())
    spec = f"qemu:{tmp_path}/inst"
    r, _ = deploy_json(cli, linux_pkg, spec, "--ndev", "1")
    assert r.rc == 0, r.err
    for kind in ("completion", "bench"):
        p = cli("--json", "run", kind, "-t", spec, "--print")
        assert p.rc == 0, p.err
        argv = p.json["argv"]
        assert "--cpu-mask" not in argv and "--cpu-strict" not in argv, argv
        assert argv[argv.index("-t") + 1] == str(two_cores)
    script = (tmp_path / "inst" / "scripts" / "run-completion.sh").read_text()
    assert "set -- --cpu-mask" not in script and "set -- --cpu-strict" not in script, script  # no default
    assert f"set -- -t {two_cores} " in script, script


def test_verbose_prints_the_emulator_command(cli, tmp_path, linux_pkg):
    spec = f"qemu:{tmp_path}/inst"
    assert deploy_json(cli, linux_pkg, spec)[0].rc == 0
    r = cli("-v", "run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0, r.err
    assert f"qemu-aarch64 -L {SYSROOT} -- ./bin/llama-completion" in r.err


# -- refusals --------------------------------------------------------------------------------------
def test_an_android_package_is_refused_in_one_line(cli, tmp_path):
    pkg = ef.make_package(tmp_path, os="android", htp=["v73"])
    r, doc = deploy_json(cli, pkg, f"qemu:{tmp_path}/inst")
    assert r.rc == 2 and "not an android package" in doc["error"]["message"]
    assert "bionic" in doc["error"]["message"] and "\n" not in doc["error"]["message"]
    assert not (tmp_path / "inst").exists()


def test_missing_qemu_is_exit_3_naming_the_package(cli, tmp_path, linux_pkg, monkeypatch):
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    r, doc = deploy_json(cli, linux_pkg, f"qemu:{tmp_path}/inst")
    assert r.rc == 3 and "qemu-aarch64 is not installed" in doc["error"]["message"]
    assert "apt install qemu-user" in doc["error"]["hint"]
    assert not (tmp_path / "inst").exists()
    with pytest.raises(EnvironmentMissing, match="qemu-aarch64 is not installed") as e:
        parse_target(f"qemu:{tmp_path}/inst", config.load(flags={})).qemu
    assert e.value.exit_code == 3 and "apt install qemu-user" in e.value.hint


def test_without_the_open_image_the_error_says_how_to_make_it(cli, tmp_path, linux_pkg, docker_env, monkeypatch,
                                                               docker_client):
    monkeypatch.delenv("HEXBUILD_LINUX_SYSROOT")
    from hexbuild.toolchain import open_image, sysroot

    # a repository name of this test's own, which the (possibly shared) engine surely lacks
    missing = f"hexbuild-test/open-arm64-linux-{secrets.token_hex(4)}"
    monkeypatch.setattr(sysroot, "OPEN_IMAGE_REPO", missing)
    monkeypatch.setattr(open_image, "image_ref", lambda *a, **k: f"{missing}:current-recipe")
    assert not docker_client.images.list(name=missing)
    r = cli("deploy", str(linux_pkg), "-t", f"qemu:{tmp_path}/inst")
    assert r.rc == 3 and "hexbuild toolchain open" in r.err and "--sysroot /usr/aarch64-linux-gnu" in r.err


def test_the_default_sysroot_is_exported_from_the_open_image(tmp_path, argv_echo_aarch64, docker_env, docker_client,
                                                              monkeypatch):
    """An image named like the open toolchain's, holding a real AArch64 runtime, is the default
    sysroot: exported once with the Docker SDK into the cache and used by qemu."""
    monkeypatch.delenv("HEXBUILD_LINUX_SYSROOT")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("ld-linux-aarch64.so.1", "libc.so.6"):
            tar.add(f"{SYSROOT}/lib/{name}", arcname=f"usr/aarch64-linux-gnu/lib/{name}")
    tag = f"qemu-test-{secrets.token_hex(4)}"
    docker_client.api.import_image_from_data(buf.getvalue(), repository="hexbuild/open-arm64-linux", tag=tag)
    try:
        t = parse_target(f"qemu:{tmp_path}/inst", config.load(flags={}))
        got = t.capture([str(argv_echo_aarch64), "a b"])
        assert got.rc == 0, got.err
        assert decode_echo(got.out)["argv"][1:] == ["a b"]
        assert str(t.sysroot).startswith(str(tmp_path / "xdg-cache" / "hexbuild" / "sysroots"))
        assert t.glibc_version() == "2.36"
        again = parse_target(f"qemu:{tmp_path}/inst", config.load(flags={}))
        assert again.sysroot == t.sysroot  # the cached export, not a second one
    finally:
        docker_client.images.remove(f"hexbuild/open-arm64-linux:{tag}", force=True)


def test_the_current_recipes_runtime_is_found_again_without_the_engine(tmp_path, argv_echo_aarch64, docker_env,
                                                                        docker_client, monkeypatch):
    """Once the image the current recipe makes has been extracted, a qemu: target finds its
    runtime without asking the engine (here: no engine at all); a new image of the recipe
    (hexbuild toolchain open) has it extracted again."""
    from hexbuild.toolchain import open_image, sysroot

    monkeypatch.delenv("HEXBUILD_LINUX_SYSROOT")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("ld-linux-aarch64.so.1", "libc.so.6"):
            tar.add(f"{SYSROOT}/lib/{name}", arcname=f"usr/aarch64-linux-gnu/lib/{name}")
    tag = f"qemu-test-{secrets.token_hex(4)}"
    ref = f"hexbuild/open-arm64-linux:{tag}"
    docker_client.api.import_image_from_data(buf.getvalue(), repository="hexbuild/open-arm64-linux", tag=tag)
    monkeypatch.setattr(open_image, "image_ref", lambda *a, **k: ref)
    try:
        first = parse_target(f"qemu:{tmp_path}/inst", config.load(flags={})).sysroot
    finally:
        docker_client.images.remove(ref, force=True)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    t = parse_target(f"qemu:{tmp_path}/inst", config.load(flags={}))
    assert t.sysroot == first
    assert decode_echo(t.capture([str(argv_echo_aarch64), "x"]).out)["argv"][1:] == ["x"]
    sysroot.forget_image(ref)
    with pytest.raises(EnvironmentMissing, match="not reachable"):
        parse_target(f"qemu:{tmp_path}/inst", config.load(flags={})).sysroot


def test_release_deploys_and_smoke_tests_on_the_qemu_target(cli, tmp_path, argv_echo_aarch64):
    pkg = ef.make_package(tmp_path / "build", os="linux", htp=["v73"])
    (pkg / "bin" / "llama-cli").write_bytes(argv_echo_aarch64.read_bytes())  # a program that really runs
    r = cli("--json", "release", "--prebuilt", f"linux={pkg}", "--os", "linux", "--target", f"qemu:{tmp_path}/inst",
            "--smoke", "llama-cli --version", "--dist", str(tmp_path / "dist"))
    assert r.rc == 0, r.err
    report = json.loads((tmp_path / "dist" / "release-report.json").read_text())
    device = report["devices"][0] if isinstance(report.get("devices"), list) else next(iter(report["devices"].values()))
    assert device["deploy"] == "ok" and device["smoke"]["status"] == "ok" and device["smoke"]["exit_code"] == 0
    assert (tmp_path / "inst" / "bin" / "llama-cli").is_file()


def test_models_go_beside_the_default_install_not_into_home(cli, tmp_path, linux_pkg, tiny_gguf):
    r = cli("--json", "deploy", str(linux_pkg), "-t", "qemu", "--model", str(tiny_gguf))
    assert r.rc == 0, r.err
    base = tmp_path / "xdg-cache" / "hexbuild" / "qemu"
    assert (base / "llama.cpp" / "bin" / "llama-completion").is_file()
    assert (base / "gguf" / tiny_gguf.name).is_file()
    r = cli("--json", "run", "completion", "-t", "qemu", "--model", tiny_gguf.name, "--results-dir", str(tmp_path / "r"))
    assert r.rc == 0, r.err
    assert r.json["argv"][r.json["argv"].index("-m") + 1] == str(base / "gguf" / tiny_gguf.name)
