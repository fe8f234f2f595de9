"""The ``--target`` grammar the kinds share: URL parts, serials, IPv6 brackets, and the one-line
message a malformed spec gets (its kind's form and example, and every form hexbuild knows)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from ..errors import UsageError
from .base import TargetKind


def malformed(spec: str, kind: TargetKind, why: str) -> UsageError:
    from .registry import forms

    return UsageError(f"malformed target {spec!r}: {why}; expected {kind.form}, e.g. {kind.example}",
                      hint="target forms: " + ", ".join(forms()))


def after_colon(spec: str, kind: TargetKind) -> str | None:
    """What follows ``word:`` in a word kind's spec (``adb:SERIAL``), None for the bare word."""
    return None if spec == kind.scheme else spec[len(kind.scheme) + 1:]


def serial_part(spec: str, kind: TargetKind) -> str | None:
    """``adb:SERIAL``'s serial (None for bare ``adb``), refusing what no serial can be."""
    serial = after_colon(spec, kind)
    if serial is None:
        return None
    if not serial:
        raise malformed(spec, kind, f"the serial after '{kind.scheme}:' is empty")
    if " " in serial or "/" in serial:
        raise malformed(spec, kind, f"{serial!r} is not a device serial")
    return serial


def url(spec: str, kind: TargetKind, *, user_ok: bool, path_ok: bool):
    """(user, host, port, serial) of a URL kind's spec; the port and serial may be None."""
    _require_ipv6_brackets(spec, kind)
    parts = urlsplit(spec)
    if parts.query or parts.fragment or "?" in spec or "#" in spec:
        raise malformed(spec, kind, "no ?query or #fragment is allowed")
    try:
        port = parts.port
    except ValueError:
        raise malformed(spec, kind, "the port must be a number from 1 to 65535") from None
    if parts.netloc.rsplit("@", 1)[-1].endswith(":"):
        raise malformed(spec, kind, "the port is empty")
    if port == 0:
        raise malformed(spec, kind, "the port must be a number from 1 to 65535")
    host = parts.hostname
    if not host:
        raise malformed(spec, kind, "the host is missing")
    if parts.password is not None:
        raise malformed(spec, kind, "passwords do not belong in a target (use keys or the SSH agent)")
    user = unquote(parts.username) if parts.username else None
    if user is not None and (not user_ok or not user):
        raise malformed(spec, kind, "a USER@ part is not allowed here" if not user_ok else "the user is empty")
    path = unquote(parts.path)
    serial = path[1:] if path.startswith("/") else path
    if serial and not path_ok:
        raise malformed(spec, kind, "no /path is allowed (the install directory is --dest)")
    if "/" in serial:
        raise malformed(spec, kind, f"{serial!r} is not a device serial")
    return user, host, port, serial or None


def _require_ipv6_brackets(spec: str, kind: TargetKind) -> None:
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
    raise malformed(spec, kind, "an IPv6 address needs brackets: " + " or ".join(forms))
