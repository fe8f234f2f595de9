"""hexbuild build, end to end: the fixture project (tests/fixtures/llama-mini) built in the test
toolchain image on a real Docker engine, as a subprocess like a user runs it; dry runs of the
real llama.cpp trees; and the local engine on this machine with the same toolchain stand-ins.
Every build works on a copy of the fixture in a temporary directory."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hexbuild.build import BuildOptions, image_is_older, plan_build
from hexbuild.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "llama-mini"
TOOLCHAIN = REPO / "docker" / "toolchain-fixture"
CACHE = Path(os.environ.get("HEXBUILD_TEST_CACHE") or Path.home() / ".cache" / "hexbuild-tests")
LLAMA = {v: CACHE / f"llama-cpp-python-{v}" / "vendor" / "llama.cpp" for v in ("0.3.20", "0.3.36")}
USER = (1000, 1000)


def llama_tree(version: str) -> Path:
    """A real llama.cpp tree from the cache scripts/setup-test-env.sh fills."""
    tree = LLAMA[version]
    if not (tree / "ggml").is_dir():
        pytest.fail(f"{tree} is missing: run scripts/setup-test-env.sh", pytrace=False)
    return tree


def hexbuild(*args: str, env: dict[str, str] | None = None, docker_host: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HEXBUILD_", "DOCKER_"))}
    full["DOCKER_HOST"] = docker_host or "unix:///nonexistent/docker.sock"
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "hexbuild", *args], capture_output=True, text=True,
                          timeout=timeout, env=full, cwd="/")


def fixture_copy(tmp_path: Path, owner: tuple[int, int] | None = USER) -> Path:
    dst = tmp_path / "llama-mini"
    shutil.copytree(FIXTURE, dst)
    if owner:
        for p in [dst, *dst.rglob("*")]:
            os.lchown(p, *owner)
    return dst


# The engine may be shared (HEXBUILD_TEST_DOCKER_HOST) with builds that are not this test run's:
# only containers created after this module was imported count, and only those are removed.
_SINCE = time.time() - 1


def containers(client) -> list[str]:
    from datetime import datetime, timezone

    def created(c) -> float:
        stamp = (c.attrs.get("Created") or "")[:26].rstrip("Z")
        return datetime.fromisoformat(stamp).replace(tzinfo=timezone.utc).timestamp() if stamp else 0.0

    return [c.name for c in client.containers.list(all=True, filters={"label": "hexbuild"})
            if c.name.startswith("hexbuild-") and created(c) >= _SINCE]


def result_json(cp: subprocess.CompletedProcess) -> dict:
    assert cp.stdout.strip(), cp.stderr
    return json.loads(cp.stdout)


# -- dry runs: no daemon -------------------------------------------------------------------------
def test_dry_run_json_needs_no_daemon(tmp_path):
    src = fixture_copy(tmp_path, owner=None)
    cp = hexbuild("build", "-s", str(src), "--dry-run", "--json", "--user", "1000:1000", "--htp", "v73", "-j", "3")
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    c = data["container"]
    assert c["env"]["CMAKE_BUILD_PARALLEL_LEVEL"] == "3"
    assert c["image"] == "hexbuild.test/snapdragon-toolchain/arm64-android:v0.7"
    assert c["platform"] == "linux/amd64" and c["network"] == "none" and c["user"] == "1000:1000"
    assert c["working_dir"] == "/workspace"
    assert {"type": "bind", "source": str(src), "target": "/workspace", "read_only": False} in c["mounts"]
    assert [m["type"] for m in c["mounts"]] == ["bind", "volume"]
    assert set(c["env"]) == {"HOME", "CCACHE_DIR", "CMAKE_BUILD_PARALLEL_LEVEL"}
    assert c["command"][:2] == ["sh", "-c"] and "cmake --preset arm64-android-snapdragon-release" in c["command"][2]
    assert c["docker_run"].startswith("docker run --rm --name hexbuild-build-")
    assert data["htp_versions"] == ["v73"] and data["htp_all"] == ["v68", "v69", "v73"]
    assert data["presets"]["action"] == "copy"
    assert not (src / "build-snapdragon").exists() and not (src / "CMakeUserPresets.json").exists()


@pytest.mark.parametrize("version,os_name,image_tail,htp,install", [
    ("0.3.36", "android", "/arm64-android:v0.7", ["v73", "v75", "v79", "v81"], "pkg-android/llama.cpp"),
    ("0.3.36", "linux", "/arm64-linux:v0.7", ["v73", "v75", "v79", "v81"], "pkg-linux"),
    ("0.3.20", "android", "/arm64-android:v0.3", ["v68", "v69", "v73", "v75", "v79", "v81"], "pkg-snapdragon/llama.cpp"),
])
def test_dry_run_of_a_real_llama_cpp_tree(version, os_name, image_tail, htp, install):
    tree = llama_tree(version)
    cp = hexbuild("build", "-s", str(tree), "--os", os_name, "--dry-run", "--json")
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    c = data["container"]
    assert c["image"].endswith(image_tail) and data["image_source"].startswith("docs/backend/snapdragon/")
    assert data["preset"] == f"arm64-{os_name}-snapdragon-release"
    assert c["user"] == f"{os.getuid()}:{os.getgid()}"
    assert c["mounts"][0] == {"type": "bind", "source": str(tree.resolve()), "target": "/workspace", "read_only": False}
    assert data["htp_versions"] == htp
    assert data["install_dir"] == install
    # Linux gets its own build directory: llama.cpp's docs give both OSes build-snapdragon
    assert data["build_dir"] == ("build-snapdragon-linux" if os_name == "linux" else "build-snapdragon")
    assert f"--prefix {install}.hexbuild-partial" in c["command"][2]


def test_relwithdebinfo_uses_the_revisions_preset_or_the_release_one():
    new = result_json(hexbuild("build", "-s", str(llama_tree("0.3.36")), "--build-type", "relwithdebinfo",
                               "--dry-run", "--json"))
    assert new["preset"] == "arm64-android-snapdragon-relwithdebinfo"
    assert "-DCMAKE_BUILD_TYPE" not in " ".join(new["commands"][0])
    old = result_json(hexbuild("build", "-s", str(llama_tree("0.3.20")), "--build-type", "relwithdebinfo",
                               "--dry-run", "--json"))
    assert old["preset"] == "arm64-android-snapdragon-release"
    assert "-DCMAKE_BUILD_TYPE=RelWithDebInfo" in old["commands"][0]


@pytest.mark.parametrize("args,expect", [
    (["--os", "linux"], "no Snapdragon preset for linux"),           # 0.3.20 has no Linux presets
    (["--htp", "v99"], "not an HTP version this revision builds"),
    (["--htp", "seventy"], "unknown HTP version"),
    (["--build-dir", "/tmp/elsewhere"], "must be inside the checkout"),
    (["--image", "Not An Image"], "is not an image reference"),
    (["--user", "1000:1000; rm -rf /"], "expected UID[:GID]"),
])
def test_bad_input_is_one_line_and_exit_2(args, expect):
    cp = hexbuild("build", "-s", str(llama_tree("0.3.20")), "--dry-run", *args)
    assert cp.returncode == 2, cp.stderr
    assert expect in cp.stderr and "Traceback" not in cp.stderr
    assert len([l for l in cp.stderr.splitlines() if l.startswith("hexbuild: error")]) == 1


def test_digest_pinned_image_is_accepted(tmp_path):
    from hexbuild.toolchain.images import is_digest_pinned

    src = fixture_copy(tmp_path, owner=None)
    ref = "registry.test/snapdragon-toolchain/arm64-android@sha256:" + "0123456789abcdef" * 4
    data = result_json(hexbuild("build", "-s", str(src), "--image", ref, "--dry-run", "--json"))
    assert data["container"]["image"] == ref and data["image_source"] == "--image"
    assert is_digest_pinned(ref) and not is_digest_pinned(ref.split("@")[0] + ":v0.7")


def test_user_presets_without_the_preset_stop_the_build(tmp_path):
    src = fixture_copy(tmp_path, owner=None)
    (src / "CMakeUserPresets.json").write_text(json.dumps({"version": 5, "configurePresets": [{"name": "mine"}]}))
    cp = hexbuild("build", "-s", str(src), "--dry-run")
    assert cp.returncode == 2 and "differs from docs/backend/snapdragon/CMakeUserPresets.json" in cp.stderr
    assert json.loads((src / "CMakeUserPresets.json").read_text())["configurePresets"] == [{"name": "mine"}]


def test_env_passthrough_shows_names_never_values(tmp_path):
    src = fixture_copy(tmp_path, owner=None)
    cp = hexbuild("build", "-s", str(src), "--dry-run", "--json",
                  env={"HEXBUILD_BUILD_ENV_PASSTHROUGH": "HBX_TOKEN,HBX_UNSET", "HBX_TOKEN": "hunter2"})
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    assert data["container"]["env_passthrough"] == ["HBX_TOKEN"]
    assert "hunter2" not in cp.stdout + cp.stderr
    cp = hexbuild("build", "-s", str(src), "--dry-run", env={"HEXBUILD_BUILD_ENV_PASSTHROUGH": "HOME"})
    assert cp.returncode == 2 and "set by hexbuild" in cp.stderr


def test_image_is_older_compares_tags_of_the_same_repository():
    pin = "registry.test/snapdragon-toolchain/arm64-android:v0.7"
    assert image_is_older("registry.test/snapdragon-toolchain/arm64-android:v0.3", pin)
    assert not image_is_older("registry.test/snapdragon-toolchain/arm64-android:v0.8", pin)
    assert not image_is_older("other/arm64-linux:v0.1", pin)
    assert not image_is_older(pin, pin) and not image_is_older(None, pin)


def test_options_from_settings_follow_config_precedence(tmp_path, monkeypatch):
    from hexbuild.config import load

    src = fixture_copy(tmp_path, owner=None)
    (src / "hexbuild.toml").write_text('[build]\nos = "linux"\nhtp = ["v73"]\njobs = 3\n')
    s = load(flags={"source": str(src), "build.jobs": 5}, env={"HEXBUILD_BUILD_PULL": "never"})
    opts = BuildOptions.from_settings(s)
    assert (opts.os, opts.htp, opts.jobs, opts.pull) == ("linux", ["v73"], 5, "never")
    plan = plan_build(opts)
    assert plan.image == "hexbuild.test/snapdragon-toolchain/arm64-linux:v0.7"
    assert plan.build_dir == "build-snapdragon-linux" and plan.install_dir == "pkg-linux"
    with pytest.raises(UsageError):
        plan_build(BuildOptions(source=src, os="windows"))


# -- real builds on the test engine ------------------------------------------------------------------
def test_build_as_another_user_gives_a_verified_package_they_own(tmp_path, docker_host, toolchain_images,
                                                                 docker_client):
    src = fixture_copy(tmp_path)
    (src / "CMakeLists.txt").write_text((src / "CMakeLists.txt").read_text()
                                        + 'message(STATUS "passed=[$ENV{HBX_MARK}] leaked=[$ENV{HBX_SECRET}]")\n')
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--json", docker_host=docker_host,
                  env={"HEXBUILD_BUILD_ENV_PASSTHROUGH": "HBX_MARK", "HBX_MARK": "m4rk", "HBX_SECRET": "x"})
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    pkg = Path(data["package"])
    assert pkg == src / "pkg-snapdragon" / "llama.cpp"
    assert data["status"] == "ok" and data["verify"]["ok"] and data["os"] == "android"
    assert data["htp_versions"] == ["v68", "v69", "v73"] and data["preset"] == "arm64-android-snapdragon-release"
    assert data["image"] == toolchain_images["android"]
    assert data["digest"] == docker_client.images.get(toolchain_images["android"]).id
    libs = sorted(p.name for p in (pkg / "lib").iterdir())
    assert libs == ["libggml-base.so", "libggml-hexagon.so", "libggml-htp-v68.so", "libggml-htp-v69.so",
                    "libggml-htp-v73.so", "libggml.so", "libllama.so"]
    assert sorted(p.name for p in (pkg / "bin").iterdir()) == ["llama-bench", "llama-cli", "llama-completion"]
    for p in [pkg, *pkg.rglob("*"), src / "build-snapdragon", Path(data["log"])]:
        assert (p.stat().st_uid, p.stat().st_gid) == USER, p
    manifest = json.loads((pkg / "manifest.json").read_text())
    assert manifest["image"] == {"reference": toolchain_images["android"], "digest": data["digest"]}
    assert manifest["preset"] == data["preset"] and manifest["htp_versions"] == ["v68", "v69", "v73"]
    # deploy and run read the revision's vocabulary from here, long after the checkout is gone
    from hexbuild.source import read_source

    facts = read_source(src).to_json()
    from hexbuild.build import MANIFEST_FACTS

    assert "revision" in MANIFEST_FACTS and "device_selection" in MANIFEST_FACTS and "env_vars" in MANIFEST_FACTS
    assert manifest["llama_cpp"] == {k: facts.get(k) for k in MANIFEST_FACTS}
    log = Path(data["log"]).read_text()
    assert "passed=[m4rk] leaked=[]" in log and "[40/40]" in log
    assert not (src / "CMakeUserPresets.json").exists()       # the copy is gone again
    assert not list(src.glob("pkg-snapdragon/*.hexbuild-*"))  # no staging left
    assert not containers(docker_client)

    # again, up to date: same package, replaced as a whole
    stale = pkg / "lib" / "libstale.so"
    stale.write_bytes(b"")
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--json", docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    assert not stale.exists()


def test_an_unchanged_build_is_up_to_date_without_a_container(tmp_path, docker_host, toolchain_images):
    """Nothing changed since the last build: the package in place is its output, said in one
    line without starting a container. A touched source file, another option, a changed package,
    another passthrough value or --force build again."""
    src = fixture_copy(tmp_path)
    build = ("build", "-s", str(src), "--user", "1000:1000", "--json", "-v")
    env = {"HEXBUILD_BUILD_ENV_PASSTHROUGH": "HBX_MARK", "HBX_MARK": "one"}

    def status(cp: subprocess.CompletedProcess) -> str:
        assert cp.returncode == 0, cp.stderr
        started = "+ docker run --rm --name hexbuild-build-" in cp.stderr
        data = result_json(cp)
        assert started == (data["status"] == "ok"), cp.stderr[-2000:]
        return data["status"]

    first = result_json(hexbuild(*build, docker_host=docker_host, env=env))
    log = Path(first["log"])
    logged = log.stat().st_mtime_ns
    record = src / "build-snapdragon" / ".hexbuild-build.json"
    assert (record.stat().st_uid, record.stat().st_gid) == USER  # the build user's, like the build tree
    cp = hexbuild(*build, docker_host=docker_host, env=env)
    assert status(cp) == "up-to-date" and log.stat().st_mtime_ns == logged
    again = result_json(cp)
    assert {k: again[k] for k in ("package", "log", "verify", "htp_versions", "digest")} == \
        {k: first[k] for k in ("package", "log", "verify", "htp_versions", "digest")}
    assert "up to date:" in cp.stderr and "--force" in cp.stderr
    human = hexbuild(*build[:-2], docker_host=docker_host, env=env)
    assert human.returncode == 0 and human.stdout.startswith("up to date (nothing changed; --force builds anyway): ")

    readme = src / "README.md"
    os.chmod(readme, readme.stat().st_mode)  # ctime moves, nothing else: still up to date
    assert status(hexbuild(*build, docker_host=docker_host, env=env)) == "up-to-date"
    source = src / "src" / "llama.c"
    source.write_text(source.read_text() + "\n/* changed */\n")
    assert status(hexbuild(*build, docker_host=docker_host, env=env)) == "ok"
    assert status(hexbuild(*build, docker_host=docker_host, env=env)) == "up-to-date"
    assert status(hexbuild(*build, docker_host=docker_host, env={**env, "HBX_MARK": "two"})) == "ok"
    (Path(first["package"]) / "bin" / "llama-bench").unlink()  # the package changed since
    assert status(hexbuild(*build, docker_host=docker_host, env={**env, "HBX_MARK": "two"})) == "ok"
    assert (Path(first["package"]) / "bin" / "llama-bench").is_file()
    assert status(hexbuild(*build, "--htp", "v73", docker_host=docker_host, env={**env, "HBX_MARK": "two"})) == "ok"
    assert status(hexbuild(*build, "--force", "--htp", "v73", docker_host=docker_host,
                           env={**env, "HBX_MARK": "two"})) == "ok"
    # a removed build directory (and so its record) means a full build
    shutil.rmtree(src / "build-snapdragon")
    assert status(hexbuild(*build, docker_host=docker_host, env=env)) == "ok"


def test_htp_subset_builds_only_those_and_a_full_build_restores_all(tmp_path, docker_host, toolchain_images):
    src = fixture_copy(tmp_path)
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--htp", "v73", "--json", "-v",
                  docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    assert "+ docker run --rm --name hexbuild-build-" in cp.stderr  # -v: the spec before the run
    assert "[1/" in cp.stderr                                          # -v: the live log
    data = result_json(cp)
    assert data["htp_versions"] == ["v73"] and data["verify"]["expected_htp"] == ["v73"]
    pkg = Path(data["package"])
    assert sorted(p.name for p in (pkg / "lib").glob("libggml-htp-*")) == ["libggml-htp-v73.so"]
    built = src / "build-snapdragon" / "ggml" / "src" / "ggml-hexagon"
    assert sorted(p.name for p in built.glob("libggml-htp-*.so")) == ["libggml-htp-v73.so"]
    assert "Performing build step for 'htp-v68'" not in Path(data["log"]).read_text()

    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--json", docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    assert sorted(p.name for p in (pkg / "lib").glob("libggml-htp-*")) == [
        "libggml-htp-v68.so", "libggml-htp-v69.so", "libggml-htp-v73.so"]
    assert "-UCMAKE_PROJECT_ggml_INCLUDE" in Path(data["log"]).read_text()


def test_htp_subset_and_build_target_together(tmp_path, docker_host, toolchain_images):
    """Both selections wrap install(); CMake keeps one level of _install(), so they share one
    wrapper: only the program asked for and only the skels asked for are built and installed."""
    src = fixture_copy(tmp_path)
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--htp", "v69,v73", "--build-target", "llama-cli",
                  "--json", docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    pkg = Path(data["package"])
    assert data["htp_versions"] == ["v69", "v73"] and data["build_targets"] == ["llama-cli"] and data["verify"]["ok"]
    assert sorted(p.name for p in (pkg / "bin").iterdir()) == ["llama-cli"]
    assert sorted(p.name for p in (pkg / "lib").glob("libggml-htp-*")) == ["libggml-htp-v69.so", "libggml-htp-v73.so"]
    assert "Performing build step for 'htp-v68'" not in Path(data["log"]).read_text()


def test_build_target_builds_and_installs_only_those_and_a_full_build_restores_all(tmp_path, docker_host,
                                                                                   toolchain_images):
    src = fixture_copy(tmp_path)
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--build-target", "llama-cli", "--json",
                  docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    pkg = Path(data["package"])
    assert data["build_targets"] == ["llama-cli"] and data["toolchain"] == "vendor" and data["verify"]["ok"]
    # install(TARGETS) of what was not built is skipped; libraries the program needs are there
    assert sorted(p.name for p in (pkg / "bin").iterdir()) == ["llama-cli"]
    assert {"libllama.so", "libggml.so", "libggml-base.so"} <= {p.name for p in (pkg / "lib").iterdir()}
    assert json.loads((pkg / "manifest.json").read_text())["build_targets"] == ["llama-cli"]
    log = Path(data["log"]).read_text()
    assert "llama-bench" not in log.split("+ cmake --install")[0]  # never compiled

    # a target that installs nothing is an error, and the previous package stays
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--build-target", "htp_iface",
                  docker_host=docker_host)
    assert cp.returncode == 4 and "nothing in the package for --build-target htp_iface" in cp.stderr, cp.stderr
    assert sorted(p.name for p in (pkg / "bin").iterdir()) == ["llama-cli"]

    # every target again: the selection leaves the CMake cache
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--json", docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    assert sorted(p.name for p in (pkg / "bin").iterdir()) == ["llama-bench", "llama-cli", "llama-completion"]
    log = Path(result_json(cp)["log"]).read_text()
    assert "-UCMAKE_PROJECT_INCLUDE" in log and "-UHEXBUILD_BUILD_TARGETS" in log


def test_compile_error_exits_4_with_the_last_lines(tmp_path, docker_host, toolchain_images, docker_client):
    src = fixture_copy(tmp_path)
    cli = src / "tools" / "cli" / "cli.c"
    cli.write_text(cli.read_text().replace("return llama_matmul_check()", "return llama_matmul_check( +"))
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--json", docker_host=docker_host)
    assert cp.returncode == 4, cp.stderr
    assert "cmake --build failed (exit 1)" in cp.stderr and "Traceback" not in cp.stderr
    assert "cli.c" in cp.stderr and "error:" in cp.stderr          # the tail is shown
    err = result_json(cp)["error"]
    assert err["type"] == "build" and err["exit_code"] == 4
    assert any("error:" in line for line in err["details"]["log_tail"])
    assert Path(err["details"]["log"]).is_file()
    assert not (src / "pkg-snapdragon" / "llama.cpp").exists()     # nothing half-installed
    assert not containers(docker_client)


def test_missing_hexagon_sdk_gets_its_hint_and_a_kept_container_idles(tmp_path, docker_host, toolchain_images,
                                                                      docker_client):
    """The bare rootfs image has clang but no SDK: the fixture stops with llama.cpp's own message."""
    src = fixture_copy(tmp_path)
    cp = hexbuild("build", "-s", str(src), "--os", "linux", "--image", toolchain_images["base"], "--user",
                  "1000:1000", "--keep-container", docker_host=docker_host)
    try:
        assert cp.returncode == 4, cp.stderr
        assert "Make sure HEXAGON_SDK_ROOT point to the correct Hexagon SDK installation" in cp.stderr
        assert "hint: no Hexagon SDK where the preset looks" in cp.stderr
        kept = containers(docker_client)
        assert len(kept) == 1 and f"docker exec -it {kept[0]} bash" in cp.stderr
        c = docker_client.containers.get(kept[0])
        c.start()
        time.sleep(0.5)
        c.reload()
        assert c.status == "running"                               # idles instead of building again
        assert c.exec_run(["true"]).exit_code == 0
    finally:
        for name in containers(docker_client):
            docker_client.containers.get(name).remove(force=True)


