#!/usr/bin/env bash
# The one test command: installs what the tests need if it is missing (idempotent), then runs
# the whole suite. The daemons the tests use (a Docker engine, adbd virtual devices, sshd) are
# started by session fixtures in tests/infra/ and stopped by their PIDs when the run ends.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/test_source.py -k images
# HEXBUILD_TEST_LAVA=0 leaves the LAVA lab out (its chroot and tests/test_lab.py), for a quick local run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
cache="${HEXBUILD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hexbuild-tests}"
bash scripts/setup-test-env.sh --beside-tests
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
# (pyproject.toml's -ra: the closing summary lists every skipped test with its reason)
python3 -m pytest "${parallel[@]}" "$@"
rc=$?
set -e
# The jobs the setup left running beside the suite (the board's root filesystem, the LAVA chroot):
# their end is waited for here (a run that needed neither does not leave them behind), and a
# failure told.
for key in board-rootfs lava; do
  [ -f "$cache/setup-$key.pid" ] || continue
  pid=$(cat "$cache/setup-$key.pid")
  while [ ! -f "$cache/setup-$key.rc" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
  rm -f "$cache/setup-$key.pid"
  if [ "$(cat "$cache/setup-$key.rc" 2>/dev/null)" != 0 ]; then
    echo "test.sh: the setup's $key job beside the tests failed; $cache/setup-$key.log ends:" >&2
    tail -n 20 "$cache/setup-$key.log" >&2 || true
    [ $rc != 0 ] || rc=3
  fi
done
# pytest's 5 means no test ran: that is a failure here, not a pass.
exit $rc
