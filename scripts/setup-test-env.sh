#!/usr/bin/env bash
# Installs what the test suite needs, idempotently: system packages (Docker engine, an image registry, adb/adbd,
# sshd, clang-19/lld-19 for genuine Hexagon and AArch64 ELF files, debootstrap), the Python
# package with its test extras, the llama.cpp source trees, LLVM 21 for Hexagon (the toolchain
# double's compilers, llvm-objdump-21), the open toolchain's, the kernel check's and the virtual
# board's root filesystems, and the LAVA lab's chroot (HEXBUILD_TEST_LAVA=0 leaves it out, for a
# quick local run).
# Safe to run again: each step checks before it acts.
# --beside-tests (scripts/test.sh; --board-beside-tests is the same): the jobs the first tests do not
# need (the virtual board's root filesystem, the LAVA chroot) are left running beside the suite.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${HEXBUILD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hexbuild-tests}"
beside=0
case "${1:-}" in --beside-tests|--board-beside-tests) beside=1 ;; esac
mkdir -p "$cache"
log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

need_root() { [ "$(id -u)" = 0 ] || { echo "setup-test-env.sh: system packages need root (apt-get)" >&2; exit 3; }; }

# --- Debian packages -------------------------------------------------------
debian_uri() {
  # The machine's own Debian mirror, read from its apt sources (never hard-coded here).
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/{u=$2} /^Suites:/{ if ($0 ~ /bookworm( |$)/ && u !~ /security/) { print u; exit } }' "$f"
  done | head -n1
  if [ -f /etc/apt/sources.list ]; then
    awk '$1=="deb" && $3=="bookworm" {print $2; exit}' /etc/apt/sources.list
  fi
}

