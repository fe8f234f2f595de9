#!/bin/sh
# Installs packages.txt (next to this script) into a Debian bookworm system and gives the
# LLVM 19 tools the unversioned names llama.cpp's cmake/arm64-linux-clang.cmake calls them by.
# Run by the Dockerfile, and by hexbuild in a chroot when the engine has no network.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
packages="$(sed -e 's/#.*//' "$here/packages.txt" | tr -s ' \n' ' ')"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $packages
for tool in clang clang++ ld.lld llvm-ar llvm-ranlib llvm-nm llvm-strip llvm-objcopy llvm-objdump; do
  ln -sf "$tool-19" "/usr/bin/$tool"
done
apt-get clean
rm -rf /var/lib/apt/lists/*
clang --version >/dev/null
clang++ --target=aarch64-linux-gnu -fuse-ld=lld -x c++ -o /tmp/hexbuild-probe - <<'SRC'
#include <cstdio>
int main() { std::puts("ok"); return 0; }
SRC
rm -f /tmp/hexbuild-probe
