"""Settings precedence: defaults < hexbuild.toml / [tool.hexbuild] < HEXBUILD_* < flags."""

import pytest

from hexbuild.config import OPTIONS, load
from hexbuild.errors import ConfigError


def test_defaults(tmp_path):
    s = load(env={}, cwd=tmp_path)
    assert s["build.os"] == "android" and s.origin("build.os") == "default"
    assert s.config_file is None


def test_precedence_file_env_flag(tmp_path):
    (tmp_path / "hexbuild.toml").write_text('[build]\nos = "linux"\njobs = 3\nbuild_type = "debug"\n')
    s = load(env={"HEXBUILD_BUILD_JOBS": "5"}, cwd=tmp_path, flags={"build.build_type": "relwithdebinfo"})
    assert (s["build.os"], s.origin("build.os")) == ("linux", "file")
    assert (s["build.jobs"], s.origin("build.jobs")) == (5, "env")
    assert (s["build.build_type"], s.origin("build.build_type")) == ("relwithdebinfo", "flag")


def test_pyproject_tool_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n[tool.hexbuild.deploy]\nndev = 4\n')
    s = load(env={}, cwd=tmp_path)
    assert s["deploy.ndev"] == 4 and s.config_file.name == "pyproject.toml"


def test_hexbuild_toml_wins_over_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.hexbuild.deploy]\nndev = 4\n')
    (tmp_path / "hexbuild.toml").write_text('[deploy]\nndev = 2\n')
    assert load(env={}, cwd=tmp_path)["deploy.ndev"] == 2


def test_foreign_pyproject_ignored(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.poetry]\nname = "llama"\n')
    assert load(env={}, cwd=tmp_path).config_file is None


def test_config_found_in_source_dir(tmp_path):
    src = tmp_path / "llama.cpp"
    src.mkdir()
    (src / "hexbuild.toml").write_text('[build]\nos = "linux"\n')
    s = load(env={}, cwd=tmp_path, flags={"source": str(src)})
    assert s["build.os"] == "linux"


def test_explicit_config_file(tmp_path):
    cfg = tmp_path / "ci.toml"
    cfg.write_text('[ci]\nstrict = true\n')
    assert load(env={}, cwd=tmp_path, config_file=cfg)["ci.strict"] is True


def test_env_list_and_bool(tmp_path):
    s = load(env={"HEXBUILD_BUILD_HTP": "v73, v79", "HEXBUILD_CI_STRICT": "yes"}, cwd=tmp_path)
    assert s["build.htp"] == ["v73", "v79"] and s["ci.strict"] is True


@pytest.mark.parametrize("text, words", [
    ('[build]\nflavour = "x"\n', ["unknown key", "build.flavour", "build.os"]),
    ('[bulid]\nos = "linux"\n', ["unknown section", "bulid"]),
    ('[build]\njobs = "four"\n', ["build.jobs", "integer"]),
    ('[build]\nos = "ios"\n', ["build.os", "android, linux"]),
    ('[deploy]\nndev = 17\n', ["deploy.ndev", "at most 16"]),
    ('[build]\nhtp = "v73"\n', ["build.htp", "list of strings"]),
    ('[build\n', ["not valid TOML"]),
])
def test_bad_file(tmp_path, text, words):
    (tmp_path / "hexbuild.toml").write_text(text)
    with pytest.raises(ConfigError) as e:
        load(env={}, cwd=tmp_path)
    for w in words:
        assert w in e.value.message


def test_bad_env(tmp_path):
    with pytest.raises(ConfigError, match="HEXBUILD_BUILD_JOBS"):
        load(env={"HEXBUILD_BUILD_JOBS": "many"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="unknown environment variable HEXBUILD_BUIDL_OS"):
        load(env={"HEXBUILD_BUIDL_OS": "linux"}, cwd=tmp_path)


def test_virtual_npu_environment_is_not_a_setting(tmp_path):
    """A shell that runs programs on the virtual NPU by hand has its variables set; hexbuild runs."""
    env = {"HEXBUILD_VNPU_QEMU": "/q", "HEXBUILD_VNPU_RUNTIME": "/r", "HEXBUILD_VNPU_CPU": "v73",
           "HEXBUILD_VNPU_LOG": "1", "HEXBUILD_VNPU_FARF": "high", "HEXBUILD_TEST_VNPU_QEMU": "/q",
           "HEXBUILD_TEST_VNPU_RUNTIME": "/r"}
    assert load(env=env, cwd=tmp_path).values


def test_every_option_has_env_and_help():
    for o in OPTIONS.values():
        assert o.env_var.startswith("HEXBUILD_") and o.help
