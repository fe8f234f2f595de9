"""scripts/toolchain-double.sh as a user meets it: a fresh clone's files, hexbuild installed from
them as a wheel (`pip install .`, as the README says) into a virtual environment without the
test extra, that environment's python3 first on PATH, and the script run from the clone. It sets
up an environment of its own (issue 38: it ran the user's python3, which had no pytest, and from
a wheel install no hexbuild.open_recipe for the checkout's hexbuild/), builds the double on the
test engine (here it is current: the suite's images, so it is tagged, not rebuilt) and tags it
as the images a real llama.cpp checkout pins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.infra.docker_engine import ANDROID_IMAGE, LINUX_IMAGE, cache_dir

REPO = Path(__file__).resolve().parent.parent


def fresh_clone(dest: Path) -> Path:
    """The checkout's tracked files as they are now, nothing else (no build trees, no .git)."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = REPO / rel
        if src.is_file() or src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)
    return dest


def test_the_script_builds_the_double_from_a_fresh_clone_with_a_wheel_install(tmp_path, docker_host, docker_client,
                                                                              toolchain_images, tree_0_3_28):
    clone = fresh_clone(tmp_path / "hexbuild")
    user = tmp_path / "venv"
    # a user's shell: none of this session's Python or engine settings
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HEXBUILD_", "PYTHON", "DOCKER_", "VIRTUAL_ENV"))}
    subprocess.run([sys.executable, "-m", "venv", str(user)], check=True, env=env)
    py = user / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(clone)],
                         capture_output=True, text=True, timeout=900, env=env)
    assert pip.returncode == 0, pip.stderr[-3000:]
    wheel = subprocess.run([str(py), "-c", "import hexbuild, hexbuild.open_recipe; print(hexbuild.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
    assert wheel.returncode == 0 and "site-packages" in wheel.stdout, wheel.stderr  # a wheel, not the clone
    assert subprocess.run([str(py), "-c", "import pytest"], capture_output=True, env=env).returncode != 0
    # hexbuild run from the clone beside that wheel: the checkout's hexbuild/ comes first on the path
    # and has no hexbuild.open_recipe (the wheel's package-dir mapping): it reads the clone's recipe
    here = subprocess.run([str(py), "-m", "hexbuild", "toolchain", "open", "--print"], capture_output=True,
                          text=True, cwd=clone, env=env)
    assert here.returncode == 0 and here.stdout.startswith("hexbuild/open-arm64-linux:"), here.stderr

    env.update(PATH=f"{user / 'bin'}:{env['PATH']}", DOCKER_HOST=docker_host, HEXBUILD_TEST_CACHE=str(cache_dir()))
    cp = subprocess.run(["bash", str(clone / "scripts" / "toolchain-double.sh"), "--source", str(tree_0_3_28)],
                        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "Traceback" not in cp.stderr and "No module named" not in cp.stderr
    lines = dict(line.split(": ", 1) for line in cp.stdout.splitlines())
    pinned = [ref for ref in lines["arm64-linux"].split() if ref != LINUX_IMAGE]
    assert pinned and ANDROID_IMAGE in lines["arm64-android"].split()
    # the tree's pinned Linux image is now the double, the same image as the suite's
    assert docker_client.images.get(pinned[0]).id == docker_client.images.get(LINUX_IMAGE).id
    venv = cache_dir() / "toolchain-double-venv"
    assert (venv / ".hexbuild-stamp").read_text().endswith(str(clone))
