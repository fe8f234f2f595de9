#!/usr/bin/env bash
# The one test command: installs what the tests need if it is missing (idempotent), then runs
# the whole suite. The daemons the tests use (a Docker engine, adbd virtual devices, sshd) are
# started by session fixtures in tests/infra/ and stopped by their PIDs when the run ends.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/test_source.py -k images
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
cache="${HEXBUILD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hexbuild-tests}"
bash scripts/setup-test-env.sh --board-beside-tests
# One pytest-xdist worker per core, at most HEXBUILD_TEST_WORKERS (default 2): a worker runs its own
# Docker engine on an image store of its own (2-3 GB each, kept in the test cache), so the files
# that count an engine's containers see only theirs. A file stays on one worker, longest first
# (tests/conftest.py). `scripts/test.sh -n 0` runs everything in this process.
workers=$(nproc 2>/dev/null || echo 1)
max=${HEXBUILD_TEST_WORKERS:-2}
[ "$workers" -gt "$max" ] && workers=$max
parallel=()
[ "$workers" -gt 1 ] && parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
set +e
python3 -m pytest "${parallel[@]}" "$@"
rc=$?
set -e
# The board's root filesystem, when the setup left it building beside the suite: its end is
# waited for here (a run that needed no board does not leave it behind), and its failure told.
if [ -f "$cache/setup-board-rootfs.pid" ]; then
  pid=$(cat "$cache/setup-board-rootfs.pid")
  while [ ! -f "$cache/setup-board-rootfs.rc" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
  rm -f "$cache/setup-board-rootfs.pid"
  if [ "$(cat "$cache/setup-board-rootfs.rc" 2>/dev/null)" != 0 ]; then
    echo "test.sh: building the virtual board's root filesystem failed; $cache/setup-board-rootfs.log ends:" >&2
    tail -n 20 "$cache/setup-board-rootfs.log" >&2 || true
    [ $rc != 0 ] || rc=3
  fi
fi
# pytest's 5 means no test ran: that is a failure here, not a pass.
exit $rc
