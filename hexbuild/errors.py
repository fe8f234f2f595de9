"""Error classes and the exit codes they map to.

Every failure a user can cause or meet is one of these; the CLI prints ``message`` on one line
(plus ``hint`` when there is one) and exits with ``exit_code``. Anything else is a bug and exits
with INTERNAL. The table is documented in docs/exit-codes.md and checked against it in tests/test_docs.py.
"""

from __future__ import annotations

from typing import Any

OK = 0
INTERNAL = 1
USAGE = 2
ENVIRONMENT = 3
BUILD_FAILED = 4
VERIFY_FAILED = 5
PACKAGE_FAILED = 6
DEPLOY_FAILED = 7
REMOTE_FAILED = 8
PARSE_FAILED = 9
WARNINGS_FATAL = 10
REGRESSION = 11
CPU_FALLBACK = 12
TESTS_FAILED = 13
DEVICE_LOST = 14
BISECT_UNDECIDED = 15
LAB_FAILED = 16
INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    OK: "success",
    INTERNAL: "internal error (a bug in hexbuild; rerun with -v for the traceback)",
    USAGE: "usage or bad input: unknown option, bad value, bad config key or type, missing path",
    ENVIRONMENT: "environment missing: no Docker engine, no image, no adb, no device, no SSH",
    BUILD_FAILED: "the build failed inside the toolchain",
    VERIFY_FAILED: "verification of the built package failed",
    PACKAGE_FAILED: "packaging failed",
    DEPLOY_FAILED: "deploying to one or more targets failed",
    REMOTE_FAILED: "a command on a device failed (`run` passes the program's own exit code instead; a program "
                   "killed by signal N is 128+N, as a shell reports it)",
    PARSE_FAILED: "nothing recognizable in a log or model file",
    WARNINGS_FATAL: "warnings were raised and --strict makes them fatal",
    REGRESSION: "bench compare --fail-below found a regression beyond the noise of the repeats",
    CPU_FALLBACK: "the run fell back to the CPU: an HTP session it asked for did not open, or no weights "
                  "landed on an HTP buffer (--allow-cpu-fallback makes it a warning); on qemu+npu:, before any "
                  "session: the virtual NPU cannot run the install's skel (none for qemu.npu, or HMX code)",
    TESTS_FAILED: "`hexbuild test` found a failure: an op case failed, nothing was tested, or the perplexity "
                  "on the NPU is off the CPU's",
    DEVICE_LOST: "the device, or the connection to it, went away while serving (the forward is removed)",
    BISECT_UNDECIDED: "bisect named no single first bad commit: skipped revisions leave several, the bad revision "
                      "measured good, or the good one failed the gate",
    LAB_FAILED: "a device lab failed the job: it ended Incomplete or Canceled, no board took it within the queue "
                "timeout, it ran past its timeout, the lab refused the token or could not be reached",
    INTERRUPTED: "interrupted (Ctrl-C or SIGTERM, `serve` included); containers and partial files were "
                 "cleaned up",
}


def shell_status(code: int) -> int:
    """A process's status as a shell reports it: ``-N`` (Python's killed-by-signal-N) is 128+N
    (SIGABRT: 134), so that `run`'s exit code is the one `sh -c PROG` would give, never -N
    taken modulo 256 (250)."""
    return 128 - code if code < 0 else code


def signal_name(code: int | None) -> str | None:
    """The signal a shell's status 128+N names (134: SIGABRT), else None."""
    import signal

    if code is None or not 128 < code < 128 + 65:
        return None
    try:
        return signal.Signals(code - 128).name
    except ValueError:
        return None


class HexbuildError(Exception):
    """A failure with a message meant for the user, and the exit code it maps to."""

    exit_code: int = INTERNAL
    kind: str = "internal"

    def __init__(self, message: str, *, hint: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "message": self.message, "exit_code": self.exit_code}
        if self.hint:
            out["hint"] = self.hint
        if self.details:
            out["details"] = self.details
        return out


class UsageError(HexbuildError):
    exit_code = USAGE
    kind = "usage"


class ConfigError(UsageError):
    kind = "config"


class EnvironmentMissing(HexbuildError):
    exit_code = ENVIRONMENT
    kind = "environment"


class BuildFailed(HexbuildError):
    exit_code = BUILD_FAILED
    kind = "build"


class VerifyFailed(HexbuildError):
    exit_code = VERIFY_FAILED
    kind = "verify"


class PackageFailed(HexbuildError):
    exit_code = PACKAGE_FAILED
    kind = "package"


class DeployFailed(HexbuildError):
    exit_code = DEPLOY_FAILED
    kind = "deploy"


class RemoteFailed(HexbuildError):
    exit_code = REMOTE_FAILED
    kind = "remote"


class ParseFailed(HexbuildError):
    exit_code = PARSE_FAILED
    kind = "parse"


class WarningsFatal(HexbuildError):
    exit_code = WARNINGS_FATAL
    kind = "strict"


class RegressionFound(HexbuildError):
    exit_code = REGRESSION
    kind = "regression"


class CpuFallback(RemoteFailed):  # a run on a device that did not do what it was for
    exit_code = CPU_FALLBACK
    kind = "cpu-fallback"


class TestsFailed(HexbuildError):
    exit_code = TESTS_FAILED
    kind = "test"


class Interrupted(HexbuildError):
    exit_code = INTERRUPTED
    kind = "interrupted"


class DeviceLost(HexbuildError):
    """The device, or the link to it, went away while hexbuild serve was serving from it."""

    exit_code = DEVICE_LOST
    kind = "device-lost"


class BisectUndecided(HexbuildError):
    """hexbuild bisect ended without one first bad commit (the result says why and what is left)."""

    exit_code = BISECT_UNDECIDED
    kind = "bisect"


class LabFault(HexbuildError):
    """The device lab (LAVA) failed the job, not the build under test: an incomplete or canceled
    job, a job no board took, a refused token, a lab that cannot be reached. CI may retry these."""

    exit_code = LAB_FAILED
    kind = "lab"


class LabRefused(LabFault):
    kind = "lab-token"


class LabUnreachable(LabFault):
    kind = "lab-unreachable"


class LabTimeout(LabFault):
    kind = "lab-timeout"


class JobIncomplete(LabFault):
    kind = "lab-incomplete"
