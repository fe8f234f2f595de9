"""What every target shares: a POSIX shell on the far side (Android's toybox/mksh, Linux coreutils).

File listing, hashing, linking, renaming and probing are small fixed ``sh -c`` scripts whose data
travel as positional arguments (``sh -c SCRIPT sh ARG...``), so no path is ever pasted into
script text; ``run`` quotes every argument with ``shlex.quote`` on its way to the device.
Transports (adb, ssh, local) only supply ``run``, ``push``, ``read_file`` and ``write_file``.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Mapping, Sequence

from ..errors import RemoteFailed, UsageError
from .base import ByteProgress, Captured, DeviceInfo, RemoteFile, Sent, Target
from .snapshot import Snapshot, parse_snapshot, snapshot_step, stat_line

# A device shell command is a service string of at most 64 KiB (4 hex digits); stay well below.
ARG_BUDGET = 24 * 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def shell_command(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """One POSIX sh command line that runs exactly ``argv`` (every element single-quoted) with
    ``env`` added, in ``cwd``. Environment names must be identifiers; no element may hold NUL."""
    if not argv:
        raise UsageError("nothing to run: empty command")
    parts = []
    for item in [*argv, *(env or {}).values(), *(env or {}).keys(), cwd or ""]:
        if "\x00" in str(item):
            raise UsageError("a command argument contains a NUL byte, which no program can receive")
    if cwd:
        parts.append(f"cd {shlex.quote(cwd)} &&")
    for k, v in (env or {}).items():
        if not _ENV_NAME.match(k):
            raise UsageError(f"not a valid environment variable name: {k!r}")
        parts.append(f"{k}={shlex.quote(str(v))}")
    # the program name is always quoted: unquoted, `A=B` would be an assignment and `if` or
    # `time` a shell keyword (shlex.quote leaves both bare)
    program = str(argv[0])
    parts.append("'" + program.replace("'", "'\\''") + "'")
    parts.extend(shlex.quote(str(a)) for a in argv[1:])
    return " ".join(parts)


def step_command(script: str | None, args: Sequence[str]) -> str:
    """One step of a chained device command: ``sh -c SCRIPT sh ARGS...``, or the argv itself
    when ``script`` is None; every element quoted."""
    return shell_command(["sh", "-c", script, "sh", *args] if script is not None else list(args))


def batches(args: Sequence[str], group: int = 1, budget: int = ARG_BUDGET) -> Iterable[list[str]]:
    """Split ``args`` (taken ``group`` at a time, e.g. src/dst pairs) into lists that fit a command."""
    out: list[str] = []
    size = 0
    for i in range(0, len(args), group):
        item = list(args[i:i + group])
        cost = sum(len(shlex.quote(a)) + 1 for a in item)
        if out and size + cost > budget:
            yield out
            out, size = [], 0
        out += item
        size += cost
    if out:
        yield out


_PROBE_LINUX = r'''printf 'machine %s\n' "$(cat /sys/devices/soc0/machine 2>/dev/null)"
printf 'dtmodel %s\n' "$(tr -d '\000' < /proc/device-tree/model 2>/dev/null)"
printf 'compatible %s\n' "$(tr '\000' ' ' < /proc/device-tree/compatible 2>/dev/null)"
printf 'abi %s\n' "$(uname -m)"
sed -n 's/^MemTotal:[^0-9]*\([0-9]*\).*/mem \1/p' /proc/meminfo
d=$1
while [ ! -d "$d" ]; do d=$(dirname "$d"); done
printf 'dfdir %s\n' "$d"
printf 'df %s\n' "$(df -Pk "$d" 2>/dev/null | tail -n 1)"'''
# glibc's version, read three ways (getconf is in libc-bin, which every glibc system has)
_GLIBC = r'''v=$(getconf GNU_LIBC_VERSION 2>/dev/null) && [ -n "$v" ] && { echo "$v"; exit 0; }
v=$(ldd --version 2>&1 | head -n 1) && case "$v" in *[Gg][Ll][Ii][Bb][Cc]*|*"GNU libc"*) echo "$v"; exit 0;; esac
for l in /lib/ld-linux-aarch64.so.1 /lib64/ld-linux-aarch64.so.1 /lib/aarch64-linux-gnu/ld-linux-aarch64.so.1; do
  [ -x "$l" ] && "$l" --version 2>/dev/null | head -n 1 && exit 0
done
exit 0'''
_LIST_STAT = r'''[ -d "$1" ] || exit 0
cd "$1" || exit 1
find . -type f -exec stat -c '%s %a %Y %n' {} +'''
_LIST_SHA = r'''[ -d "$1" ] || exit 0
cd "$1" || exit 1
find . -type f -exec sha256sum {} +'''
_SHA_FILES = r'''cd "$1" || exit 1
shift
for f in "$@"; do [ -f "$f" ] && sha256sum "$f"; done
exit 0'''
_DEST_KIND = r'''if [ -L "$1" ]; then printf 'link\n%s\n' "$(readlink "$1")"
elif [ -d "$1" ]; then echo dir
elif [ -e "$1" ]; then echo file
else echo missing; fi'''
_DF = r'''d=$1
while [ ! -d "$d" ]; do d=$(dirname "$d"); done
printf '%s\n' "$d"
df -Pk "$d" 2>/dev/null | tail -n 1 || df -k "$d" | tail -n 1'''
_LINK = r'''set -e
src=$1; dst=$2; shift 2
while [ $# -gt 0 ]; do
  ln -f "$src/$1" "$dst/$2"
  shift 2
done'''
# a file staged under a temporary name (stage_file) renamed into place: its mode came with it
RENAME_INTO_PLACE = 'mv -f "$1" "$2"'
_RM = r'''cd "$1" || exit 0
shift
rm -f "$@"'''


class ShellTarget(Target):
    """Target operations built on ``run`` + a POSIX shell."""

    spec: str
    default_timeout: float = 30.0

    # -- helpers ------------------------------------------------------------------------------
    def sh(self, script: str, *args: str, timeout: float | None = None, what: str = "a command",
           check: bool = True) -> Captured:
        res = self.capture(["sh", "-c", script, "sh", *args], timeout=timeout or self.default_timeout)
        if check and res.rc != 0:
            last = (res.err.strip() or res.out.strip()).splitlines()[-1:] or [f"exit code {res.rc}"]
            raise RemoteFailed(f"{what} failed on {self.spec}: {last[0]}")
        return res

    def sh_chain(self, steps: Sequence[tuple[str | None, Sequence[str]]], *, what: str = "a command",
                 timeout: float | None = None) -> Captured:
        """Several ``sh`` steps (script, args) in one remote call, each run only when the one before
        succeeded: a round trip to a phone costs more than the steps (every element quoted, as
        ``sh`` quotes its own); (None, argv) runs argv without an sh. Steps that would not fit
        one command line go in several calls."""
        lines = [step_command(script, args) for script, args in steps if script is None or script]
        res: Captured | None = None
        group: list[str] = []
        for line in lines + [""]:
            if group and (not line or sum(map(len, group)) + len(line) > ARG_BUDGET * 2):
                res = self.sh(" && ".join(group), timeout=timeout, what=what)
                group = []
            if line:
                group.append(line)
        return res if res is not None else Captured(0, b"", b"")

    def stage_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> str:
        """``data`` under a temporary name beside ``remote`` with ``mode``; that name (the caller
        renames it into place, e.g. in the same call as other steps: ``RENAME_INTO_PLACE``)."""
        tmp = self.temp_name(remote)
        self.write_file(tmp, data, mode=mode)
        return tmp

    def home(self) -> str:
        res = self.sh('printf %s "$HOME"', what="reading $HOME")
        return res.out or "/"

    def expand(self, path: str) -> str:
        if path == "~" or path.startswith("~/"):
            return self.home().rstrip("/") + path[1:]
        return path

    # -- listing ------------------------------------------------------------------------------
    def list_files(self, root: str, *, hashes: bool = True) -> dict[str, RemoteFile]:
        res = self.sh(_LIST_STAT, root, what=f"listing {root}", timeout=self.default_timeout * 4)
        files: dict[str, RemoteFile] = {}
        for line in res.out.splitlines():
            parsed = stat_line(line)
            if parsed:
                files[parsed.path] = parsed
        if hashes and files:
            for rel, digest in self.hash_tree(root).items():
                if rel in files:
                    files[rel].sha256 = digest
        return files

    def snapshot(self, paths: Sequence[str], *, like: str = "") -> dict[str, Snapshot]:
        """For each path, in one device call: what it is (missing|dir|file|link, and the link's
        target) and, when it is or leads to a directory, its files (size, mode, mtime). With
        ``like``, also every other path that starts with it, as ``listed=False`` (named only)."""
        script, args = snapshot_step(paths, like=like)
        res = self.sh(script, *args, what="inspecting " + ", ".join(paths), timeout=self.default_timeout * 4)
        return parse_snapshot(res.out)

    def ensure_dirs(self, dirs: Sequence[str]) -> None:
        """Make sure ``dirs`` exist before files are sent into them (transports whose send
        creates parents need nothing)."""

    def hash_tree(self, root: str) -> dict[str, str]:
        # hashing runs at disk speed on the device: allow for a few GB
        res = self.sh(_LIST_SHA, root, what=f"hashing {root}", timeout=max(self.default_timeout, 600))
        return _parse_sha(res.out)

    def hash_files(self, root: str, rels: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for chunk in batches([f"./{r}" for r in rels]):
            res = self.sh(_SHA_FILES, root, *chunk, what=f"hashing files in {root}", timeout=max(self.default_timeout, 600))
            out.update(_parse_sha(res.out))
        return out

    def dest_kind(self, path: str) -> tuple[str, str | None]:
        """("missing"|"dir"|"file"|"link", link target)."""
        res = self.sh(_DEST_KIND, path, what=f"inspecting {path}")
        lines = res.out.splitlines()
        kind = lines[0].strip() if lines else "missing"
        return kind, (lines[1] if kind == "link" and len(lines) > 1 else None)

    def free_bytes(self, path: str) -> tuple[str, int | None]:
        """(the existing directory measured, bytes available there)."""
        res = self.sh(_DF, path, what=f"measuring free space at {path}")
        lines = res.out.splitlines()
        where = lines[0] if lines else path
        return where, parse_df_available(lines[-1] if len(lines) > 1 else "")

    # -- changing files ----------------------------------------------------------------------
    def send_file(self, local: Path, remote: str, progress: ByteProgress | None = None) -> None:
        """Copy bytes only (parents created); modes are set in batches by the caller."""
        raise NotImplementedError

    def send_files(self, files: Sequence[tuple[Path, str, int]], progress: ByteProgress | None,
                   sent: Callable[[int, Sent | None], None]) -> None:
        """Copy each (local, remote, mode) in order; ``sent(i, how)`` once file ``i`` is on its
        way. Modes may be applied or not: the caller sets them in batches afterwards."""
        for i, (local, remote, _) in enumerate(files):
            sent(i, self.send_file(local, remote, progress))

    def push(self, local: Path, remote: str, *, mode: int | None = None,
             progress: ByteProgress | None = None) -> None:
        self.send_file(local, remote, progress)
        if mode is not None:
            self.sh('chmod "$1" "$2"', format(mode, "o"), remote, what=f"setting the mode of {remote}")

    def remove(self, paths: Sequence[str], *, recursive: bool = False) -> None:
        flag = "-rf" if recursive else "-f"
        for chunk in batches(list(paths)):
            self.sh(f"rm {flag} -- \"$@\"", *chunk, what="removing files")

    def remove_in(self, root: str, rels: Sequence[str]) -> None:
        for chunk in batches([f"./{r}" for r in rels]):
            self.sh(_RM, root, *chunk, what=f"removing files in {root}")

    def rename(self, src: str, dst: str) -> None:
        self.sh('mv -f "$1" "$2"', src, dst, what=f"renaming {src}")

    def link_files(self, src_root: str, dst_root: str, pairs: Sequence[tuple[str, str]], *,
                   make_dirs: bool = True) -> None:
        """Hard-link ``src_root/a`` to ``dst_root/b`` for each (a, b): unchanged files cost no
        bytes and no space in the new release."""
        dirs = sorted({str(PurePosixPath(dst_root, b).parent) for _, b in pairs}) if make_dirs else []
        for chunk in batches(dirs):
            self.mkdirs(*chunk)
        flat = [p for pair in pairs for p in pair]
        for chunk in batches(flat, group=2):
            self.sh(_LINK, src_root, dst_root, *chunk, what="linking unchanged files")

    def chmod_steps(self, root: str, by_mode: Mapping[int, Sequence[str]]) -> list[tuple[str | None, list[str]]]:
        """Set the modes of files under ``root`` ({mode: relative paths}): chmods for ``sh_chain``."""
        return [(None, ["chmod", format(mode, "o"), *chunk]) for mode, rels in by_mode.items()
                for chunk in batches([posixpath.join(root, r) for r in rels])]

    def link_steps(self, src_root: str, dst_root: str, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
        """``link_files`` (without making directories) as steps for ``sh_chain``."""
        flat = [p for pair in pairs for p in pair]
        return [(_LINK, [src_root, dst_root, *chunk]) for chunk in batches(flat, group=2)]

    def mkdirs(self, *paths: str) -> None:
        self.sh('mkdir -p -- "$@"', *paths, what="creating directories")

    def temp_name(self, remote: str) -> str:
        p = PurePosixPath(remote)
        return str(p.with_name(f".{p.name}.hexbuild-{os.urandom(4).hex()}"))

    # -- probing ------------------------------------------------------------------------------
    def installed(self, dest: str, raw: bytes | None | bool = False) -> dict | None:
        """What hexbuild installed at ``dest`` before (from its manifest there, ``raw`` when the
        caller read it: None for none), or None."""
        from .tools import installed_summary

        if raw is False:
            raw = self.read_file(f"{dest.rstrip('/')}/.hexbuild/manifest.json")
        return installed_summary(raw)

    def glibc_version(self) -> str | None:
        if self.os != "linux":
            return None
        from ..artifacts.glibc import parse_version

        res = self.sh(_GLIBC, what="reading the glibc version", check=False)
        return parse_version(res.out) if res.rc == 0 else None

    def probe_linux(self, dest: str, *, serial: str | None = None) -> DeviceInfo:
        """Facts of a Linux machine: the SoC from /sys/devices/soc0 or the device tree."""
        from . import socs

        from .tools import INSTALLED_SCRIPT, PROBE_SCRIPT, parse_tools, split_installed

        res = self.sh(_PROBE_LINUX + "\n" + PROBE_SCRIPT + "\n" + INSTALLED_SCRIPT, dest, what="probing the machine")
        out, manifest = split_installed(res.stdout)
        info = DeviceInfo(target=self.spec, kind=self.kind, os=self.os, state="ready", serial=serial)
        facts: dict[str, str] = {}
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            facts[key] = value.strip()
        if facts.get("mem", "").isdigit():
            info.ram_bytes = int(facts["mem"]) * 1024
        info.free_bytes = parse_df_available(facts.get("df", ""))
        info.extra["free_at"] = facts.get("dfdir")
        info.extra["installed"] = self.installed(dest, manifest)
        info.extra["tools"] = parse_tools(out).to_json()
        info.abi = facts.get("abi") or None
        info.model = facts.get("dtmodel") or None
        candidates = [facts.get("machine", "")]
        candidates += [c.split(",", 1)[1] for c in facts.get("compatible", "").split() if c.startswith("qcom,")]
        candidates = [c.upper() for c in candidates if c]
        known = next((c for c in candidates if socs.lookup(c)), None)
        info.soc = known or (candidates[-1] if candidates else None)
        info.htp_arch = socs.htp_arch(known) if known else None
        return info


def _parse_sha(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name:
            out[name[2:] if name.startswith("./") else name] = digest
    return out


def parse_df_available(line: str) -> int | None:
    """The "Available" column (1K blocks) of one ``df -Pk`` line, in bytes."""
    tokens = line.split()
    for i, tok in enumerate(tokens):
        if re.fullmatch(r"\d+%|-", tok) and i >= 1 and tokens[i - 1].isdigit():
            return int(tokens[i - 1]) * 1024
    return None


def not_ready_message(state: str) -> tuple[str, str]:
    """(what is wrong, how to fix it) for an adb device state other than ``device``."""
    if state == "unauthorized":
        return ("is unauthorized (this computer's adb key is not accepted)",
                "unlock the phone and accept the RSA key prompt (\"Allow USB debugging\"), then retry")
    if state == "offline":
        return ("is offline", "reconnect USB / adb reconnect (for a network device: adb connect HOST:PORT)")
    if state == "no permissions":
        return ("cannot be opened (no permissions)", "fix the udev rules for the phone (apt install android-udev-rules)")
    if state in ("recovery", "sideload", "bootloader", "rescue"):
        return (f"is in {state} mode", "reboot the phone into Android (adb reboot)")
    return (f"is in state {state!r}", "check `adb devices -l`")

