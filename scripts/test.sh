#!/usr/bin/env bash
# The one test command: installs what the tests need if it is missing (idempotent), then runs
# the whole suite. The daemons the tests use (a Docker engine, adbd virtual devices, sshd) are
# started by session fixtures in tests/infra/ and stopped by their PIDs when the run ends.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/test_source.py -k images
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup-test-env.sh
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
# pytest's 5 means no test ran: that is a failure here, not a pass.
exit $rc
