#!/bin/sh
# Builds hexbuild's stand-in libcdsprpc.so (the virtual NPU's host side) from this directory's
# sources: OUT/x86_64/libcdsprpc.so and OUT/aarch64/libcdsprpc.so.
#   build.sh OUT [x86_64] [aarch64]        (both when no architecture is named)
# Compilers: $CC_X86_64 (default cc), $CC_AARCH64 (default aarch64-linux-gnu-gcc if installed,
# else clang --target=aarch64-linux-gnu [--sysroot=$AARCH64_SYSROOT]).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 OUT [x86_64] [aarch64]" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
[ $# -gt 0 ] || set -- x86_64 aarch64
srcs="log.c rpcmem.c process.c session.c remote.c control.c dspqueue.c queue_rx.c unsupported.c"
cflags="-std=gnu11 -O2 -g -fPIC -fvisibility=hidden -pthread -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration ${EXTRA_CFLAGS:-}"
ldflags="-shared -pthread -Wl,-soname,libcdsprpc.so -Wl,--version-script=$here/exports.map -Wl,-z,defs"
for arch in "$@"; do
    case $arch in
    x86_64) cc=${CC_X86_64:-cc} ;;
    aarch64)
        if [ -n "${CC_AARCH64:-}" ]; then cc=$CC_AARCH64
        elif command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then cc=aarch64-linux-gnu-gcc
        else
            clang=$(command -v clang || command -v clang-21 || command -v clang-19 || true)
            [ -n "$clang" ] || { echo "build.sh: no AArch64 compiler (aarch64-linux-gnu-gcc or clang)" >&2; exit 1; }
            # Debian's cross layout (/usr/aarch64-linux-gnu, /usr/lib/gcc-cross) is found by the
            # driver itself; another sysroot (a toolchain image's) is named by AARCH64_SYSROOT.
            cc="$clang --target=aarch64-linux-gnu -fuse-ld=lld${AARCH64_SYSROOT:+ --sysroot=$AARCH64_SYSROOT}"
        fi ;;
    *) echo "build.sh: unknown architecture $arch (x86_64, aarch64)" >&2; exit 2 ;;
    esac
    mkdir -p "$out/$arch"
    tmp="$out/$arch/libcdsprpc.so.tmp"
    # shellcheck disable=SC2086
    (cd "$here" && $cc $cflags $srcs $ldflags -o "$tmp")
    mv -f "$tmp" "$out/$arch/libcdsprpc.so"
done
