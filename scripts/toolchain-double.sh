#!/usr/bin/env bash
# Builds hexbuild's toolchain double (the stand-in for the vendor's Snapdragon toolchain images, with
# real compilers: see docker/Dockerfile.toolchain-fixture) on the Docker engine DOCKER_HOST names (or
# the default socket), and tags it as the test suite's images and, with --source TREE, as the images
# that llama.cpp checkout pins, so `hexbuild build --source TREE` runs on it. Its SDK headers are
# this checkout's hexbuild/dsp/include (tests/infra/toolchain_double.py assembles the build context).
#
#   scripts/toolchain-double.sh [--source TREE]
#
# Its inputs come from the test cache (HEXBUILD_TEST_CACHE, default ~/.cache/hexbuild-tests), made by
# scripts/setup-test-env.sh: the open toolchain's root filesystem and LLVM 21's tool tree. Offline:
# the image build has no network. Exit 0 when tagged, 3 when an input or the engine is missing.
#
# It runs in a Python environment of its own (in the test cache): this checkout installed there
# editable, with pytest (the test infrastructure's modules import it), made when missing and again
# when pyproject.toml or the checkout changes. So it needs nothing of how hexbuild was installed
# for use (a wheel from `pip install .`, or none): only python3 with its venv module.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${HEXBUILD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hexbuild-tests}"
venv="$cache/toolchain-double-venv"
want="$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1) $here"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.hexbuild-stamp" 2>/dev/null)" != "$want" ]; then
  echo "toolchain-double: setting up its Python environment in $venv (once)" >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv" || {
    echo "toolchain-double: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 3; }
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$here" pytest >&2 || {
    echo "toolchain-double: installing this checkout into $venv failed" >&2; exit 3; }
  printf '%s' "$want" > "$venv/.hexbuild-stamp"
fi
cd "$here"
HEXBUILD_TEST_CACHE="$cache" exec "$venv/bin/python" -m tests.infra.toolchain_double "$@"
