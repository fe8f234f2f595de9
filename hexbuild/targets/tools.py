"""What the device side offers hexbuild's shell scripts: one cheap probe (a single device call)
for the programs and the flags those scripts use, with the shell's and toybox's versions.

Phones run mksh and toybox, boards a full Linux userland (GNU coreutils, dash or bash), some
images busybox. The scripts in posix.py, deploy/ and runner/ keep to what all of them share;
this probe names what a device lacks before anything is changed on it (``deploy`` refuses such a
device in one line), and ``doctor`` can show the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DeployFailed
from .base import Target

# Every program the device-side scripts call (sh builtins such as printf or [ may be programs
# on some devices; both count). Keep in step with posix.py and deploy/*.py. Not ``tr`` or
# ``awk``: Debian's toybox build has no tr, and awk is never toybox; only the Linux probe uses
# tr, and tolerates its absence.
REQUIRED = ("sh", "find", "stat", "sha256sum", "df", "ln", "mv", "rm", "mkdir", "chmod", "cp", "readlink",
            "dirname", "tail", "sed", "cat", "printf", "grep", "date")

# Flags that differ between implementations: (name reported when broken, shell test that
# succeeds only when the device's tool does what hexbuild's scripts need)
FEATURES = (
    ("stat -c FORMAT", 'x=$(stat -c "%s %a %Y %n" / 2>/dev/null) && case $x in [0-9]*" /") true;; *) false;; esac'),
    ("find -exec {} +", 'find / -maxdepth 0 -exec true {} + 2>/dev/null'),
    ("df -Pk", 'df -Pk / >/dev/null 2>&1'),
)

_PROBE = r'''for t in "$@"; do command -v "$t" >/dev/null 2>&1 || printf 'missing %s\n' "$t"; done
printf 'shell %s\n' "${KSH_VERSION:-${BASH_VERSION:-${ZSH_VERSION:-sh}}}"
v=$(toybox --version 2>/dev/null) && printf 'toybox %s\n' "$v"
v=$(busybox 2>/dev/null | head -n 1) && [ -n "$v" ] && printf 'busybox %s\n' "$v"
v=$(mv --version 2>/dev/null | head -n 1) && case $v in *GNU*) printf 'coreutils %s\n' "$v";; esac
'''


@dataclass
class DeviceTools:
    """What a device's userland offers hexbuild (from ``probe_tools``)."""

    shell: str = "sh"  # $KSH_VERSION (mksh), $BASH_VERSION, or "sh" (dash, ash)
    toybox: str | None = None  # "toybox 0.8.9" when there is a toybox
    busybox: str | None = None
    coreutils: str | None = None  # "mv (GNU coreutils) 9.1" when mv is GNU's
    missing: list[str] = field(default_factory=list)  # required programs not found
    broken: list[str] = field(default_factory=list)  # required flags the tools lack

    @property
    def userland(self) -> str:
        # by the mv the scripts run: a Debian board may have toybox installed beside coreutils
        return "gnu" if self.coreutils else "toybox" if self.toybox else "busybox" if self.busybox else "unknown"

    @property
    def problem(self) -> str | None:
        """One phrase naming what is lacking, or None when everything needed is there."""
        parts = []
        if self.missing:
            parts.append(("no " if len(self.missing) == 1 else "none of ") + ", ".join(self.missing))
        if self.broken:
            parts.append("no support for " + ", ".join(self.broken))
        return "; ".join(parts) or None

    def to_json(self) -> dict:
        return {"shell": self.shell, "toybox": self.toybox, "busybox": self.busybox, "coreutils": self.coreutils,
                "userland": self.userland, "missing": self.missing, "broken": self.broken}


def probe_tools(target: Target, timeout: float = 20.0) -> DeviceTools:
    """One device call: which required programs are missing, which flags are broken, and the
    versions of the shell and the tool suite."""
    checks = "\n".join(f"( {test} ) || printf 'broken %s\\n' {_sq(name)}" for name, test in FEATURES)
    res = target.capture(["sh", "-c", _PROBE + checks, "sh", *REQUIRED], timeout=timeout)
    tools = DeviceTools()
    if res.rc == 127 and not res.out:
        tools.missing = ["sh"]
        return tools
    for line in res.out.splitlines():
        key, _, value = line.partition(" ")
        if key == "missing":
            tools.missing.append(value)
        elif key == "broken":
            tools.broken.append(value)
        elif key in ("shell", "toybox", "busybox", "coreutils"):
            setattr(tools, key, value.strip())
    # a feature test fails too when its program is missing: name the program, once
    tools.broken = [b for b in tools.broken if b.split()[0] not in tools.missing]
    return tools


def require_tools(target: Target) -> DeviceTools:
    """``probe_tools``, or DeployFailed naming what the device lacks."""
    tools = probe_tools(target)
    if tools.problem:
        raise DeployFailed(f"{target.spec}: the device's tools lack what hexbuild needs: {tools.problem} "
                           f"(shell {tools.shell}, {tools.userland} userland)",
                           hint="install the missing tools on the device (toybox or coreutils) or deploy to another target")
    return tools


def _sq(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
