"""Deploy/run targets and the ``--target`` grammar.

    adb                                   the one ready device on the local adb server
    adb:SERIAL                            a device on the local adb server (as `adb devices` names it)
    adb://HOST[:PORT][/SERIAL]            a device on the adb *server* at HOST:PORT (default 5037),
                                          what `adb -H HOST -P PORT` talks to
    adb+ssh://[USER@]HOST[:PORT][/SERIAL] a phone attached to HOST, reached over SSH (PORT is SSH's)
    ssh://[USER@]HOST[:PORT]              Linux on a Snapdragon board, over SSH/SFTP
    local:DIR                             a directory on this machine
    qemu[:DIR]                            a directory on this machine, AArch64 Linux programs run by
                                          qemu-aarch64 -L SYSROOT (default DIR under hexbuild's cache)

A spec that fits none of these is a UsageError that shows the right form with an example.
Making a target contacts nothing; the first remote call does.
"""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from ..errors import UsageError
from .base import DeviceInfo, RemoteFile, Target

FORMS = {
    "adb": ("adb or adb:SERIAL", "adb:R5CT1234ABC"),
    "adb://": ("adb://HOST[:PORT][/SERIAL]", "adb://192.168.1.20:5037/R5CT1234ABC"),
    "adb+ssh://": ("adb+ssh://[USER@]HOST[:PORT][/SERIAL]", "adb+ssh://me@lab-host/R5CT1234ABC"),
    "ssh://": ("ssh://[USER@]HOST[:PORT]", "ssh://root@rb3gen2.local:22"),
    "local:": ("local:DIR", "local:/tmp/llama.cpp"),
    "qemu": ("qemu[:DIR]", "qemu:/tmp/llama.cpp"),
}

__all__ = ["parse_target", "Target", "DeviceInfo", "RemoteFile", "FORMS"]


def _bad(spec: str, kind: str, why: str) -> UsageError:
    form, example = FORMS[kind]
    return UsageError(f"malformed target {spec!r}: {why}; expected {form}, e.g. {example}",
                      hint="target forms: " + ", ".join(f for f, _ in FORMS.values()))


def _setting(settings: Any, key: str, default: Any) -> Any:
    if settings is None:
        return default
    try:
        value = settings[key]
    except KeyError:
        return default
    return default if value in (None, "") else value


def _url(spec: str, kind: str, *, user_ok: bool, path_ok: bool):
    _require_ipv6_brackets(spec, kind)
    parts = urlsplit(spec)
    if parts.query or parts.fragment or "?" in spec or "#" in spec:
        raise _bad(spec, kind, "no ?query or #fragment is allowed")
    try:
        port = parts.port
    except ValueError:
        raise _bad(spec, kind, "the port must be a number from 1 to 65535") from None
    if parts.netloc.rsplit("@", 1)[-1].endswith(":"):
        raise _bad(spec, kind, "the port is empty")
    if port == 0:
        raise _bad(spec, kind, "the port must be a number from 1 to 65535")
    host = parts.hostname
    if not host:
        raise _bad(spec, kind, "the host is missing")
    if parts.password is not None:
        raise _bad(spec, kind, "passwords do not belong in a target (use keys or the SSH agent)")
    user = unquote(parts.username) if parts.username else None
    if user is not None and (not user_ok or not user):
        raise _bad(spec, kind, "a USER@ part is not allowed here" if not user_ok else "the user is empty")
    path = unquote(parts.path)
    serial = path[1:] if path.startswith("/") else path
    if serial and not path_ok:
        raise _bad(spec, kind, "no /path is allowed (the install directory is --dest)")
    if "/" in serial:
        raise _bad(spec, kind, f"{serial!r} is not a device serial")
    return user, host, port, serial or None


def _require_ipv6_brackets(spec: str, kind: str) -> None:
    """``ssh://root@fe80::1:22`` cannot be split into host and port: say how to write it."""
    import ipaddress

    scheme, _, rest = spec.partition("://")
    netloc, slash, path = rest.partition("/")
    user, at, hostport = netloc.rpartition("@")
    if hostport.startswith("[") or hostport.count(":") < 2:
        return
    prefix, suffix = f"{scheme}://{user}{at}", slash + path
    head, _, tail = hostport.rpartition(":")

    def is_v6(text: str) -> bool:
        try:
            ipaddress.IPv6Address(text)
            return True
        except ValueError:
            return False

    forms = []
    if tail.isdigit() and is_v6(head):
        forms.append(f"{prefix}[{head}]:{tail}{suffix}")  # the likelier reading: the last group is a port
    if is_v6(hostport):
        forms.append(f"{prefix}[{hostport}]{suffix}")
    if not forms:
        return  # not an IPv6 address at all: the port check below says what is wrong
    raise _bad(spec, kind, "an IPv6 address needs brackets: " + " or ".join(forms))


