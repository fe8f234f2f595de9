"""The real Hexagon backend of a real tree, built by `hexbuild build` on the toolchain double.

Session fixture ``real_hexagon_package``: the 0.3.28 tree (a copy under the test cache,
``hexagon-build/llama.cpp-0.3.28``, whose build directory is kept) built as a user runs it on the
default (vendor) path: ``hexbuild build --os linux --htp v73,v79`` on the image the checkout
pins, which scripts/toolchain-double.sh's code tags as the double. Only llama-completion and what
it links, and the tools the virtual NPU's tests run, are built (``build.build_targets`` in a config file outside the checkout), and ccache is
the open build's (``open-ccache/``, tests/infra/real_build.py builds the same 0.3.28 tree with the
same clang-19 in the same image base), so a cold run compiles little of the host side. The skels
(libggml-htp-v73/v79.so) come from the tree's own HTP CMake with LLVM 21.

``python -m tests.infra.real_hexagon`` builds it outside pytest (prints the package).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra import real_build
from tests.infra.docker_engine import InfraError, cache_dir

TREE_VERSION = "0.3.28"
HTP = ("v73", "v79")
# test-backend-ops, llama-perplexity, llama-bench: test ops, test ppl and bench on the virtual NPU
TARGETS = ("llama-completion", "test-backend-ops", "llama-perplexity", "llama-bench")
BUILD_TIMEOUT = 3600


def tree_copy(cache: Path, version: str = TREE_VERSION) -> Path:
    """The tree's copy the real Hexagon build runs in (beside the open build's: two build trees)."""
    return real_build.tree_copy(cache, version, into="hexagon-build")


def config_file(cache: Path, htp: tuple[str, ...] = HTP) -> Path:
    """The build settings the fixture and the release test share (outside the checkout, so the
    checkout's files stay the tree's own and a second build with them is up to date). Other HTP
    lists (the inspect benchmark's v75 skel of 0.3.24) get a file of their own."""
    name = "hexbuild.toml" if tuple(htp) == HTP else f"hexbuild-{'-'.join(htp)}.toml"
    path = cache / "hexagon-build" / name
    text = (f'[build]\nbuild_targets = {json.dumps(list(TARGETS))}\ncache_volume = "{cache / "open-ccache"}"\n'
            f'htp = {json.dumps(list(htp))}\n')
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def env_for(docker_host: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_") or k == "HEXBUILD_TEST_CACHE"}
    env["DOCKER_HOST"] = docker_host
    for k in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "GITHUB_ACTIONS", "GITLAB_CI"):
        env.pop(k, None)
    return env


def ensure_double(client, tree: Path, cache: Path) -> None:
    """The double, tagged as the images ``tree`` pins (and the test suite's own tags)."""
    from tests.infra import toolchain_double
    from tests.infra.docker_engine import ANDROID_IMAGE, LINUX_IMAGE

    from tests.infra.real_build import _lock

    tags = {"arm64-android": [ANDROID_IMAGE], "arm64-linux": [LINUX_IMAGE]}
    for target, refs in toolchain_double.pinned_tags(tree).items():
        tags[target] = [*refs, *tags[target]]
    with _lock(cache / "toolchain-double.lock"):
        toolchain_double.ensure(client, cache, tags)


def build(docker_host: str, cache: Path, *, extra: list[str] | None = None, version: str = TREE_VERSION,
          htp: tuple[str, ...] = HTP, tree: Path | None = None) -> tuple[Path, dict, str]:
    """``hexbuild build --os linux`` of the tree copy (or of ``tree``: another copy, e.g. one with a
    bug planted) on the double; (package, JSON result, stderr)."""
    import docker

    from tests.infra.real_build import _lock

    tree = tree or tree_copy(cache, version)
    client = docker.DockerClient(base_url=docker_host, timeout=900)
    try:
        ensure_double(client, tree, cache)
    finally:
        client.close()
    argv = [sys.executable, "-m", "hexbuild", "--config", str(config_file(cache, htp)), "build", "--json", "--os", "linux",
            "--source", str(tree), *(extra or [])]
    with _lock(cache / "open-build.lock"):  # one build at a time in the shared ccache
        cp = subprocess.run(argv, capture_output=True, text=True, env=env_for(docker_host), stdin=subprocess.DEVNULL,
                            timeout=BUILD_TIMEOUT)
    if cp.returncode != 0:
        raise InfraError(f"the real Hexagon build of {tree} failed (exit {cp.returncode}):\n{cp.stderr[-4000:]}")
    result = json.loads(cp.stdout)
    return Path(result["package"]), result, cp.stderr


@pytest.fixture(scope="session")
def real_hexagon_build(docker_host, toolchain_images) -> tuple[Path, dict, str]:
    """(package, build result, build stderr) of the real 0.3.28 backend built on the double."""
    try:
        return build(docker_host, cache_dir())
    except (InfraError, subprocess.TimeoutExpired) as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def real_hexagon_package(real_hexagon_build) -> Path:
    return real_hexagon_build[0]


if __name__ == "__main__":
    host = os.environ.get("DOCKER_HOST")
    if not host:
        print("usage: DOCKER_HOST=unix:///... python -m tests.infra.real_hexagon", file=sys.stderr)
        sys.exit(2)
    pkg, res, err = build(host, cache_dir())
    print(err[-2000:], file=sys.stderr)
    print(pkg)
