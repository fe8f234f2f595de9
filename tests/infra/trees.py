"""Real llama.cpp source trees, from the llama-cpp-python source distributions on PyPI
(downloaded by scripts/setup-test-env.sh into the cache, never into the repository)."""

import os
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("HEXBUILD_TEST_CACHE", Path.home() / ".cache" / "hexbuild-tests"))


def llama_tree(version: str) -> Path:
    path = CACHE / f"llama-cpp-python-{version}" / "vendor" / "llama.cpp"
    if not (path / "ggml").is_dir():
        pytest.fail(f"llama.cpp tree {version} missing at {path}: run scripts/setup-test-env.sh")
    return path


@pytest.fixture(scope="session")
def tree_0_3_20() -> Path:
    return llama_tree("0.3.20")


@pytest.fixture(scope="session")
def tree_0_3_28() -> Path:
    return llama_tree("0.3.28")


@pytest.fixture(scope="session")
def tree_0_3_36() -> Path:
    return llama_tree("0.3.36")
