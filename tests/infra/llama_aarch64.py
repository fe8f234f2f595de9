"""Real llama.cpp programs for AArch64 Linux, CPU backend only: test-backend-ops and
llama-perplexity cross-built from the cached 0.3.36 tree with Debian's g++-aarch64-linux-gnu
(cached under ~/.cache/hexbuild-tests/llama-aarch64-0.3.36; the first build takes minutes), run
on the qemu: target. `python -m tests.infra.llama_aarch64` builds it outside pytest.

The NPU cannot exist here, so these programs are the part of an NPU test that is real: the CPU
reference test-backend-ops compares against, and llama-perplexity's numbers."""

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


VERSION = "0.3.36"
TARGETS = ("test-backend-ops", "llama-perplexity")
TOOLCHAIN = """set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
"""


def build_dir() -> Path:
    from tests.infra.trees import CACHE  # imported late: the plugin modules load in name order

    return CACHE / f"llama-aarch64-{VERSION}"


def ensure_built(log=sys.stderr) -> Path:
    """The bin/ directory with the programs (and their shared libraries), built if missing.
    LLAMA_AARCH64_TEST_BIN names an existing build of the same tree instead."""
    given = os.environ.get("LLAMA_AARCH64_TEST_BIN")
    if given:
        return Path(given)
    out = build_dir()
    done = out / "bin" / ".complete"
    if done.exists():
        return out / "bin"
    for tool in ("aarch64-linux-gnu-g++", "cmake", "ninja"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} missing: run scripts/setup-test-env.sh")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time across test processes
        if done.exists():
            return out / "bin"
        from tests.infra.trees import llama_tree

        src = llama_tree(VERSION)
        (out / "aarch64.cmake").write_text(TOOLCHAIN)
        cfg = ["cmake", "-S", str(src), "-B", str(out), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
               f"-DCMAKE_TOOLCHAIN_FILE={out / 'aarch64.cmake'}", "-DGGML_NATIVE=OFF",
               "-DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod", "-DGGML_OPENMP=OFF", "-DLLAMA_CURL=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=ON", "-DLLAMA_BUILD_SERVER=OFF"]
        subprocess.run(cfg, check=True, stdout=log, stderr=subprocess.STDOUT)
        subprocess.run(["ninja", "-C", str(out), f"-j{os.cpu_count() or 2}", *TARGETS], check=True,
                       stdout=log, stderr=subprocess.STDOUT)
        done.write_text("")
    return out / "bin"


@pytest.fixture(scope="session")
def aarch64_llama_bin() -> Path:
    return ensure_built()


if __name__ == "__main__":
    print(ensure_built(sys.stdout))
