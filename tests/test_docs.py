"""The documentation and CI examples say only true things about the CLI and the config:
every ```toml block loads with hexbuild's own config reader, and every `hexbuild ...` command
line (README, docs/**/*.md, docs/ci/*.yml) names real commands and options.

The checker itself (tests/doccheck.py) is tested here too, so that a broken checker cannot
pass everything."""

import re
from pathlib import Path

import pytest
import yaml

from hexbuild.config import OPTIONS
from hexbuild.errors import EXIT_CODES
from tests import doccheck, docpages

REPO = Path(__file__).resolve().parent.parent
MARKDOWN = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
CI_FILES = sorted((REPO / "docs" / "ci").glob("*.yml"))


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.fixture(scope="module")
def cli_root():
    from hexbuild.cli.main import build_cli

    return build_cli()


# -- the documents ---------------------------------------------------------------------------------
def test_there_is_something_to_check():
    assert (REPO / "README.md") in MARKDOWN and len(MARKDOWN) >= 4
    assert {p.name for p in CI_FILES} >= {"github-local-engine.yml", "github-docker.yml", "gitlab.yml"}


@pytest.mark.parametrize("path", MARKDOWN, ids=rel)
def test_markdown_toml_blocks_load(path, tmp_path):
    problems = [p for b in doccheck.toml_blocks(path.read_text(), rel(path))
                if (p := doccheck.check_toml(b, tmp_path)) is not None]
    assert problems == []


@pytest.mark.parametrize("path", MARKDOWN, ids=rel)
def test_markdown_commands_exist(path, cli_root):
    invocations = doccheck.markdown_invocations(path.read_text(), rel(path))
    assert doccheck.check_invocations(invocations, cli_root) == []


