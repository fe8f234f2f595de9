#!/bin/sh
# Makes the kernel check's image from Debian sid (run by the Dockerfile, or by hexbuild in a
# chroot when the engine has no network):
#  1. the packages of packages.txt;
#  2. QEMU from Debian's source (qemu/*.tar.xz beside this script, fetched by hexbuild and
#     checked against the digests it pins) with Debian's patch series, then hexbuild's own
#     patches (qemu/patches/, GPL-2.0-or-later like QEMU) for the HVX float and qfloat
#     instructions and user DMA: only the hexagon-linux-user target, static, into
#     /opt/hexbuild/bin/qemu-hexagon;
#  3. the build-only packages removed again.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive
apt_opts="-o Acquire::Check-Valid-Until=false"  # a dated mirror snapshot is past its Valid-Until
all="$(sed -e 's/#.*//' "$here/packages.txt" | tr -s ' \n' ' ')"
build_only="$(sed -n '/^# build-only/,$p' "$here/packages.txt" | sed -e 's/#.*//' | tr -s ' \n' ' ')"
apt-get $apt_opts update -qq
# shellcheck disable=SC2086
apt-get $apt_opts install -y -qq --no-install-recommends $all

orig="$(ls "$here"/qemu/qemu_*.orig.tar.xz)"
debian="$(ls "$here"/qemu/qemu_*.debian.tar.xz)"
work=/tmp/hexbuild-qemu-build
rm -rf "$work" && mkdir -p "$work" && cd "$work"
tar -xf "$orig"
cd qemu-*
tar -xf "$debian"
grep -v '^#' debian/patches/series | while read -r p; do
  [ -n "$p" ] && patch -s -p1 < "debian/patches/$p"
done
for p in "$here"/qemu/patches/*.patch; do
  echo "applying $(basename "$p")"
  patch -s -p1 < "$p"
done
mkdir build && cd build
../configure --target-list=hexagon-linux-user --disable-system --disable-tools --disable-docs \
  --without-default-features --disable-werror --disable-install-blobs --static >configure.log 2>&1 \
  || { tail -n 40 configure.log; exit 1; }
ninja -j"$(nproc)" qemu-hexagon
install -D -m 0755 qemu-hexagon /opt/hexbuild/bin/qemu-hexagon
cd / && rm -rf "$work"

# shellcheck disable=SC2086
apt-get purge -y -qq $build_only >/dev/null
apt-get autoremove -y -qq --purge >/dev/null
apt-get clean
rm -rf /var/lib/apt/lists/*
for tool in clang ld.lld llvm-mc llvm-objdump llvm-nm; do
  ln -sf "$tool-21" "/usr/bin/$tool"
done
/opt/hexbuild/bin/qemu-hexagon -version
clang --target=hexagon -mv73 -mhvx -mhvx-length=128b -c -x c -o /tmp/hexbuild-probe.o - <<'SRC'
int f(int a) { return a + 1; }
SRC
rm -f /tmp/hexbuild-probe.o
