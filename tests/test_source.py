"""source.read_source and `hexbuild source info` on real llama.cpp trees."""

import shutil

import pytest

from hexbuild.errors import UsageError
from hexbuild.source import read_source


def test_0_3_36_facts(tree_0_3_36):
    f = read_source(tree_0_3_36)
    assert f.hexagon is True
    assert f.docs_dir == "docs/backend/snapdragon"
    assert f.presets_file == "docs/backend/snapdragon/CMakeUserPresets.json"
    assert {"arm64-android-snapdragon-release", "arm64-android-snapdragon-debug",
            "arm64-linux-snapdragon-release"} <= set(f.presets)
    assert f.images == {"android": "ghcr.io/snapdragon-toolchain/arm64-android:v0.7",
                        "linux": "ghcr.io/snapdragon-toolchain/arm64-linux:v0.7"}
    assert f.htp_versions == ["v73", "v75", "v79", "v81"]
    assert f.device_selection == {"ndev_var": "GGML_HEXAGON_NDEV", "devices_var": "GGML_HEXAGON_DEVICES"}
    assert "GGML_HEXAGON_OPSTAGE" not in f.env_vars and "GGML_HEXAGON_OPFILTER" in f.env_vars
    assert "scripts/snapdragon/build.py" in f.scripts and "scripts/snapdragon/run.py" in f.scripts
    assert not any(s.startswith("scripts/snapdragon/adb/") for s in f.scripts)
    assert "llama-completion" in f.tools and "test-backend-ops" in f.tools
    assert f.conventions["android"]["install_dir"] == "pkg-android/llama.cpp"
    assert f.preset_for("linux", "release") == "arm64-linux-snapdragon-release"


def test_0_3_20_facts(tree_0_3_20):
    f = read_source(tree_0_3_20)
    assert f.images == {"android": "ghcr.io/snapdragon-toolchain/arm64-android:v0.3", "linux": None}
    assert f.htp_versions == ["v68", "v69", "v73", "v75", "v79", "v81"]
    assert f.device_selection == {"ndev_var": "GGML_HEXAGON_NDEV", "devices_var": None}
    assert "GGML_HEXAGON_OPMASK" in f.env_vars
    assert sorted(s.rsplit("/", 1)[1] for s in f.scripts) == [
        "run-bench.sh", "run-cli.sh", "run-completion.sh", "run-mtmd.sh", "run-tool.sh"]
    assert f.conventions["android"] == {"build_dir": "build-snapdragon", "install_dir": "pkg-snapdragon/llama.cpp",
                                        "preset": "arm64-android-snapdragon-release",
                                        "doc": "docs/backend/snapdragon/README.md"}
    assert f.conventions["linux"] is None
    assert f.preset_for("linux", "release") is None


def test_revision_from_git(tree_0_3_36):
    # The sdist keeps the submodule's git metadata, so git describe answers.
    assert read_source(tree_0_3_36).revision


def test_no_git_no_revision(tmp_path, tree_0_3_20):
    copy = tmp_path / "llama.cpp"
    shutil.copytree(tree_0_3_20, copy, ignore=shutil.ignore_patterns(".git", "models", "tests", "tools", "examples"))
    assert read_source(copy).revision is None


def _mini_checkout(root):
    (root / "ggml" / "src").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "llama.h").write_text("")
    (root / "CMakeLists.txt").write_text("project(llama.cpp)\n")
    return root


def test_tree_without_hexagon(tmp_path):
    f = read_source(_mini_checkout(tmp_path))
    assert f.hexagon is False
    assert f.htp_versions == [] and f.images == {"android": None, "linux": None}


def test_images_from_ci_workflow_when_docs_name_none(tmp_path):
    root = _mini_checkout(tmp_path)
    (root / "ggml/src/ggml-hexagon").mkdir()
    (root / "ggml/src/ggml-hexagon/CMakeLists.txt").write_text("build_htp_skel(v79)\nbuild_htp_skel(v73)\n")
    wf = root / ".github/workflows"
    wf.mkdir(parents=True)
    (wf / "build-and-test-snapdragon.yml").write_text(
        "container:\n  image: 'ghcr.io/snapdragon-toolchain/arm64-linux:v0.9@sha256:" + "a" * 64 + "'\n")
    f = read_source(root)
    assert f.images["linux"] == "ghcr.io/snapdragon-toolchain/arm64-linux:v0.9@sha256:" + "a" * 64
    assert f.image_sources["linux"] == ".github/workflows/build-and-test-snapdragon.yml"
    assert f.images["android"] is None
    assert f.htp_versions == ["v73", "v79"]


@pytest.mark.parametrize("make", ["missing", "file", "not_checkout"])
def test_bad_source(tmp_path, make):
    target = tmp_path / "x"
    if make == "file":
        target.write_text("")
    elif make == "not_checkout":
        target.mkdir()
    with pytest.raises(UsageError):
        read_source(target)


def test_cli_json_interface(cli, tree_0_3_36):
    r = cli("source", "info", "--source", str(tree_0_3_36), "--json")
    assert r.rc == 0, r.err
    d = r.json
    for key in ("path", "revision", "hexagon", "docs_dir", "presets_file", "presets", "images", "htp_versions",
                "env_vars", "device_selection", "scripts"):
        assert key in d
    assert d["device_selection"]["devices_var"] == "GGML_HEXAGON_DEVICES"


def test_cli_human_output(cli, tree_0_3_20):
    r = cli("source", "info", "--source", str(tree_0_3_20))
    assert r.rc == 0 and "arm64-android:v0.3" in r.out and "v68" in r.out


def test_cli_no_hexagon_exit_0(cli, tmp_path):
    r = cli("source", "info", "--source", str(_mini_checkout(tmp_path)), "--json")
    assert r.rc == 0 and r.json["hexagon"] is False


def test_cli_default_is_cwd(cli, tree_0_3_36, monkeypatch):
    monkeypatch.chdir(tree_0_3_36)
    r = cli("source", "info", "--json")
    assert r.rc == 0 and r.json["htp_versions"] == ["v73", "v75", "v79", "v81"]
