"""The open toolchain end to end on real parts: `hexbuild toolchain open` on the test Docker engine,
the real llama.cpp 0.3.28 tree built with `hexbuild build --os linux --toolchain open` (its own
arm64-linux preset, Debian's clang), verified, and its programs run for real under qemu-aarch64
with the tiny GGUF, their output parsed by `hexbuild results parse`.

The image and the build are the session fixtures of tests/infra/real_build.py (cached: a cold
build takes minutes, a warm one seconds)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild.artifacts import read_elf, verify_package
from hexbuild.toolchain import open_image as oi
from tests.infra.real_build import build_open_package, run_aarch64

OPEN_PROGRAMS = ["llama-bench", "llama-cli", "llama-completion", "llama-perplexity", "llama-server",
                 "test-backend-ops"]


def hexbuild(*args: str, docker_host: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEXBUILD_", "DOCKER_"))}
    env["DOCKER_HOST"] = docker_host or "unix:///nonexistent/docker.sock"
    return subprocess.run([sys.executable, "-m", "hexbuild", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd="/", stdin=subprocess.DEVNULL)


# -- no daemon ---------------------------------------------------------------------------------------
def test_dry_run_builds_the_revisions_own_linux_preset_in_the_open_image(tree_0_3_36):
    cp = hexbuild("build", "--os", "linux", "--toolchain", "open", "-s", str(tree_0_3_36), "--dry-run", "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert d["toolchain"] == "open" and d["lacks"] == ["htp"] and d["htp_versions"] == []
    assert d["preset"] == "arm64-linux-snapdragon-release" and d["preset_source"] == "revision"
    assert d["presets"]["action"] == "copy" and d["presets"]["docs_file"].endswith("snapdragon/CMakeUserPresets.json")
    assert d["image"] == oi.image_ref() and d["image_source"] == "hexbuild toolchain open"
    assert d["build_dir"] == "build-open-linux" and d["install_dir"] == "pkg-open-linux/llama.cpp"
    assert d["build_targets"] == ["llama-completion", "llama-cli", "llama-bench", "llama-perplexity",
                                  "test-backend-ops", "llama-server"] and d["build_targets_source"] == "default"
    configure, build, install, collect = d["commands"]
    assert configure[:5] == ["cmake", "--preset", "arm64-linux-snapdragon-release", "-B", "build-open-linux"]
    for arg in ("-DGGML_HEXAGON=OFF", "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -Wl,--lto-partitions=4",
                "-DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld -Wl,--lto-partitions=4", "-DCMAKE_AR=/usr/bin/llvm-ar-19",
                "-DCMAKE_RANLIB=/usr/bin/llvm-ranlib-19", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=ON",
                "-DCMAKE_PROJECT_INCLUDE=/workspace/build-open-linux/hexbuild-targets.cmake"):
        assert arg in configure, arg
    assert "-DLLAMA_CURL=OFF" not in configure  # 0.3.36 has no LLAMA_CURL option any more
    assert build == ["cmake", "--build", "build-open-linux", "--target", *d["build_targets"]]
    assert install[:3] == ["cmake", "--install", "build-open-linux"]
    assert collect[-2:] == ["-P", "build-open-linux/hexbuild-targets.cmake"]
    c = d["container"]
    assert c["image"] == oi.image_ref() and c["network"] == "none"
    assert "-DGGML_HEXAGON=OFF" in c["docker_run"]
    assert not (tree_0_3_36 / "CMakeUserPresets.json").exists()


def test_build_target_and_cache_dir_options(tree_0_3_36):
    cp = hexbuild("build", "--os", "linux", "--toolchain", "open", "-s", str(tree_0_3_36), "--dry-run", "--json",
                  "--build-target", "llama-cli,llama-bench", "--build-target", "llama-cli",
                  "--cache-volume", "/var/cache/hexbuild-ccache")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert d["build_targets"] == ["llama-cli", "llama-bench"] and d["build_targets_source"] == "--build-target"
    assert "-DLLAMA_BUILD_TESTS=ON" not in d["commands"][0]
    cache = [m for m in d["container"]["mounts"] if m["target"] == "/cache"]
    assert cache == [{"type": "bind", "source": "/var/cache/hexbuild-ccache", "target": "/cache", "read_only": False}]


@pytest.mark.parametrize("argv, message", [
    (["--os", "android"], "--toolchain open builds Linux programs only"),
    (["--os", "linux", "--htp", "v73"], "the open toolchain builds no NPU libraries"),
    (["--os", "linux", "--build-target", "a b"], "is not a CMake target name"),
])
def test_open_toolchain_refuses_what_it_cannot_build(tree_0_3_36, argv, message):
    cp = hexbuild("build", "--toolchain", "open", "-s", str(tree_0_3_36), "--dry-run", *argv)
    assert cp.returncode == 2 and message in cp.stderr, cp.stderr
    assert cp.stderr.startswith("hexbuild: error:") and "Traceback" not in cp.stderr


def test_toolchain_open_print_needs_no_engine_and_only_linux():
    cp = hexbuild("toolchain", "open", "--print", "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert d["image"] == f"hexbuild/open-arm64-linux:{d['tag']}" and d["recipe_hash"].startswith(d["tag"])
    assert "clang-19" in d["packages"] and "libc6-dev-arm64-cross" in d["packages"]
    cp = hexbuild("toolchain", "open", "--os", "android")
    assert cp.returncode == 2 and "Linux programs only" in cp.stderr


def test_debian_mirror_comes_from_the_apt_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n")
    assert oi.debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://old.example/debian bookworm main\n")
    assert oi.debian_mirror(tmp_path) == "http://old.example/debian"


def test_a_changed_recipe_is_a_new_tag(tmp_path, monkeypatch):
    rec = oi.recipe()
    from hexbuild.toolchain import recipe_image

    changed_root = tmp_path / "recipe"
    for name, data in rec.files.items():
        (changed_root / name).parent.mkdir(parents=True, exist_ok=True)
        (changed_root / name).write_bytes(data + b"gdb\n" if name == "packages.txt" else data)
    monkeypatch.setattr(recipe_image, "package_root", lambda package, checkout_dir: changed_root)
    changed = recipe_image.read_recipe(oi.KIND)
    assert changed.tag != rec.tag and changed.image != rec.image and changed.packages[-1] == "gdb"
    assert recipe_image.read_recipe(oi.KIND).hash == changed.hash  # the same files: the same tag
    # the same files both ways: the Dockerfile installs packages.txt through install.sh
    assert b"install.sh" in rec.files["Dockerfile"] and b"packages.txt" in rec.files["install.sh"]


# -- the real image and the real build -----------------------------------------------------------------
def test_toolchain_open_reuses_the_image(open_image, docker_host, docker_client):
    cp = hexbuild("toolchain", "open", "--json", docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert d["image"] == open_image and d["status"] == "reused" and d["created"] is False and d["method"] is None
    labels = docker_client.images.get(open_image).labels
    assert labels["hexbuild.recipe"] == d["recipe_hash"]
    out = docker_client.containers.run(open_image, ["sh", "-c", "clang --version; ld.lld --version; "
                                                    "llvm-ar-19 --version; ccache --version; ninja --version; "
                                                    "ls /usr/aarch64-linux-gnu/lib/libc.so.6"],
                                       network_mode="none", remove=True).decode()
    assert "clang version 19" in out and "LLD 19" in out and "ccache version" in out
    assert "/usr/aarch64-linux-gnu/lib/libc.so.6" in out


def test_real_build_gives_aarch64_programs_that_verify_accepts(real_linux_package):
    pkg = real_linux_package
    programs = sorted(p.name for p in (pkg / "bin").iterdir())
    for name in OPEN_PROGRAMS:
        assert name in programs, programs
        info = read_elf(pkg / "bin" / name)
        assert info.machine == "AArch64" and info.interpreter == "/lib/ld-linux-aarch64.so.1"
    libs = {p.name for p in (pkg / "lib").iterdir()}
    assert {"libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so"} <= libs
    assert not [n for n in libs if n.startswith(("libggml-htp", "libggml-hexagon"))]
    report = verify_package(pkg, os="linux")  # toolchain from the manifest
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    assert report.toolchain == "open" and report.notes and "CPU only" in report.notes[0]
    cp = hexbuild("verify", str(pkg), "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert d["ok"] and d["toolchain"] == "open" and d["htp_versions"] == [] and d["notes"]
    assert "note: no NPU libraries, as expected" in cp.stderr


def test_real_build_manifest_records_the_open_toolchain(real_linux_package):
    m = json.loads((real_linux_package / "manifest.json").read_text())
    assert m["toolchain"] == "open" and m["lacks"] == ["htp"] and m["os"] == "linux"
    assert m["preset"] == "arm64-linux-snapdragon-release" and m["htp_versions"] == []
    assert m["image"]["reference"] == oi.image_ref() and m["image"]["digest"].startswith("sha256:")
    assert m["build_targets"][0] == "llama-completion" and "llama-server" in m["build_targets"]
    files = {f["path"]: f for f in m["files"]}
    assert files["bin/llama-completion"]["elf"]["machine"] == "AArch64"


def test_warm_rebuild_has_nothing_to_compile(real_linux_package, docker_host):
    from tests.infra.docker_engine import cache_dir

    package, result = build_open_package(docker_host, cache_dir(), extra=["--force"])  # the build itself, not its record
    assert package == real_linux_package and result["verify"]["ok"]
    log = Path(result["log"]).read_text(errors="replace")
    build = log.split("+ cmake --build", 1)[1].split("+ cmake --install", 1)[0]
    # nothing compiled or linked (the server re-runs its always-out-of-date UI asset step,
    # which cannot download anything in a container without a network)
    steps = [line for line in build.splitlines() if line.startswith("[")]
    assert not [s for s in steps if "Building" in s or "Linking" in s], steps
    assert result["toolchain"] == "open" and result["lacks"] == ["htp"]


def test_real_completion_under_qemu_gives_parsed_token_rates(real_linux_package, tiny_gguf, tmp_path):
    cp = run_aarch64(real_linux_package, "llama-completion", "-m", str(tiny_gguf), "-n", "16", "--ignore-eos", "-p", "hello world",
                     "-no-cnv", "--no-warmup", "-t", "2", "--seed", "1")
    assert cp.returncode == 0, cp.stderr[-3000:]
    log = tmp_path / "completion.log"
    log.write_text(cp.stdout + cp.stderr)
    parsed = hexbuild("results", "parse", str(log), "--json")
    assert parsed.returncode == 0, parsed.stderr
    perf = json.loads(parsed.stdout)["logs"][0]["perf"]
    assert perf["prompt_eval"]["tokens"] > 0 and perf["prompt_eval"]["tokens_per_second"] > 0
    assert perf["eval"]["runs"] == 15 and perf["eval"]["tokens_per_second"] > 0


def test_real_bench_and_backend_test_under_qemu(real_linux_package, tiny_gguf, tmp_path):
    cp = run_aarch64(real_linux_package, "llama-bench", "-m", str(tiny_gguf), "-p", "16", "-n", "4", "-r", "1",
                     "-t", "2", "-o", "jsonl")
    assert cp.returncode == 0, cp.stderr[-3000:]
    (tmp_path / "bench.log").write_text(cp.stdout)
    cp = run_aarch64(real_linux_package, "test-backend-ops", "-o", "MUL_MAT", timeout=300)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "1/1 backends passed" in cp.stdout + cp.stderr
    (tmp_path / "ops.log").write_text(cp.stdout + cp.stderr)
    parsed = hexbuild("results", "parse", str(tmp_path / "bench.log"), str(tmp_path / "ops.log"), "--json")
    assert parsed.returncode == 0, parsed.stderr
    bench, ops = json.loads(parsed.stdout)["logs"]
    rows = bench["bench"]
    assert {r["n_prompt"] for r in rows} >= {16} and all(r["avg_ts"] > 0 for r in rows)
    assert ops["backend_ops"]["backends_passed"] == ops["backend_ops"]["backends_total"] == 1


def test_deploy_and_run_say_the_package_runs_on_the_cpu_only(real_linux_package, tmp_path):
    dest = tmp_path / "board"
    cp = hexbuild("deploy", str(real_linux_package), "--target", f"local:{dest}", "--json")
    assert cp.returncode == 0, cp.stderr
    lines = [line for line in cp.stderr.splitlines() if "runs on the CPU only" in line]
    # the open toolchain was chosen: a note, not a warning (CI lines carry a time)
    assert len(lines) == 1 and re.match(r"(\[[\d:]+\] )?note:", lines[0]), lines
    cp = hexbuild("run", "completion", "--target", f"local:{dest}", "--print", "--model", "tiny.gguf")
    assert cp.returncode == 0, cp.stderr
    assert sum("runs on the CPU only" in line for line in cp.stderr.splitlines()) == 1


def test_rootfs_without_root_or_debootstrap_is_exit_3_with_the_fix(tmp_path, monkeypatch):
    from hexbuild.errors import EnvironmentMissing

    rec = oi.recipe()
    from hexbuild.toolchain import recipe_image

    monkeypatch.setattr(recipe_image.os, "geteuid", lambda: 1000)
    with pytest.raises(EnvironmentMissing) as e:
        oi.build_rootfs(rec, tmp_path / "r.tar")
    assert e.value.exit_code == 3 and "needs root" in e.value.message and "sudo" in e.value.hint
    with pytest.raises(EnvironmentMissing) as e:
        recipe_image._debootstrap([str(tmp_path)])
    assert e.value.exit_code == 3 and "apt-get install debootstrap" in e.value.hint
    assert not list(tmp_path.iterdir())  # nothing half-written
