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
from .base import DeviceInfo, Target

# Every program the device-side scripts call (sh builtins such as printf or [ may be programs
# on some devices; both count). Keep in step with posix.py and deploy/*.py. Not ``tr`` or
# ``awk``: Debian's toybox build has no tr, and awk is never toybox; only the Linux probe uses
# tr, and tolerates its absence.
REQUIRED = ("sh", "find", "stat", "sha256sum", "df", "ln", "mv", "rm", "mkdir", "chmod", "cp", "readlink",
            "dirname", "tail", "sed", "cat", "printf", "grep", "date")

# Flags that differ between implementations, as the probe names them when a tool lacks one.
FEATURES = ("stat -c FORMAT", "find -exec {} +", "df -Pk")

# Every program start costs a fork and an exec on the device, so the probe starts few: `command
# -v` and `echo` are shell builtins. Each flag is tested on its own program: toybox's find runs
# toybox applets named in -exec in-process, so `find -exec stat` would not test the stat on PATH.
# Every line starts with "tools " so the script can ride along in a target's own probe call
# (adb.py, posix.py: no extra round trip per deploy); the names are fixed identifiers.
PROBE_SCRIPT = ("for t in " + " ".join(REQUIRED) + "; do command -v \"$t\" >/dev/null 2>&1 || echo \"tools missing $t\"; done\n"
                + r'''echo "tools shell ${KSH_VERSION:-${BASH_VERSION:-${ZSH_VERSION:-sh}}}"
if command -v toybox >/dev/null 2>&1; then v=$(toybox --version 2>/dev/null) && echo "tools toybox ${v#toybox }"; fi
if command -v busybox >/dev/null 2>&1; then v=$(busybox 2>/dev/null) && echo "tools busybox ${v%%
*}"; fi
v=$(mv --version 2>/dev/null); case $v in *GNU*) echo "tools coreutils ${v%%
*}";; esac
x=$(stat -c "%s %a %Y %n" / 2>/dev/null)
case $x in [0-9]*" /") ;; *) echo "tools broken stat -c FORMAT";; esac
find / -maxdepth 0 -exec true {} + 2>/dev/null || echo "tools broken find -exec {} +"
df -Pk / >/dev/null 2>&1 || echo "tools broken df -Pk"''')


# what hexbuild installed at $1, read in the probe's own device call rather than one more
INSTALLED_SCRIPT = r'''m=$1/.hexbuild/manifest.json
if [ -f "$m" ]; then echo manifest-follows; cat "$m"; fi'''


def split_installed(stdout: bytes) -> tuple[str, bytes | None]:
    """A probe's output: its lines, and the bytes of the install's manifest (None: there is none)."""
    head, mark, manifest = stdout.partition(b"\nmanifest-follows\n")
    return head.decode("utf-8", "replace"), (manifest if mark else None)


def installed_summary(raw: bytes | None) -> dict | None:
    """The facts of an install's manifest that a probe reports (None: no manifest)."""
    import json

    try:
        doc = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (UnicodeDecodeError, ValueError):
        return {"error": "unreadable manifest"}
    if not isinstance(doc, dict):
        return None
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    revision = (doc.get("llama_cpp") or {}).get("revision") if isinstance(doc.get("llama_cpp"), dict) else None
    return {"release": doc.get("release"), "previous": doc.get("previous"), "deployed_at": doc.get("deployed_at"),
            "llama_cpp_revision": revision, "htp_versions": doc.get("htp_versions"), "ndev": doc.get("ndev"),
            "files": len(files), "bytes": sum(int(f.get("size", 0)) for f in files if isinstance(f, dict))}


@dataclass
class DeviceTools:
    """What a device's userland offers hexbuild (from ``probe_tools``)."""

    shell: str = "sh"  # $KSH_VERSION (mksh), $BASH_VERSION, or "sh" (dash, ash)
    toybox: str | None = None  # "0.8.9" when there is a toybox
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
        """The fields (what ``DeviceTools(**d)`` takes back); ``userland`` is derived."""
        return {"shell": self.shell, "toybox": self.toybox, "busybox": self.busybox, "coreutils": self.coreutils,
                "missing": self.missing, "broken": self.broken}


def parse_tools(text: str) -> DeviceTools:
    """The ``tools …`` lines of PROBE_SCRIPT's output (other lines are ignored)."""
    tools = DeviceTools()
    for line in text.splitlines():
        if not line.startswith("tools "):
            continue
        key, _, value = line[6:].partition(" ")
        if key == "missing":
            tools.missing.append(value)
        elif key == "broken":
            tools.broken.append(value)
        elif key in ("shell", "toybox", "busybox", "coreutils"):
            setattr(tools, key, value.strip())
    # a flag test fails too when its program is missing: name the program, once
    tools.broken = [b for b in tools.broken if b.split()[0] not in tools.missing]
    return tools


def probe_tools(target: Target, timeout: float = 20.0) -> DeviceTools:
    """One device call: which required programs are missing, which flags are broken, and the
    versions of the shell and the tool suite."""
    res = target.capture(["sh", "-c", PROBE_SCRIPT], timeout=timeout)
    if res.rc == 127 and not res.out:
        return DeviceTools(missing=["sh"])
    return parse_tools(res.out)


def require_tools(target: Target, info: DeviceInfo | None = None) -> DeviceTools:
    """What the device offers (from ``info.extra["tools"]`` when the target's probe already
    asked, else ``probe_tools``), or DeployFailed naming what it lacks."""
    known = (info.extra.get("tools") if info is not None else None)
    tools = DeviceTools(**known) if isinstance(known, dict) else probe_tools(target)
    if tools.problem:
        raise DeployFailed(f"{target.spec}: the device's tools lack what hexbuild needs: {tools.problem} "
                           f"(shell {tools.shell}, {tools.userland} userland)",
                           hint="install the missing tools on the device (toybox or coreutils) or deploy to another target")
    return tools
