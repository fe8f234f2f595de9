"""One read-only shell script that gathers every device fact ``doctor --target`` needs, in a
single round trip. It runs under Android's mksh + toybox and Linux's dash/bash + coreutils alike
(only POSIX sh and applets both have); paths travel as arguments, never pasted into the script.
Nothing is written or changed on the device."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..targets.base import Target

# Arguments: OS (android|linux), SKEL_PATH, then KIND:PATH items (lib, node, shell: globs
# allowed). Only what toybox, busybox and coreutils all have (no tr: Debian's toybox build lacks
# it); the shell and tool versions come from the target's own probe (targets/tools.py). Every
# program start costs a fork on the device (about 10 ms on a phone), so values are printed by
# the programs themselves rather than through $(...) where a line is certain.
_SCRIPT = r'''os=$1; skel=$2; shift 2
if [ "$os" = android ]; then
  printf 'release '; getprop ro.build.version.release 2>/dev/null || echo
  printf 'sdk '; getprop ro.build.version.sdk 2>/dev/null || echo
else
  printf 'glibc '; { getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1; } | sed -n 1p
fi
if command -v getenforce >/dev/null 2>&1; then printf 'selinux '; getenforce 2>/dev/null || echo
else echo 'selinux -'; fi
printf 'context '; id -Z 2>/dev/null || echo
printf 'id '; id 2>/dev/null || echo
printf 'adsp %s\n' "${ADSP_LIBRARY_PATH-<unset>}"
sed -n 's/^MemAvailable:[^0-9]*\([0-9]*\).*/memavail \1/p; s/^MemTotal:[^0-9]*\([0-9]*\).*/memtotal \1/p' /proc/meminfo 2>/dev/null
if [ -f "$skel" ]; then
  printf 'skelsize '; wc -c < "$skel"
  printf 'skelsha '; sha256sum "$skel" 2>/dev/null || echo
fi
[ -d "${skel%/*}" ] && echo 'libdir yes'
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


def gather(target: Target, *, os_name: str, skel: str, libraries: list[str], nodes: list[str], shells: list[str],
           timeout: float = 30.0) -> DeviceFacts:
    items = [f"lib:{p}" for p in libraries] + [f"node:{p}" for p in nodes] + [f"shell:{p}" for p in shells]
    res = target.capture(["sh", "-c", _SCRIPT, "sh", os_name, skel, *items], timeout=timeout)
    facts = DeviceFacts()
    for line in res.out.splitlines():
        key, _, rest = line.partition(" ")
        if key in ("lib", "node", "shell"):
            parts = rest.split(" ", 2)
            if len(parts) == 3:
                facts.found.setdefault(key, []).append(Found(parts[2], parts[0], parts[1] == "yes"))
        elif key and key not in facts.values:
            facts.values[key] = rest.strip()
    facts.values["skelsha"] = facts.get("skelsha").split(" ")[0]
    ids = dict(re.findall(r"(\w+)=(\S+)", facts.get("id")))  # uid=0(root) gid=0(root) ...
    facts.values["uid"] = ids.get("uid", "").split("(")[0]
    facts.values["user"] = ids.get("uid", "").partition("(")[2].rstrip(")")
    return facts
