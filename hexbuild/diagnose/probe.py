"""One read-only shell script that gathers every device fact ``doctor --target`` needs, in a
single round trip. It runs under Android's mksh + toybox and Linux's dash/bash + coreutils alike
(only POSIX sh and applets both have); paths travel as arguments, never pasted into the script.
Nothing is written or changed on the device."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..targets.base import Target

# Arguments: SKEL_PATH, then KIND:PATH items (lib, node, shell: globs allowed). Only what
# toybox, busybox and coreutils all have (no tr: Debian's toybox build lacks it); the shell and
# tool versions come from the target's own probe (targets/tools.py).
_SCRIPT = r'''p() { printf '%s %s\n' "$1" "$2"; }
skel=$1; shift
p release "$(getprop ro.build.version.release 2>/dev/null)"
p sdk "$(getprop ro.build.version.sdk 2>/dev/null)"
if command -v getenforce >/dev/null 2>&1; then p selinux "$(getenforce 2>/dev/null)"
else p selinux "-"; fi
p context "$(id -Z 2>/dev/null)"
p uid "$(id -u 2>/dev/null)"
p user "$(id -un 2>/dev/null)"
p adsp "${ADSP_LIBRARY_PATH-<unset>}"
p glibc "$(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1)"
sed -n 's/^MemAvailable:[^0-9]*\([0-9]*\).*/memavail \1/p; s/^MemTotal:[^0-9]*\([0-9]*\).*/memtotal \1/p' /proc/meminfo 2>/dev/null
if [ -f "$skel" ]; then
  p skelsize "$(wc -c < "$skel")"
  p skelsha "$(sha256sum "$skel" 2>/dev/null | sed 's/ .*//')"
fi
[ -d "${skel%/*}" ] && p libdir yes
while [ $# -gt 0 ]; do
  kind=${1%%:*}; pat=${1#*:}; shift
  for f in $pat; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    t=file; [ -c "$f" ] && t=char; [ -L "$f" ] && [ ! -e "$f" ] && t=dangling
    rw=no; [ -r "$f" ] && [ -w "$f" ] && rw=yes
    printf '%s %s %s %s\n' "$kind" "$t" "$rw" "$f"
  done
done
exit 0'''


@dataclass
class Found:
    path: str
    type: str  # file | char | dangling
    rw: bool


@dataclass
class DeviceFacts:
    values: dict[str, str] = field(default_factory=dict)
    found: dict[str, list[Found]] = field(default_factory=dict)  # lib | node | shell

    def get(self, key: str) -> str:
        return self.values.get(key, "")

    def kb(self, key: str) -> int | None:
        v = self.get(key)
        return int(v) * 1024 if v.isdigit() else None


def gather(target: Target, *, skel: str, libraries: list[str], nodes: list[str], shells: list[str],
           timeout: float = 30.0) -> DeviceFacts:
    items = [f"lib:{p}" for p in libraries] + [f"node:{p}" for p in nodes] + [f"shell:{p}" for p in shells]
    res = target.capture(["sh", "-c", _SCRIPT, "sh", skel, *items], timeout=timeout)
    facts = DeviceFacts()
    for line in res.out.splitlines():
        key, _, rest = line.partition(" ")
        if key in ("lib", "node", "shell"):
            parts = rest.split(" ", 2)
            if len(parts) == 3:
                facts.found.setdefault(key, []).append(Found(parts[2], parts[0], parts[1] == "yes"))
        elif key and key not in facts.values:
            facts.values[key] = rest.strip()
    return facts