def test_readme_is_short_and_keeps_the_test_command():
    """The README says what hexbuild is, how to set up and the main workflows; the reference is
    under docs/. Its test command is the one CI runs."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    shell = [b.text for b in doccheck.fenced_blocks(text) if b.lang in doccheck.SHELL_LANGS]
    assert any(line.strip() == "scripts/test.sh" for block in shell for line in block.splitlines())
    assert "exec bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    for heading in ("## A phone on the desk", "## A CI release pipeline", "## No phone at all"):
        assert heading in text


# -- the command reference -----------------------------------------------------------------------
COMMAND_PAGES = sorted(p for p in (REPO / "docs" / "commands").glob("*.md") if p.name != "README.md")


def test_every_command_has_its_page_and_every_option_its_row(cli_root):
    pages = [docpages.read_page(p, cli_root) for p in COMMAND_PAGES]
    assert docpages.check_page_options(pages, cli_root) == []
    # one page per command the user types, named after it
    top = {path[0] for path, _ in docpages.commands(cli_root)}
    assert {p.stem for p in COMMAND_PAGES} >= top
    for page in pages:
        assert page.sections and page.sections[0].level == 1 and page.sections[0].command, page.path.name
        assert page.sections[0].command[0] == page.path.stem


def test_the_option_check_can_fail(cli_root, tmp_path):
    page = tmp_path / "package.md"
    good = ("# `hexbuild package PKG`\n\n| option | setting | meaning |\n|---|---|---|\n"
            "| `-o`, `--output FILE` | | x |\n| `--os OS` | `build.os` | y |\n")
    page.write_text(good)
    pkg = [p for p, _ in docpages.commands(cli_root) if p == ("package",)]
    assert pkg and not [x for x in docpages.check_page_options([docpages.read_page(page, cli_root)], cli_root)
                        if x.startswith("package.md")]
    page.write_text(good.replace("| `--os OS` | `build.os` | y |\n", "| `--flavour X` | | z |\n"))
    problems = docpages.check_page_options([docpages.read_page(page, cli_root)], cli_root)
    assert "package.md: hexbuild package: options not on its page: --os" in problems
    assert "package.md: hexbuild package: the page lists options it does not have: --flavour" in problems
    page.write_text(good.replace("# `hexbuild package PKG`", "# Packaging"))
    assert "hexbuild package: no page has a heading naming it" in \
        docpages.check_page_options([docpages.read_page(page, cli_root)], cli_root)


def test_exit_codes_page_lists_every_code():
    text = (REPO / "docs" / "exit-codes.md").read_text()
    listed = {int(m) for m in re.findall(r"^\| (\d+) \|", text, re.M)}
    assert listed == set(EXIT_CODES)


def test_configuration_page_lists_every_setting():
    text = (REPO / "docs" / "configuration.md").read_text()
    listed = set(re.findall(r"^\| `([a-z_.]+)` \| `HEXBUILD_", text, re.M))
    assert listed == set(OPTIONS)


@pytest.mark.parametrize("path", MARKDOWN, ids=rel)
def test_relative_links_resolve(path, cli_root):
    assert docpages.check_links(path, cli_root) == []


def test_link_check_can_fail(cli_root, tmp_path):
    (tmp_path / "a.md").write_text("# Title `x`\n\n[ok](#title-x) [no](#nope) [gone](b.md) [web](https://x.org/y)\n")
    assert docpages.check_links(tmp_path / "a.md", cli_root) == ["a.md:3: #nope: no heading #nope",
                                                                  "a.md:3: b.md: no such file"]


def test_readme_shows_commands_and_config():
    text = (REPO / "README.md").read_text()
    assert doccheck.markdown_invocations(text, "README.md"), "README shows no hexbuild command"
    assert doccheck.toml_blocks(text, "README.md"), "README shows no config"


def _load_ci(path: Path):
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{rel(path)} is not a YAML mapping"
    return data


@pytest.mark.parametrize("path", CI_FILES, ids=rel)
def test_ci_example_commands_exist(path, cli_root):
    data = _load_ci(path)
    invocations = doccheck.yaml_invocations(data, rel(path))
    assert any(inv.argv[:1] == ["release"] for inv in invocations), f"{rel(path)} runs no hexbuild release"
    assert doccheck.check_invocations(invocations, cli_root) == []


@pytest.mark.parametrize("path", CI_FILES, ids=rel)
def test_ci_example_environment_is_settings(path):
    """A HEXBUILD_* variable that is not a setting makes hexbuild refuse to start."""
    valid = {o.env_var for o in OPTIONS.values()} | {"HEXBUILD_CONFIG"}
    found = list(doccheck.ci_env_vars(_load_ci(path)))
    bad = [(where, name) for where, name in found if name.startswith("HEXBUILD_") and name not in valid]
    assert bad == []


def test_github_local_engine_runs_in_the_pinned_toolchain():
    data = _load_ci(REPO / "docs" / "ci" / "github-local-engine.yml")
    assert set(data.get("on", data.get(True))) >= {"push", "workflow_dispatch"}
    build = data["jobs"]["build"]
    assert "needs.pin.outputs" in build["container"]["image"]
    releases = [inv for inv in doccheck.yaml_invocations(data, "x") if inv.argv[:1] == ["release"]]
    assert releases and all("--engine" in r.argv and r.argv[r.argv.index("--engine") + 1] == "local"
                            for r in releases)
    pin = " ".join(s.get("run", "") for s in data["jobs"]["pin"]["steps"])
    assert "hexbuild source info --json" in pin


def test_github_docker_builds_both_oses_without_a_container():
    data = _load_ci(REPO / "docs" / "ci" / "github-docker.yml")
    job = data["jobs"]["release"]
    assert "container" not in job and job["runs-on"] == "ubuntu-latest"
    releases = [inv for inv in doccheck.yaml_invocations({"jobs": {"release": job}}, "x")
                if inv.argv[:1] == ["release"]]
    assert releases and "--engine" not in releases[0].argv
    assert releases[0].argv[releases[0].argv.index("--os") + 1] == "android,linux"
    upload = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()"  # the report is kept when the release fails
    smoke = [inv for inv in doccheck.yaml_invocations(data["jobs"]["on-device"], "x") if "--smoke" in inv.argv]
    assert smoke


def test_gitlab_job_keeps_the_report_on_failure():
    data = _load_ci(REPO / "docs" / "ci" / "gitlab.yml")
    template = data[".hexbuild"]
    assert template["artifacts"]["when"] == "always" and "dist/" in template["artifacts"]["paths"]
    for job in ("release:android", "release:linux"):
        assert data[job]["extends"] == ".hexbuild" and data[job]["image"].startswith("$")


# -- the checker can fail ------------------------------------------------------------------------------
@pytest.mark.parametrize("line,problem", [
    ("hexbuild frobnicate", "no such command 'frobnicate'"),
    ("hexbuild config show --bogus", "no such option --bogus"),
    ("hexbuild config", "needs a subcommand"),
    ("hexbuild verify", "missing argument"),
    ("hexbuild verify a b", "unexpected argument"),
    ("hexbuild verify pkg --os", "--os needs a value"),
    ("hexbuild release --jobs many", "--jobs takes a number"),
    ("hexbuild release --json=yes", "--json takes no value"),
    ("$ hexbuild release --dist", "--dist needs a value"),
    ("CI=true hexbuild release --nope", "no such option --nope"),
    ("cd x && hexbuild release --nope | tee log", "no such option --nope"),
    ("python3 -m hexbuild release --nope", "no such option --nope"),
    ("hexbuild release \\\n  --nope", "no such option --nope"),
])
def test_checker_finds_problems(cli_root, line, problem):
    text = f"```sh\n{line}\n```\n"
    invocations = doccheck.markdown_invocations(text, "t.md")
    assert len(invocations) == 1
    problems = doccheck.check_invocations(invocations, cli_root)
    assert len(problems) == 1 and problem in problems[0], problems


@pytest.mark.parametrize("line", [
    "hexbuild --json source info --source ~/src/llama.cpp",
    "hexbuild source info --json -v",
    "hexbuild -vv config show",
    "hexbuild release --os=android -j8 --strict",
    "hexbuild release --no-strict -t adb -t adb:R5CT1234ABC --smoke 'llama-cli --version'",
    "hexbuild run tool -t adb --hex-hostbuf 0 -- test-backend-ops -o MUL_MAT",
    "hexbuild verify --help",
    "hexbuild release > out.json 2>&1",
])
def test_checker_accepts_valid_lines(cli_root, line):
    invocations = doccheck.markdown_invocations(f"```bash\n{line}\n```\n", "t.md")
    assert len(invocations) == 1
    assert doccheck.check_invocations(invocations, cli_root) == []


def test_checker_reads_only_commands():
    text = ("```console\n$ hexbuild release --bogus\nhexbuild: error: No such option: --bogus\n```\n"
            "```python\nhexbuild --bogus\n```\n"
            "```sh\npip install hexbuild   # not a hexbuild command line\n# hexbuild --commented-out\n```\n")
    invocations = doccheck.markdown_invocations(text, "t.md")
    assert [(i.where, i.argv) for i in invocations] == [("t.md:2", ["release", "--bogus"])]


def test_checker_toml(tmp_path):
    good = doccheck.Block("t.md", 3, "toml", '[build]\nos = "linux"\n')
    assert doccheck.check_toml(good, tmp_path) is None
    unknown = doccheck.Block("t.md", 9, "toml", '[build]\nflavour = "x"\n')
    assert "unknown key 'build.flavour'" in doccheck.check_toml(unknown, tmp_path)
    wrong = doccheck.Block("t.md", 12, "toml", "[deploy]\nndev = 99\n")
    assert "at most 16" in doccheck.check_toml(wrong, tmp_path)
    broken = doccheck.Block("t.md", 15, "toml", "[build\n")
    assert "not valid TOML" in doccheck.check_toml(broken, tmp_path)
    pyproject = doccheck.Block("t.md", 20, "toml", '[tool.hexbuild.build]\njobs = 8\n')
    assert doccheck.check_toml(pyproject, tmp_path) is None
    empty_pyproject = doccheck.Block("t.md", 25, "toml", '[tool.other]\nx = 1\n[tool.hexbuild]\n')
    assert "sets nothing" in doccheck.check_toml(empty_pyproject, tmp_path)


def test_checker_yaml_scripts():
    data = yaml.safe_load("""
jobs:
  a:
    env: {HEXBUILD_BUILD_OS: linux, HEXBUILD_NOPE: "1"}
    steps:
      - run: |
          echo hi
          hexbuild release \\
            --os android
      - run: hexbuild release --os ${{ matrix.os }} --dist "dist/${{ matrix.os }}"
  b:
    variables: {X: "1"}
    script:
      - hexbuild doctor --for build
      - echo "hexbuild inside a string is not a command"
""")
    invocations = doccheck.yaml_invocations(data, "w.yml")
    assert [i.argv for i in invocations] == [["release", "--os", "android"],
                                             ["release", "--os", "EXPRESSION", "--dist", "dist/EXPRESSION"],
                                             ["doctor", "--for", "build"]]
    assert sorted(name for _, name in doccheck.ci_env_vars(data)) == ["HEXBUILD_BUILD_OS", "HEXBUILD_NOPE", "X"]
