"""docs/ci/*.yml run as CI runs them: each job's steps, as written in the file, by sh in a fresh
git clone of the fixture project, with the job's environment (CI=true, and GITHUB_ACTIONS=true
or GITLAB_CI=true as the runner sets them; $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY), `hexbuild` on
PATH being this checkout. Only the steps that install hexbuild or system packages are left out
(this machine has them); so every `hexbuild` line of the examples, --strict under CI=true
included, must pass here as it would on a runner.

What cannot run here: github-docker.yml's on-device job smoke-tests an Android package on phones
attached to a self-hosted runner (the virtual phones run this machine's programs, not AArch64
Android ones); the same release line is run on a virtual phone in tests/test_release.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.test_release import FIXTURE, REPO, _local_toolchain_env, github

CI_DIR = REPO / "docs" / "ci"
INSTALLS = re.compile(r"pip install|python3 -m venv|apt-get|git config --global|export PATH=|>> \"\$GITHUB_PATH\"")


def load(name: str) -> dict:
    data = yaml.safe_load((CI_DIR / name).read_text())
    return data


@pytest.fixture
def clone(tmp_path) -> Path:
    """A fresh clone of the fixture project, tagged as a release tag would be (b5678)."""
    origin = tmp_path / "origin"
    subprocess.run(["cp", "-a", str(FIXTURE), str(origin)], check=True)
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost", "-c", "init.defaultBranch=main"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fixture"], ["tag", "b5678"]):
        subprocess.run([*git, *argv], cwd=origin, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(tmp_path / "checkout")], check=True)
    return tmp_path / "checkout"


@pytest.fixture
def on_path(tmp_path) -> str:
    """PATH with `hexbuild` this checkout's, as `pip install` would put one there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "hexbuild"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m hexbuild "$@"\n')
    wrapper.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def container_path(on_path: str, tmp_path: Path, os_name: str) -> str:
    """PATH as the toolchain container has it: its Linux side is the open toolchain's image,
    whose clang, clang++, ld.lld and llvm-ar name the LLVM 19 tools (installed here too)."""
    if os_name != "linux":
        return on_path
    tools = tmp_path / "container-bin"
    tools.mkdir(exist_ok=True)
    for name in ("clang", "clang++", "ld.lld", "llvm-ar", "llvm-ranlib"):
        if not (tools / name).exists():
            (tools / name).symlink_to(f"/usr/bin/{name}-19")
    return f"{on_path}:{tools}"


def github_steps(job: dict, matrix: dict[str, str]) -> list[str]:
    """The job's run: steps (GitHub expressions of its matrix filled in), installs left out."""
    out = []
    for step in job["steps"]:
        text = step.get("run")
        if not text or INSTALLS.search(text):
            continue
        for key, value in matrix.items():
            text = text.replace("${{ matrix.%s }}" % key, value)
        assert "${{" not in text, text
        out.append(text)
    return out


def gitlab_steps(template: dict) -> list[str]:
    return [t for t in [*template.get("before_script", []), *template["script"]] if not INSTALLS.search(t)]


def run_steps(steps: list[str], *, cwd: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("HEXBUILD_") and k not in ("CI", "GITHUB_ACTIONS", "GITLAB_CI")}
    if os.environ.get("HEXBUILD_TEST_CACHE"):
        clean["HEXBUILD_TEST_CACHE"] = os.environ["HEXBUILD_TEST_CACHE"]
    done = []
    for text in steps:
        cp = subprocess.run(["sh", "-e", "-c", text], cwd=cwd, env={**clean, **env}, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=900)
        assert cp.returncode == 0, f"step failed (exit {cp.returncode}):\n{text}\n{cp.stderr[-3000:]}"
        done.append(cp)
    return done


def check_release(dist: Path, os_names: list[str]) -> dict:
    import json

    report = json.loads((dist / "release-report.json").read_text())
    assert report["status"] == "ok" and report["strict"] is True and report["warnings"] == []
    assert sorted(a["os"] for a in report["artifacts"]) == sorted(os_names)
    assert all("-b5678-" in a["name"] for a in report["artifacts"])  # the clone's tag names them
    return report


@pytest.mark.parametrize("os_name", ["android", "linux"])
def test_github_local_engine_example(clone, on_path, tmp_path, os_name):
    """Its pin job (source info into $GITHUB_OUTPUT) and its build job (doctor, release --engine
    local) as GitHub Actions runs them in the toolchain container: here the stand-ins of that
    container's tools (tests/test_release.py's local toolchain)."""
    data = load("github-local-engine.yml")
    output = tmp_path / "github-output"
    env = {**github(tmp_path, GITHUB_OUTPUT=str(output)), "PATH": on_path}
    run_steps(github_steps(data["jobs"]["pin"], {}), cwd=clone, env=env)
    pinned = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert set(pinned) == {"android", "linux"} and all(pinned.values())
    env = {**_local_toolchain_env(tmp_path, clone), **data["jobs"]["build"]["env"],
           "PATH": container_path(on_path, tmp_path, os_name), "GITHUB_OUTPUT": str(output)}
    run_steps(github_steps(data["jobs"]["build"], {"os": os_name}), cwd=clone, env=env)
    check_release(clone / "dist", [os_name])


@pytest.mark.parametrize("os_name", ["android", "linux"])
def test_gitlab_example(clone, on_path, tmp_path, os_name):
    """Its .hexbuild template as GitLab runs a release:OS job: the image check against what the
    checkout pins (the CI/CD variable set as the file says), doctor, release --engine local."""
    data = load("gitlab.yml")
    job = data[f"release:{os_name}"]
    pinned = subprocess.run([sys.executable, "-m", "hexbuild", "source", "info", "--json", "--source", str(clone)],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    import json

    image = json.loads(pinned.stdout)["images"][os_name]
    env = {k: v for k, v in _local_toolchain_env(tmp_path, clone).items()
           if k not in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE")}
    env.update({**data[".hexbuild"]["variables"], **job["variables"], "GITLAB_CI": "true", "CI_JOB_IMAGE": image,
                "CI_PROJECT_DIR": str(clone), "PATH": container_path(on_path, tmp_path, os_name)})
    done = run_steps(gitlab_steps(data[".hexbuild"]), cwd=clone, env=env)
    assert "section_start:" in done[-1].stderr  # GitLab's collapsible sections
    check_release(clone / "dist" / os_name, [os_name])


@pytest.mark.docker
def test_github_docker_example(clone, on_path, tmp_path, docker_host, toolchain_images):
    """Its release job as GitHub Actions runs it on a hosted runner with Docker: doctor, then
    both OSes in one release, in the images the checkout pins (the fixture toolchain here)."""
    data = load("github-docker.yml")
    job = data["jobs"]["release"]
    env = {**github(tmp_path, GITHUB_WORKSPACE=str(clone), DOCKER_HOST=docker_host), **job["env"], "PATH": on_path}
    done = run_steps(github_steps(job, {}), cwd=clone, env=env)
    report = check_release(clone / "dist", ["android", "linux"])
    assert report["ci"] == "github" and "::group::build (android)" in done[-1].stderr
    assert (tmp_path / "step-summary.md").read_text().startswith("## hexbuild release: succeeded")
