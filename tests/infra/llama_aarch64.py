"""Real llama.cpp programs for AArch64 Linux, CPU backend only: test-backend-ops and
llama-perplexity from the real 0.3.36 build the suite already makes with the open toolchain
(``real_linux_package``, tests/infra/real_build.py), laid out as one directory of programs and
their shared libraries, run on the qemu: target.

The NPU cannot exist here, so these programs are the part of an NPU test that is real: the CPU
reference test-backend-ops compares against, and llama-perplexity's numbers."""

from pathlib import Path

import pytest

TOOLS = ("test-backend-ops", "llama-perplexity")


@pytest.fixture(scope="session")
def aarch64_llama_bin(real_linux_package, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("aarch64-llama-bin")
    for tool in TOOLS:
        (out / tool).symlink_to(real_linux_package / "bin" / tool)
    for lib in (real_linux_package / "lib").glob("lib*.so*"):
        (out / lib.name).symlink_to(lib)
    return out