def test_wrong_arch_skel_fails_verification_with_exit_5(tmp_path, docker_host, toolchain_images, docker_client):
    src = fixture_copy(tmp_path)
    tc = src / "ggml" / "src" / "ggml-hexagon" / "htp" / "cmake-toolchain.cmake"
    tc.write_text(tc.read_text().replace("${V_ARCH}", "v68"))   # every skel built for v68
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", "--json", docker_host=docker_host)
    assert cp.returncode == 5, cp.stderr
    err = result_json(cp)["error"]
    assert err["type"] == "verify" and "libggml-htp-v69.so" in err["message"] and "arch" in err["message"]
    assert not err["details"]["verify"]["ok"]
    assert not (Path(src / "pkg-snapdragon" / "llama.cpp") / "manifest.json").exists()
    assert not containers(docker_client)


def test_missing_library_fails_verification(tmp_path, docker_host, toolchain_images):
    src = fixture_copy(tmp_path)
    cm = src / "src" / "CMakeLists.txt"
    cm.write_text("\n".join(l for l in cm.read_text().splitlines() if not l.startswith("install(")) + "\n")
    cp = hexbuild("build", "-s", str(src), "--user", "1000:1000", docker_host=docker_host)
    assert cp.returncode == 5, cp.stderr
    assert "libllama.so" in cp.stderr and "unresolved" in cp.stderr


