"""hexbuild.toolchain: the container spec, the build log, presets, the CMake commands (run with
the real cmake), and the Docker engine against a real dockerd (tests/infra/docker_engine.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from hexbuild.errors import EnvironmentMissing, UsageError
from hexbuild.toolchain import commands as cmds
from hexbuild.toolchain.buildlog import BuildLog, diagnose, known_failures
from hexbuild.toolchain.engine import DockerEngine, is_remote
from hexbuild.toolchain.images import _follow_pull
from hexbuild.toolchain.presets import USER_PRESETS, PresetsCopy, plan_presets, preset_names
from hexbuild.toolchain.spec import ContainerSpec, Mount
from hexbuild.ui import ui

FIXTURE = Path(__file__).parent / "fixtures" / "llama-mini"
DOCS_PRESETS = "docs/backend/snapdragon/CMakeUserPresets.json"


@pytest.fixture(autouse=True)
def _quiet_ui(fresh_ui, monkeypatch):
    monkeypatch.setattr(fresh_ui, "quiet", True)


# -- the container spec ------------------------------------------------------------------------
def _spec(**kw) -> ContainerSpec:
    base = dict(name="hexbuild-build-1234", image="registry.test/tc/arm64-android@sha256:" + "a" * 64,
                command=["sh", "-c", "set -e\ncmake --preset 'x y' -B b\n"], user="1000:1000",
                mounts=[Mount("/src/my tree", "/workspace"), Mount("hexbuild-ccache", "/cache", type="volume")],
                env={"HOME": "/tmp", "CCACHE_DIR": "/cache"}, passthrough={"API_TOKEN": "s3cret value"})
    base.update(kw)
    return ContainerSpec(**base)


def test_docker_run_line_is_quoted_and_round_trips():
    spec = _spec()
    line = spec.docker_run_line()
    assert shlex.split(line) == spec.docker_run_argv()
    argv = shlex.split(line)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert "--volume" in argv and "/src/my tree:/workspace" in argv
    assert argv[argv.index("--platform") + 1] == "linux/amd64"
    assert argv[argv.index("--network") + 1] == "none"
    assert argv[-3:] == spec.command


def test_passthrough_values_never_appear_in_the_spec():
    spec = _spec()
    text = json.dumps(spec.to_json())
    assert "s3cret" not in text and "s3cret" not in spec.docker_run_line()
    assert spec.to_json()["env_passthrough"] == ["API_TOKEN"]
    assert "--env API_TOKEN" in spec.docker_run_line()
    assert spec.environment["API_TOKEN"] == "s3cret value"  # the container still gets it


@pytest.mark.parametrize("host,remote", [
    ("unix:///var/run/docker.sock", False), ("tcp://127.0.0.1:2375", False), ("tcp://localhost:2376", False),
    ("tcp://10.1.2.3:2376", True), ("ssh://builder@buildhost", True), ("npipe:////./pipe/docker_engine", False),
    ("tcp://127.0.0.2:2375", False), ("tcp://[::1]:2375", False), ("tcp://buildhost.example:2376", True),
])
def test_remote_engines_are_recognized(host, remote):
    assert is_remote(host) is remote


# -- the build log -----------------------------------------------------------------------------
def test_build_log_splits_chunks_tracks_ninja_and_renames(tmp_path):
    path = tmp_path / "b" / "hexbuild-build.log"
    log = BuildLog(path, echo=False)
    assert log.part.exists() and not path.exists()
    log.feed(b"-- Configuring done\n[1/40] Build")
    log.feed(b"ing C object a.o\r\n[2/40] Linking\n[1/5] sub-build\n\x1b[1mbold\x1b[0m\nno newline")
    assert log._total == 0  # no progress bar without __enter__
    log.close()
    assert path.exists() and not log.part.exists()
    lines = path.read_text().splitlines()
    assert lines == ["-- Configuring done", "[1/40] Building C object a.o", "[2/40] Linking", "[1/5] sub-build",
                     "bold", "no newline"]
    assert log.last(2) == ["bold", "no newline"]


def test_build_log_progress_keeps_the_outer_ninja_count(tmp_path):
    seen = []

    class Recorder:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            pass

        def add_task(self, *a, **k):
            return 0

        def update(self, task, **kw):
            seen.append((kw["completed"], kw["total"]))

    ui.quiet = False
    log = BuildLog(tmp_path / "l.log", echo=False)
    real = ui.progress
    ui.progress = lambda **k: Recorder()  # type: ignore[method-assign]
    try:
        with log:
            log.feed("[3/40] a\n[1/5] nested sub-build\n[4/40] b\n")
    finally:
        ui.progress = real  # type: ignore[method-assign]
    assert seen == [(3, 40), (4, 40)]


def test_build_log_replace_starts_over(tmp_path):
    log = BuildLog(tmp_path / "l.log", echo=False)
    log.feed("half of it\n")
    log.replace(b"all\nof it\n")
    log.close()
    assert (tmp_path / "l.log").read_text() == "all\nof it\n"


def test_known_failures_table_loads_and_matches():
    ids = [r.id for r in known_failures()]
    assert {"hexagon-sdk-missing", "stdio-h-older-image", "permission-denied"} <= set(ids)
    sdk = "CMake Error at ggml/src/ggml-hexagon/CMakeLists.txt:5 (message):\n  Make sure HEXAGON_SDK_ROOT point to the correct Hexagon SDK installation.\n"
    assert diagnose(sdk).id == "hexagon-sdk-missing"
    stdio = "tools/ui/embed.c:1:10: fatal error: 'stdio.h' file not found\n"
    assert diagnose(stdio, image_older_than_pin=True).id == "stdio-h-older-image"
    assert diagnose(stdio, image_older_than_pin=False).id == "stdio-h"
    assert diagnose("CMake Error: Unable to (re)create the private pkgRedirects directory:\n").id == "permission-denied"
    assert diagnose("ninja: build stopped: subcommand failed.\n") is None


# -- presets -----------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    (root / "docs/backend/snapdragon").mkdir(parents=True)
    (root / DOCS_PRESETS).write_bytes((FIXTURE / DOCS_PRESETS).read_bytes())
    (root / "CMakePresets.json").write_bytes((FIXTURE / "CMakePresets.json").read_bytes())
    return root


def test_presets_copied_for_the_build_and_removed_after(tree):
    plan = plan_presets(tree, DOCS_PRESETS, "arm64-android-snapdragon-release")
    assert plan.action == "copy"
    with PresetsCopy(tree, plan):
        assert (tree / USER_PRESETS).read_bytes() == (tree / DOCS_PRESETS).read_bytes()
    assert not (tree / USER_PRESETS).exists()


def test_presets_copy_keeps_a_file_changed_during_the_build(tree):
    plan = plan_presets(tree, DOCS_PRESETS, "arm64-android-snapdragon-release")
    with PresetsCopy(tree, plan):
        (tree / USER_PRESETS).write_text('{"version": 5}')
    assert (tree / USER_PRESETS).read_text() == '{"version": 5}'


def test_identical_user_presets_are_used_and_kept(tree):
    (tree / USER_PRESETS).write_bytes((tree / DOCS_PRESETS).read_bytes())
    plan = plan_presets(tree, DOCS_PRESETS, "arm64-linux-snapdragon-debug")
    assert plan.action == "same"
    with PresetsCopy(tree, plan):
        pass
    assert (tree / USER_PRESETS).exists()


def test_a_different_user_file_with_the_preset_is_used(tree):
    mine = {"version": 5, "include": [DOCS_PRESETS],
            "configurePresets": [{"name": "my-own", "inherits": ["arm64-android-snapdragon-release"]}]}
    (tree / USER_PRESETS).write_text(json.dumps(mine))
    assert "arm64-android-snapdragon-release" in preset_names(tree / USER_PRESETS)  # through "include"
    plan = plan_presets(tree, DOCS_PRESETS, "my-own")
    assert plan.action == "user" and "differs" in plan.note
    before = (tree / USER_PRESETS).read_text()
    with PresetsCopy(tree, plan):
        pass
    assert (tree / USER_PRESETS).read_text() == before


def test_a_different_user_file_without_the_preset_stops_the_build(tree):
    (tree / USER_PRESETS).write_text(json.dumps({"version": 5, "configurePresets": [{"name": "x64-mine"}]}))
    with pytest.raises(UsageError) as e:
        plan_presets(tree, DOCS_PRESETS, "arm64-android-snapdragon-release")
    assert "differs" in e.value.message and "x64-mine" in e.value.hint
    (tree / USER_PRESETS).write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        plan_presets(tree, DOCS_PRESETS, "arm64-android-snapdragon-release")


def test_unknown_preset_is_a_usage_error(tree):
    with pytest.raises(UsageError, match="arm64-android-snapdragon-release"):
        plan_presets(tree, DOCS_PRESETS, "arm64-android-snapdragon-fast")


# -- the CMake commands and the HTP selection, with the real cmake ------------------------------
def test_script_stops_at_the_first_failure_and_checks_the_checkout(tmp_path):
    text = cmds.script([["true"], ["sh", "-c", "exit 3"], ["touch", "never"]])
    (tmp_path / "CMakeLists.txt").write_text("")
    cp = subprocess.run(["sh", "-c", text], cwd=tmp_path, capture_output=True, text=True)
    assert cp.returncode == 3 and not (tmp_path / "never").exists()
    assert "+ true" in cp.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    cp = subprocess.run(["sh", "-c", text], cwd=empty, capture_output=True, text=True)
    assert cp.returncode == cmds.NO_CHECKOUT_STATUS and "not visible" in cp.stderr


def test_configure_argv_selection_and_reset():
    sub = cmds.configure_argv(preset="p", build_dir="b", root="/workspace", htp_subset=["v73", "v79"],
                              reset_selection=False, build_type=None, cmake_args=["-DX=1"])
    assert sub == ["cmake", "--preset", "p", "-B", "b",
                   "-DCMAKE_PROJECT_ggml_INCLUDE=/workspace/b/hexbuild-htp-select.cmake",
                   "-DHEXBUILD_HTP_VERSIONS=v73;v79", "-DX=1"]
    full = cmds.configure_argv(preset="p", build_dir="b", root="/w", htp_subset=None, reset_selection=True,
                               build_type="RelWithDebInfo", cmake_args=[])
    assert full == ["cmake", "--preset", "p", "-B", "b", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                    "-UCMAKE_PROJECT_ggml_INCLUDE", "-UHEXBUILD_HTP_VERSIONS"]


MINI_GGML = """\
cmake_minimum_required(VERSION 3.20)
project(top C)
add_subdirectory(ggml)
install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/empty file;odd.txt" DESTINATION share)
"""
MINI_GGML_SUB = """\
project(ggml C)
add_subdirectory(hex)
"""
MINI_HEX = """\
set(SKELS)
foreach(V v68 v73 v79)
  add_custom_target(htp-${V} ALL COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_CURRENT_BINARY_DIR}/libggml-htp-${V}.so)
  list(APPEND SKELS ${CMAKE_CURRENT_BINARY_DIR}/libggml-htp-${V}.so)
