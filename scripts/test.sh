#!/usr/bin/env bash
# The one test command: installs what the tests need if it is missing (idempotent), then runs
# the whole suite. The daemons the tests use (a Docker engine, adbd virtual devices, sshd) are
# started by session fixtures in tests/infra/ and stopped by their PIDs when the run ends.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/test_source.py -k images
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup-test-env.sh
set +e
python3 -m pytest "$@"
rc=$?
set -e
# pytest's 5 means no test ran: that is a failure here, not a pass.
exit $rc