def test_ctrl_c_removes_the_container_and_exits_130(tmp_path, docker_host, toolchain_images, docker_client):
    src = fixture_copy(tmp_path)
    with open(src / "CMakeLists.txt", "a") as f:
        f.write("add_custom_target(slow ALL COMMAND sleep 120)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEXBUILD_", "DOCKER_"))}
    env["DOCKER_HOST"] = docker_host
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen([sys.executable, "-m", "hexbuild", "build", "-s", str(src), "--user", "1000:1000"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            live_log = src / "build-snapdragon" / "hexbuild-build.log.part"
            deadline = time.monotonic() + 120
            while not (live_log.exists() and "Building C object" in live_log.read_text(errors="replace")):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the build did not get going"
                time.sleep(0.2)
            assert containers(docker_client), "the build container should be running"
            t0 = time.monotonic()
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert time.monotonic() - t0 < 30
        assert "interrupted; the build container was removed" in err and "Traceback" not in err
        assert not containers(docker_client)
        assert not (src / "CMakeUserPresets.json").exists()
        assert (src / "build-snapdragon" / "hexbuild-build.log").exists()


def test_daemon_down_is_exit_3_and_one_line(tmp_path):
    src = fixture_copy(tmp_path, owner=None)
    cp = hexbuild("build", "-s", str(src), docker_host=f"unix://{tmp_path}/dead.sock")
    assert cp.returncode == 3
    errors = [l for l in cp.stderr.splitlines() if l.startswith("hexbuild: error:")]
    assert len(errors) == 1 and "no Docker engine answers" in errors[0] and "Traceback" not in cp.stderr
    assert not (src / "build-snapdragon").exists()


def test_absent_image_that_cannot_be_pulled_is_exit_3_naming_it(tmp_path, docker_host, docker_client):
    src = fixture_copy(tmp_path)
    image = "hexbuild.test/snapdragon-toolchain/arm64-android:v9.9"
    cp = hexbuild("build", "-s", str(src), "--image", image, "--json", docker_host=docker_host)
    assert cp.returncode == 3
    err = result_json(cp)["error"]
    assert image in err["message"] and "docker pull" in err["hint"]
    cp = hexbuild("build", "-s", str(src), "--image", image, "--pull", "never", docker_host=docker_host)
    assert cp.returncode == 3 and "--pull never" in cp.stderr
    assert not containers(docker_client)


def test_local_engine_runs_the_same_commands_here(tmp_path):
    """--engine local in an environment that has the toolchain: this machine's clang-19, cmake
    and ninja with the same NDK and Hexagon SDK (LLVM 21 for Hexagon) the toolchain double carries."""
    from tests.infra.toolchain_double import local_sdk

    src = fixture_copy(tmp_path, owner=None)
    sdk = local_sdk(tmp_path / "hexagon-sdk")
    env = {"ANDROID_NDK_ROOT": str(TOOLCHAIN / "android-ndk"), "HEXAGON_SDK_ROOT": str(sdk),
           "HEXAGON_TOOLS_ROOT": str(sdk / "tools" / "HEXAGON_Tools" / "21.1.8")}
    cp = hexbuild("build", "-s", str(src), "--engine", "local", "--htp", "v69,v73", "--json", env=env)
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    assert data["image"] is None and data["verify"]["ok"] and data["htp_versions"] == ["v69", "v73"]
    manifest = json.loads((Path(data["package"]) / "manifest.json").read_text())
    assert manifest["engine"] == "local" and manifest["image"] == {"reference": None, "digest": None}
    log = Path(data["log"]).read_text()
    assert f"-DCMAKE_PROJECT_ggml_INCLUDE={src}/build-snapdragon/hexbuild-htp-select.cmake" in log


@pytest.mark.parametrize("host_side", ["empty", "absent"])
def test_engine_that_cannot_see_the_checkout_is_exit_3(tmp_path, docker_host, toolchain_images, docker_client,
                                                       host_side):
    """Docker-in-Docker in miniature: hexbuild runs in its own mount namespace, where the checkout
    lives on a tmpfs the engine cannot see. The engine finds an empty directory (exit 97 from the
    build script) or nothing at all (the engine refuses the mount)."""
    base = tmp_path / "ns"
    base.mkdir()
    mountpoint = base / "llama-mini" if host_side == "empty" else base
    mountpoint.mkdir(exist_ok=True)
    script = (f"mount -t tmpfs hbx {shlex_quote(mountpoint)} && cp -a {shlex_quote(FIXTURE)} {shlex_quote(base)}/ && "
              f"exec {shlex_quote(sys.executable)} -m hexbuild build -s {shlex_quote(base / 'llama-mini')}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEXBUILD_", "DOCKER_"))}
    env["DOCKER_HOST"] = docker_host
    env["PYTHONPATH"] = str(REPO)
    cp = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                        text=True, env=env, timeout=120, cwd="/")
    assert cp.returncode == 3, cp.stderr
    assert "Docker-in-Docker" in cp.stderr and "--engine local" in cp.stderr and "Traceback" not in cp.stderr
    assert not containers(docker_client)