endforeach()
install(FILES ${SKELS} TYPE LIB)
install(CODE "message(STATUS \\"arg:[\\" \\"\\" \\"]\\")")
"""


@pytest.mark.parametrize("select", [["v73"], ["v68", "v79"]])
def test_htp_selection_builds_and_installs_only_the_chosen_versions(tmp_path, select):
    src = tmp_path / "src"
    (src / "ggml" / "hex").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(MINI_GGML)
    (src / "ggml" / "CMakeLists.txt").write_text(MINI_GGML_SUB)
    (src / "ggml" / "hex" / "CMakeLists.txt").write_text(MINI_HEX)
    (src / "empty file;odd.txt").write_text("x")
    build = src / "b"
    build.mkdir()
    (build / cmds.HTP_SELECT_FILE).write_text(cmds.HTP_SELECT_CMAKE)
    configure = cmds.configure_argv(preset="unused", build_dir="b", root=str(src), htp_subset=select,
                                    reset_selection=False, build_type=None, cmake_args=[])
    configure = ["cmake", "-S", ".", "-G", "Ninja"] + configure[3:]  # no preset in this tiny project
    run = lambda argv: subprocess.run(argv, cwd=src, capture_output=True, text=True, timeout=120)  # noqa: E731
    cp = run(configure)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "hexbuild: building the NPU libraries for" in cp.stdout
    assert cmds.cache_has_selection(build)
    assert run(["cmake", "--build", "b"]).returncode == 0
    built = sorted(p.name for p in (build / "ggml" / "hex").glob("libggml-htp-*.so"))
    assert built == [f"libggml-htp-{v}.so" for v in select]
    cp = run(["cmake", "--install", "b", "--prefix", "pkg"])
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert sorted(p.name for p in (src / "pkg" / "lib").iterdir()) == [f"libggml-htp-{v}.so" for v in select]
    assert (src / "pkg" / "share" / "empty file;odd.txt").exists()  # other install() calls pass through
    assert "arg:[]" in cp.stdout

    # every version again: the selection leaves the cache and all are built and installed
    again = cmds.configure_argv(preset="unused", build_dir="b", root=str(src), htp_subset=None,
                                reset_selection=cmds.cache_has_selection(build), build_type=None, cmake_args=[])
    assert run(["cmake", "-S", ".", "-G", "Ninja"] + again[3:]).returncode == 0
    assert not cmds.cache_has_selection(build)
    assert run(["cmake", "--build", "b"]).returncode == 0
    assert run(["cmake", "--install", "b", "--prefix", "pkg2"]).returncode == 0
    assert sorted(p.name for p in (src / "pkg2" / "lib").iterdir()) == [
        "libggml-htp-v68.so", "libggml-htp-v73.so", "libggml-htp-v79.so"]


def test_htp_selection_of_a_version_the_tree_lacks_fails_configure(tmp_path):
    src = tmp_path / "src"
    (src / "ggml" / "hex").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(MINI_GGML.replace('install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/empty file;odd.txt" DESTINATION share)\n', ""))
    (src / "ggml" / "CMakeLists.txt").write_text(MINI_GGML_SUB)
    (src / "ggml" / "hex" / "CMakeLists.txt").write_text(MINI_HEX)
    (src / "b").mkdir()
    (src / "b" / cmds.HTP_SELECT_FILE).write_text(cmds.HTP_SELECT_CMAKE)
    argv = cmds.configure_argv(preset="x", build_dir="b", root=str(src), htp_subset=["v81"], reset_selection=False,
                               build_type=None, cmake_args=[])
    cp = subprocess.run(["cmake", "-S", ".", "-G", "Ninja"] + argv[3:], cwd=src, capture_output=True, text=True)
    assert cp.returncode != 0 and "no NPU library target htp-v81" in cp.stderr


# -- pull events (the stream itself is exercised against the real engine below) -----------------
def test_an_error_inside_the_pull_stream_raises():
    events = [{"status": "Pulling from tc/arm64-android", "id": "v0.7"},
              {"status": "Pulling fs layer", "id": "0123456789ab"},
              {"status": "Downloading", "id": "0123456789ab", "progressDetail": {"current": 10, "total": 100}},
              {"error": "unauthorized", "errorDetail": {"message": "unauthorized: authentication required"}},
              {"status": "never reached"}]
    with pytest.raises(EnvironmentMissing, match="authentication required"):
        _follow_pull(iter(events), lambda why: EnvironmentMissing(f"pull failed: {why}"))


def test_a_clean_pull_stream_completes():
    events = [{"status": "Pulling fs layer", "id": "0123456789ab"},
              {"status": "Downloading", "id": "0123456789ab", "progressDetail": {"current": 50, "total": 100}},
              {"status": "Pull complete", "id": "0123456789ab"},
              {"status": "Digest: sha256:" + "b" * 64}, {"status": "Status: Downloaded newer image"}]
    _follow_pull(iter(events), lambda why: EnvironmentMissing(why))


# -- the real Docker engine ------------------------------------------------------------------------
def test_engine_is_probed_once_into_engine_info(docker_host):
    engine = DockerEngine.connect(docker_host)
    try:
        info = engine.info
        assert info.host == docker_host and not info.remote and not info.rootless
        assert info.os == "linux" and info.arch in ("x86_64", "amd64")
        assert info.version.startswith("20.") or info.version[0].isdigit()
        assert float(info.api_version) >= 1.41 and info.ncpu >= 1
        assert info.to_json()["api_version"] == info.api_version
    finally:
        engine.close()


def test_rootless_engines_run_the_build_as_root_inside(docker_client):
    """The engine's own /version and /info, once as they are and once as a rootless engine
    reports itself (a rootless dockerd cannot be started in this test environment)."""
    from hexbuild.build import default_user
    from hexbuild.toolchain.engine import engine_info

    version, info = docker_client.version(), docker_client.info()
    plain = engine_info("unix:///x.sock", version, info)
    assert not plain.rootless and default_user(plain.rootless) == f"{os.getuid()}:{os.getgid()}"
    rootless = engine_info("unix:///x.sock", version,
                           {**info, "SecurityOptions": [*info.get("SecurityOptions", []), "name=rootless"]})
    assert rootless.rootless and default_user(rootless.rootless) == "0:0"


def test_unreachable_engine_is_environment_missing(tmp_path):
    with pytest.raises(EnvironmentMissing) as e:
        DockerEngine.connect(f"unix://{tmp_path}/no-such.sock")
    assert "no Docker engine answers" in e.value.message and "DOCKER_HOST" in e.value.hint


def test_local_image_is_used_and_its_digest_recorded(docker_host, toolchain_images, docker_client):
    engine = DockerEngine.connect(docker_host)
    try:
        img = engine.ensure_image(toolchain_images["android"], "never")
        assert img.os == "linux" and img.arch == "amd64" and not img.pulled
        # built locally: no registry digest, so the image ID stands for it
        assert img.digest == docker_client.images.get(toolchain_images["android"]).id
        by_id = engine.ensure_image(img.id, "missing")
        assert by_id.id == img.id
    finally:
        engine.close()


@pytest.mark.parametrize("policy", ["missing", "always"])
def test_missing_image_that_cannot_be_pulled_names_the_image(docker_host, policy):
    engine = DockerEngine.connect(docker_host)
    ref = "hexbuild.test/snapdragon-toolchain/arm64-android:v0.0-absent"
    try:
        with pytest.raises(EnvironmentMissing) as e:
            engine.ensure_image(ref, policy)
    finally:
        engine.close()
    assert ref in e.value.message and "pulling it failed" in e.value.message
    assert "docker pull" in e.value.hint and "--image" in e.value.hint


@pytest.fixture
def arm64_image(docker_client):
    """A local image built for linux/arm64 (its config says so), loaded with the engine's own
    image loader."""
    from tests.infra.registry import load_image

    ref = "hexbuild.test/snapdragon-toolchain/arm64-android:v0.0-arm64host"
    load_image(docker_client, ref, [{"etc/hexbuild-arm64": b"arm64\n"}], arch="arm64")
    assert docker_client.images.get(ref).attrs["Architecture"] == "arm64"
    yield ref
    docker_client.images.remove(ref, force=True)


def test_an_image_for_another_platform_is_refused(docker_host, arm64_image):
    engine = DockerEngine.connect(docker_host)
    try:
        with pytest.raises(EnvironmentMissing, match="is linux/arm64; the toolchain needs linux/amd64"):
            engine.ensure_image(arm64_image, "never")
        with pytest.raises(EnvironmentMissing, match="pulling it failed"):  # missing: tries the amd64 one
            engine.ensure_image(arm64_image, "missing")
    finally:
        engine.close()


def test_missing_image_with_pull_never(docker_host):
    engine = DockerEngine.connect(docker_host)
    try:
        with pytest.raises(EnvironmentMissing, match="--pull never"):
            engine.ensure_image("hexbuild.test/none:v1", "never")
    finally:
        engine.close()


def _containers(client, prefix="hexbuild-"):
    return [c.name for c in client.containers.list(all=True) if c.name.startswith(prefix)]


def test_run_streams_the_log_reports_the_exit_code_and_removes_the_container(docker_host, toolchain_images,
                                                                             docker_client, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "CMakeLists.txt").write_text("")
    os.chown(work, 1000, 1000)
    spec = ContainerSpec(name="hexbuild-test-run", image=toolchain_images["android"],
                         command=["sh", "-c", "echo one; id -u; echo two >&2; touch made-here; "
                                              "[ \"$HOME\" = /tmp ] && printf 'no newline'; exit 7"],
                         user="1000:1000", mounts=[Mount(str(work), "/workspace")], env={"HOME": "/tmp"})
    engine = DockerEngine.connect(docker_host)
    started = []
    try:
        with BuildLog(tmp_path / "run.log", echo=False) as log:
            rc = engine.run(spec, log, on_started=started.append)
    finally:
        engine.close()
    assert rc == 7 and started == ["hexbuild-test-run"]
    lines = (tmp_path / "run.log").read_text().splitlines()
    assert sorted(lines) == sorted(["one", "1000", "two", "no newline"])  # stdout and stderr both
    stdout = [l for l in lines if l != "two"]                               # (their interleaving is the engine's)
    assert stdout == ["one", "1000", "no newline"]
    assert (work / "made-here").stat().st_uid == 1000
    assert "hexbuild-test-run" not in _containers(docker_client)


def test_run_has_no_network_and_only_its_environment(docker_host, toolchain_images, tmp_path, monkeypatch):
    monkeypatch.setenv("HEXBUILD_SHOULD_NOT_LEAK", "1")
    spec = ContainerSpec(name="hexbuild-test-env", image=toolchain_images["android"],
                         command=["sh", "-c", "env | sort; cat /proc/net/dev | tail -n +3 | cut -d: -f1"],
                         user="0:0", mounts=[], env={"HOME": "/tmp"}, passthrough={"PASSED": "yes"})
    engine = DockerEngine.connect(docker_host)
    try:
        log = BuildLog(tmp_path / "env.log", echo=False)
        assert engine.run(spec, log) == 0
        log.close()
    finally:
        engine.close()
    text = (tmp_path / "env.log").read_text()
    assert "PASSED=yes" in text and "HOME=/tmp" in text
    assert "HEXBUILD_SHOULD_NOT_LEAK" not in text and "_PROXY" not in text.upper().replace("NO_PROXY", "")
    interfaces = [l.strip() for l in text.splitlines() if l.strip() in ("lo", "eth0")]
    assert interfaces == ["lo"]


def test_kept_container_survives_the_run(docker_host, toolchain_images, docker_client, tmp_path):
    spec = ContainerSpec(name="hexbuild-test-keep", image=toolchain_images["android"], command=["true"],
                         user="0:0", mounts=[], env={})
    engine = DockerEngine.connect(docker_host)
    try:
        log = BuildLog(tmp_path / "k.log", echo=False)
        assert engine.run(spec, log, keep=True) == 0
        log.close()
        assert "hexbuild-test-keep" in _containers(docker_client)
    finally:
        engine.close()
        docker_client.containers.get("hexbuild-test-keep").remove(force=True)


def test_cache_volume_is_created_writable_for_any_user(docker_host, toolchain_images, docker_client, tmp_path):
    name = f"hexbuild-test-cache-{os.getpid()}"
    engine = DockerEngine.connect(docker_host)
    try:
        engine.ensure_volume(name, toolchain_images["android"])
        engine.ensure_volume(name, toolchain_images["android"])  # second time: already there
        spec = ContainerSpec(name="hexbuild-test-cache", image=toolchain_images["android"],
                             command=["sh", "-c", "touch /cache/x && echo ok"], user="1000:1000",
                             mounts=[Mount(name, "/cache", type="volume")], env={})
        log = BuildLog(tmp_path / "c.log", echo=False)
        assert engine.run(spec, log) == 0
        log.close()
        assert (tmp_path / "c.log").read_text().strip() == "ok"
    finally:
        engine.close()
        docker_client.volumes.get(name).remove(force=True)
    assert not _containers(docker_client, "hexbuild-test-cache")