missing=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_cmd dockerd || missing+=(docker.io)
have_cmd sshd || [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
have_cmd clang-19 || missing+=(clang-19)
have_cmd ld.lld-19 || missing+=(lld-19)
have_cmd debootstrap || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
{ have_cmd unshare && have_cmd nsenter; } || missing+=(util-linux)
have_cmd ssh-keygen || missing+=(openssh-client)
{ have_cmd ip && have_cmd tc; } || missing+=(iproute2)  # shaped USB-like links to virtual phones
have_cmd llvm-objdump-19 || missing+=(llvm-19)          # Hexagon disassembler for `hexbuild inspect`
have_cmd mksh || missing+=(mksh)                        # the virtual phone's /system/bin/sh
have_cmd toybox || missing+=(toybox)                    # the virtual phone's utilities (Android's toybox)
have_cmd mawk || missing+=(mawk)                        # the virtual phone's awk (Android's is not GNU either)
have_cmd zstd || missing+=(zstd)                        # an SSH board's decoder of zstd pushes (sshd_host)
[ -d /usr/aarch64-linux-gnu/lib ] && have_cmd aarch64-linux-gnu-g++ || missing+=(g++-aarch64-linux-gnu)  # AArch64 sysroot
backports=()
{ have_cmd adb && adb version 2>/dev/null | grep -q 'Version 3[4-9]'; } || backports+=(adb)
have_cmd adbd || [ -x /usr/bin/adbd ] || [ -x /usr/lib/android-sdk/platform-tools/adbd ] || backports+=(adbd)
# qemu-user 10 (static qemu-aarch64 for the qemu: target and binfmt_misc; qemu-hexagon)
{ have_cmd qemu-aarch64 && qemu-aarch64 --version | grep -q 'version \(9\|[1-9][0-9]\)\.'; } || backports+=(qemu-user)

if [ ${#missing[@]} -gt 0 ] || [ ${#backports[@]} -gt 0 ]; then
  need_root
  if [ ${#backports[@]} -gt 0 ] && ! grep -rqs bookworm-backports /etc/apt/sources.list.d/ /etc/apt/sources.list; then
    uri="$(debian_uri)"
    [ -n "$uri" ] || { echo "setup-test-env.sh: cannot find the Debian mirror in the apt sources" >&2; exit 3; }
    log "adding bookworm-backports from the machine's own mirror"
    cat > /etc/apt/sources.list.d/hexbuild-backports.sources <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  log "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if [ ${#backports[@]} -gt 0 ]; then
    log "installing ${backports[*]} from bookworm-backports"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t bookworm-backports "${backports[@]}" >/dev/null
  fi
fi

# --- an image registry (the pull tests start their own, on loopback) -------
# The package brings an init script and a systemd unit for a registry on every interface:
# policy-rc.d keeps the install from starting it, and it is disabled afterwards.
if ! have_cmd docker-registry; then
  need_root
  guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && guard=1
  fi
  log "installing docker-registry (service not started, not enabled)"
  rc=0
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null \
    || { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null; }; } \
    || rc=$?
  [ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || exit "$rc"
  update-rc.d docker-registry disable >/dev/null 2>&1 || true
fi

# --- the Python package ----------------------------------------------------
# Reinstalled when the dependencies change (pyproject.toml's hash) or another checkout is installed.
# The installed one is asked from / : from the checkout, `python3 -c` imports the checkout's own
# hexbuild/ (the working directory comes first on sys.path) and hides an install of another
# checkout, even one since deleted.
stamp="$cache/pyproject.sha256"
want="$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1) $here"
if ! (cd / && python3 -c 'import hexbuild, hexbuild.templates, pytest, hypothesis, docker, paramiko, elftools, gguf') 2>/dev/null \
   || [ "$(cd / && python3 -c 'import hexbuild,os;print(os.path.dirname(hexbuild.__file__))' 2>/dev/null)" != "$here/hexbuild" ] \
   || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "pip install -e .[test]"
  python3 -m pip install -q --disable-pip-version-check -e "$here[test]"
  printf '%s' "$want" > "$stamp"
fi

# What is missing below is made by jobs that run at once (downloads, debootstraps and qemu's
# second stage overlap: a new machine's setup took 6 min 10 s one after the other). Each job
# writes its own log in the cache; the first that fails stops the setup with its log's end.
job_pids=(); job_names=(); job_logs=()
start_job() {  # start_job KEY DESCRIPTION COMMAND...
  local key=$1 what=$2; shift 2
  log "$what"
  ("$@") > "$cache/setup-$key.log" 2>&1 &
  job_pids+=($!); job_names+=("$what"); job_logs+=("$cache/setup-$key.log")
}
wait_jobs() {
  local i failed=0
  for i in "${!job_pids[@]}"; do
    if ! wait "${job_pids[$i]}"; then
      echo "setup-test-env.sh: failed: ${job_names[$i]}; ${job_logs[$i]} ends:" >&2
      tail -n 20 "${job_logs[$i]}" >&2
      failed=1
    fi
  done
  job_pids=(); job_names=(); job_logs=()
  [ $failed = 0 ] || exit 3
}

# --- real llama.cpp trees (cached outside the repository) ------------------
fetch_tree() {
  local v=$1 dst="$cache/llama-cpp-python-$1" tmp
  tmp="$(mktemp -d)"
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$v"
  rm -rf "$dst.part" && mkdir -p "$dst.part"
  tar -xzf "$tmp"/llama_cpp_python-"$v".tar.gz -C "$dst.part" --strip-components=1
  rm -rf "$tmp" "$dst" && mv "$dst.part" "$dst"
}
for v in 0.3.20 0.3.28 0.3.36; do
  if [ ! -d "$cache/llama-cpp-python-$v/vendor/llama.cpp/ggml" ]; then
    start_job "tree-$v" "downloading llama-cpp-python $v source distribution" fetch_tree "$v"
  fi
done

# --- LLVM 21 for Hexagon v68-v79 (the toolchain double's Hexagon tools; llvm-objdump-21 for inspect) ---
# A self-contained tree from a Debian sid root filesystem, built once into the test cache
# (tests/infra/hexagon_tools.py): sid's clang/lld/llvm 21 run through sid's own loader, so the
# host keeps bookworm's libc. The host's llvm-objdump-21 is that tree's wrapper.
if ! (cd "$here" && HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.hexagon_tools build --check) >/dev/null 2>&1; then
  need_root
  start_job llvm21 "LLVM 21 tool tree for Hexagon (debootstrap sid + clang-21, lld-21, llvm-21, python3-minimal)" \
    env -C "$here" HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.hexagon_tools build
fi
# --- the open toolchain's root filesystem (hexbuild toolchain open, engine without a network) ---
# Built by hexbuild's own code (debootstrap + the recipe in docker/open-arm64-linux/) into the test
# cache; the open_image fixture imports it into the test engine in seconds. Keyed by the recipe.
if ! (cd "$here" && HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.real_build --rootfs --check) >/dev/null 2>&1; then
  need_root
  start_job open-rootfs "open toolchain root filesystem (debootstrap + clang-19, lld-19, llvm-19, cmake, ninja, ccache, AArch64 sysroot)" \
    env -C "$here" HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.real_build --rootfs
fi
# A job beside the suite (--beside-tests): its pid and, at its end, its exit code in the cache
# (setup-KEY.pid, setup-KEY.rc); the fixture that needs its result waits on the builder's lock,
# and scripts/test.sh waits for its end and reports its failure.
beside_or_job() {  # beside_or_job KEY DESCRIPTION COMMAND...
  local key=$1 what=$2; shift 2
  if [ "$beside" = 1 ]; then
    log "$what, beside the tests (log: $cache/setup-$key.log)"
    rm -f "$cache/setup-$key.rc"
    (set +e; "$@" > "$cache/setup-$key.log" 2>&1; echo $? > "$cache/setup-$key.rc") < /dev/null &
    echo $! > "$cache/setup-$key.pid"
  else
    start_job "$key" "$what" "$@"
  fi
}
# --- the kernel check's root filesystem (hexbuild test kernels, engine without a network) ---
# Debian sid with LLVM 21 and qemu-hexagon built from Debian's QEMU source with hexbuild's patches
# (qemu-hexagon-hvx/), by hexbuild's own code into the test cache; the kernel_image fixture waits
# on its builder's lock and imports it. Keyed by the recipe and the patches: minutes, once.
if ! (cd "$here" && HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.kernel_image --rootfs --check) >/dev/null 2>&1; then
  need_root
  beside_or_job kernel-rootfs "kernel check root filesystem (debootstrap sid + LLVM 21, qemu-hexagon with hexbuild's HVX patches)" \
    env -C "$here" HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.kernel_image --rootfs
fi
# --- virtual board root filesystem (Debian bullseye arm64, glibc 2.31) ------
# Beside the suite under scripts/test.sh: on a new machine it was the last job running, alone on
# one core for a minute and a half, while the suite could have started. The board fixture waits
# on its lock (tests/infra/board.py).
if [ ! -e "$cache/board-rootfs-bullseye-arm64/.hexbuild-rootfs-complete" ]; then
  need_root
  beside_or_job board-rootfs "building the virtual board's arm64 root filesystem (debootstrap under qemu, a few minutes)" \
    env -C "$here" HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.board build
fi
# --- a LAVA lab (tests/test_lab.py; HEXBUILD_TEST_LAVA=0 leaves it out) -------
# LAVA 2026.10 from trixie-backports in a trixie chroot with its database, and the AArch64 runtime
# its boards run the package with (tests/infra/lava_chroot.py). Beside the suite under
# scripts/test.sh: tests/test_lab.py comes late in its worker's queue, after the open build, and
# the lava_lab fixture waits on the chroot's lock.
if [ "${HEXBUILD_TEST_LAVA:-1}" != 0 ] \
   && ! (cd "$here" && HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.lava_chroot build --check); then
  need_root
  beside_or_job lava "building the LAVA lab's chroot (debootstrap trixie, LAVA 2026.10 and its database, minutes, once)" \
    env -C "$here" HEXBUILD_TEST_CACHE="$cache" python3 -m tests.infra.lava_chroot build
fi
wait_jobs
tools="$(cd "$here" && HEXBUILD_TEST_CACHE="$cache" python3 -c 'from tests.infra.hexagon_tools import tools_dir; print(tools_dir())')"
if [ "$(readlink /usr/local/bin/llvm-objdump-21 2>/dev/null)" != "$tools/bin/llvm-objdump" ] \
   || ! llvm-objdump-21 --version >/dev/null 2>&1; then
  need_root
  ln -sfn "$tools/bin/llvm-objdump" /usr/local/bin/llvm-objdump-21
  ln -sfn "$tools/bin/llvm-addr2line" /usr/local/bin/llvm-addr2line-21
fi
log "test environment ready (cache: $cache)"
