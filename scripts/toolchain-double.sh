#!/usr/bin/env bash
# Builds hexbuild's toolchain double (the stand-in for the vendor's Snapdragon toolchain images, with
# real compilers: see docker/Dockerfile.toolchain-fixture) on the Docker engine DOCKER_HOST names (or
# the default socket), and tags it as the test suite's images and, with --source TREE, as the images
# that llama.cpp checkout pins, so `hexbuild build --source TREE` runs on it.
#
#   scripts/toolchain-double.sh [--source TREE]
#
# Its inputs come from the test cache (HEXBUILD_TEST_CACHE, default ~/.cache/hexbuild-tests), made by
# scripts/setup-test-env.sh: the open toolchain's root filesystem and LLVM 21's tool tree. Offline:
# the image build has no network. Exit 0 when tagged, 3 when an input or the engine is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
exec python3 -m tests.infra.toolchain_double "$@"
