"""Deploy/run targets and the ``--target`` grammar.

Each kind is one module that declares its scheme, form, example, parser and capabilities
(``KIND``), found through ``registry.py``:

    adb                                   the one ready device on the local adb server
    adb:SERIAL                            a device on the local adb server (as `adb devices` names it)
    adb://HOST[:PORT][/SERIAL]            a device on the adb *server* at HOST:PORT (default 5037),
                                          what `adb -H HOST -P PORT` talks to
    adb+ssh://[USER@]HOST[:PORT][/SERIAL] a phone attached to HOST, reached over SSH (PORT is SSH's)
    adb+tcp://HOST[:PORT]                 a phone's own adbd over the network (wireless debugging,
                                          `adb tcpip`; default port 5555), connected on first use
    ssh://[USER@]HOST[:PORT]              Linux on a Snapdragon board, over SSH/SFTP
    local:DIR                             a directory on this machine
    qemu[:DIR]                            a directory on this machine, AArch64 Linux programs run by
                                          qemu-aarch64 -L SYSROOT (default DIR under hexbuild's cache)

A spec that fits none of these is a UsageError that shows the right form with an example.
Making a target contacts nothing; the first remote call does. It tells ``hexbuild.fidelity`` what
the target's results are worth (the virtual NPU's are an emulator's).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import UsageError
from .base import DeviceInfo, RemoteFile, Target, TargetKind, TargetSettings
from .registry import REGISTRY, all_kinds, find, kind

__all__ = ["parse_target", "target_settings", "Target", "TargetKind", "TargetSettings", "DeviceInfo", "RemoteFile"]


def _setting(settings: Any, key: str, default: Any) -> Any:
    if settings is None:
        return default
    try:
        value = settings[key]
    except KeyError:
        return default
    return default if value in (None, "") else value


def target_settings(settings: Mapping[str, Any] | Any = None) -> TargetSettings:
    """ssh.timeout, deploy.timeout, ssh.known_hosts, ssh.identity, linux.sysroot and qemu.npu from
    ``settings`` (their defaults when None or unset)."""
    return TargetSettings(timeout=float(_setting(settings, "ssh.timeout", 15.0)),
                          transfer_timeout=float(_setting(settings, "deploy.timeout", 600.0)),
                          known_hosts=_setting(settings, "ssh.known_hosts", ""),
                          identity=_setting(settings, "ssh.identity", ""),
                          sysroot=_setting(settings, "linux.sysroot", ""),
                          npu=_setting(settings, "qemu.npu", "v73"))


def _expected() -> tuple[str, str]:
    kinds = all_kinds()
    return ", ".join(k.form for k in kinds), "e.g. " + ", ".join(f"--target {k.example}" for k in kinds)


def parse_target(spec: str, settings: Mapping[str, Any] | Any = None) -> Target:
    """A Target for ``spec`` (see the module docstring), made by the parser its kind declares."""
    if not isinstance(spec, str) or not spec.strip():
        forms, examples = _expected()
        raise UsageError("empty target; expected one of " + forms, hint=examples)
    spec = spec.strip()
    if any(c in spec for c in "\n\r\t\x00"):
        raise UsageError(f"malformed target {spec!r}: control characters are not allowed")
    found = find(spec)
    if found is not None:
        from ..fidelity import opened

        target = found.parse(spec, target_settings(settings))
        opened(target)  # the virtual NPU's results say so, in every document of this command
        return target
    for scheme, _ in REGISTRY:  # ssh:host, adb+ssh/host: a URL kind written without its '://'
        word = scheme[:-3]
        if scheme.endswith("://") and (spec.startswith(word + ":") or spec.startswith(word + "/")):
            from .spec import malformed

            raise malformed(spec, kind(scheme), "the scheme needs '://'")
    forms, examples = _expected()
    raise UsageError(f"unknown target {spec!r}; expected one of {forms}", hint=examples)