def shlex_quote(p) -> str:
    import shlex

    return shlex.quote(str(p))


def test_copy_mode_builds_without_a_bind_mount_and_stays_incremental(tmp_path, docker_host, toolchain_images,
                                                                     docker_client):
    """--transfer copy (what auto picks for a remote engine): the checkout goes in with
    put_archive into a per-checkout volume and the package comes out with get_archive."""
    from hexbuild.toolchain.transfer import volume_name

    src = fixture_copy(tmp_path)
    (src / "docs" / "extra.txt").write_text("deleted before the second build\n")
    (src / "models").mkdir()
    (src / "models" / "ggml-vocab-x.gguf").write_bytes(b"GGUF" + b"\0" * 1024)
    volume = volume_name(src.resolve())
    try:
        cp = hexbuild("build", "-s", str(src), "--transfer", "copy", "--user", "1000:1000", "--json", "-v",
                      docker_host=docker_host)
        assert cp.returncode == 0, cp.stderr
        data = result_json(cp)
        assert data["verify"]["ok"] and data["htp_versions"] == ["v68", "v69", "v73"]
        assert f"--volume {volume}:/workspace" in cp.stderr          # no bind mount of the checkout
        pkg = Path(data["package"])
        assert len(list((pkg / "lib").glob("libggml-htp-*.so"))) == 3 and (pkg / "manifest.json").is_file()
        assert not (src / "build-snapdragon" / "CMakeCache.txt").exists()  # the build dir lives in the volume

        (src / "docs" / "extra.txt").unlink()
        cp = hexbuild("build", "-s", str(src), "--transfer", "copy", "--user", "1000:1000", "--htp", "v73",
                      "--json", docker_host=docker_host)
        assert cp.returncode == 0, cp.stderr
        data = result_json(cp)
        assert sorted(p.name for p in (pkg / "lib").glob("libggml-htp-*.so")) == ["libggml-htp-v73.so"]
        log = Path(data["log"]).read_text()
        assert "Building C object src/" not in log                   # incremental: sources unchanged
        listing = docker_client.containers.run(toolchain_images["android"], ["sh", "-c", "ls docs models; true"],
                                               remove=True, volumes={volume: {"bind": "/w", "mode": "ro"}},
                                               working_dir="/w", network_mode="none").decode()
        assert "extra.txt" not in listing and ".gguf" not in listing  # deleted here, gone there; models skipped

        cp = hexbuild("build", "-s", str(src), "--transfer", "copy", "--user", "1000:1000", "--json",
                      docker_host=docker_host)
        assert cp.returncode == 0, cp.stderr
        assert len(list((pkg / "lib").glob("libggml-htp-*.so"))) == 3
        assert not containers(docker_client)
    finally:
        try:
            docker_client.volumes.get(volume).remove(force=True)
        except Exception:
            pass


def test_copy_mode_dry_run_and_auto_choice(tmp_path):
    from hexbuild.build import resolve_transfer

    assert resolve_transfer("auto", remote=True) == "copy" and resolve_transfer("auto", remote=False) == "mount"
    assert resolve_transfer("mount", remote=True) == "mount"
    src = fixture_copy(tmp_path, owner=None)
    data = result_json(hexbuild("build", "-s", str(src), "--transfer", "copy", "--dry-run", "--json"))
    assert data["transfer"] == "copy"
    assert data["container"]["mounts"][0]["type"] == "volume"
    assert data["container"]["mounts"][0]["source"].startswith("hexbuild-src-")
    assert "tar -xf /tmp/hexbuild-src.tar" in data["container"]["command"][2]
    assert "-UCMAKE_PROJECT_ggml_INCLUDE" in data["commands"][0]
    assert "put_archive" in data["note"]