def parse_target(spec: str, settings: Mapping[str, Any] | Any = None) -> Target:
    """A Target for ``spec`` (see the module docstring). ``settings`` supplies ssh.known_hosts,
    ssh.identity, ssh.timeout, deploy.timeout and linux.sysroot (defaults when None)."""
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError("empty target; expected one of " + ", ".join(f for f, _ in FORMS.values()),
                         hint="e.g. --target adb or --target adb:R5CT1234ABC")
    spec = spec.strip()
    timeout = float(_setting(settings, "ssh.timeout", 15.0))
    transfer = float(_setting(settings, "deploy.timeout", 600.0))
    known_hosts = _setting(settings, "ssh.known_hosts", "")
    identity = _setting(settings, "ssh.identity", "")
    if any(c in spec for c in "\n\r\t\x00"):
        raise UsageError(f"malformed target {spec!r}: control characters are not allowed")

    if spec == "adb" or spec.startswith("adb:") and not spec.startswith("adb://"):
        serial = spec[4:] if spec.startswith("adb:") else None
        if spec.startswith("adb:") and not serial:
            raise _bad(spec, "adb", "the serial after 'adb:' is empty")
        if serial is not None and (" " in serial or "/" in serial):
            raise _bad(spec, "adb", f"{serial!r} is not a device serial")
        from .adb import local_target

        return local_target(spec, serial, timeout=timeout, transfer_timeout=transfer)
    if spec.startswith("adb://"):
        _, host, port, serial = _url(spec, "adb://", user_ok=False, path_ok=True)
        from .adb import remote_target

        return remote_target(spec, host, port or 5037, serial, timeout=timeout, transfer_timeout=transfer)
    if spec.startswith("adb+ssh://"):
        user, host, port, serial = _url(spec, "adb+ssh://", user_ok=True, path_ok=True)
        from .adbssh import AdbSshTarget
        from .ssh import SshSession

        session = SshSession(host, port, user, known_hosts=known_hosts, identity=identity, timeout=timeout)
        return AdbSshTarget(spec, session, serial, timeout=timeout, transfer_timeout=transfer)
    if spec.startswith("ssh://"):
        user, host, port, _ = _url(spec, "ssh://", user_ok=True, path_ok=False)
        from .ssh import SshSession, SshTarget

        session = SshSession(host, port, user, known_hosts=known_hosts, identity=identity, timeout=timeout)
        return SshTarget(spec, session, timeout=timeout, transfer_timeout=transfer)
    if spec.startswith("local:"):
        path = spec[len("local:"):]
        if not path:
            raise _bad(spec, "local:", "the directory is empty")
        from .local import LocalTarget

        return LocalTarget(spec, path, timeout=timeout, transfer_timeout=transfer)
    if spec == "qemu" or spec.startswith("qemu:"):
        from .qemu import QemuTarget, default_root

        path = spec[len("qemu:"):] if spec.startswith("qemu:") else ""
        if spec.startswith("qemu:") and not path:
            raise _bad(spec, "qemu", "the directory after 'qemu:' is empty (or write just qemu)")
        return QemuTarget(spec, path or default_root(), sysroot=_setting(settings, "linux.sysroot", ""),
                          timeout=timeout, transfer_timeout=transfer)
    for prefix in ("adb", "adb+ssh", "ssh"):
        if spec.startswith(prefix + ":") or spec.startswith(prefix + "/"):
            kind = {"adb": "adb://", "adb+ssh": "adb+ssh://", "ssh": "ssh://"}[prefix]
            raise _bad(spec, kind, "the scheme needs '://'")
    raise UsageError(f"unknown target {spec!r}; expected one of " + ", ".join(f for f, _ in FORMS.values()),
                     hint="e.g. --target adb, --target adb:R5CT1234ABC, --target ssh://root@board, --target local:/tmp/llama.cpp, --target qemu")
