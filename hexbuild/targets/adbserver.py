"""``adb://HOST[:PORT][/SERIAL]``: a device on another machine's adb *server* (what
``adb -H HOST -P PORT`` talks to; default port 5037), not a phone's adbd. The same client as a
local phone's (adb.py); only the server's address differs."""

from __future__ import annotations

from .adb import AdbTarget
from .adbproto import AdbClient, tcp_connector
from .base import TargetKind, TargetSettings


def remote_target(spec: str, host: str, port: int, serial: str | None, *, timeout: float,
                  transfer_timeout: float) -> AdbTarget:
    t = AdbTarget(spec, AdbClient(tcp_connector(host, port), timeout=timeout), serial,
                  server=f"the adb server at {host}:{port}", timeout=timeout, transfer_timeout=transfer_timeout)
    t._display_prefix = lambda s: ["adb", "-H", host, "-P", str(port), "-s", s]  # type: ignore[method-assign]
    return t


def _parse(spec: str, s: TargetSettings) -> AdbTarget:
    from .spec import url

    _, host, port, serial = url(spec, KIND, user_ok=False, path_ok=True)
    return remote_target(spec, host, port or 5037, serial, timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="adb://", form="adb://HOST[:PORT][/SERIAL]", example="adb://192.168.1.20:5037/R5CT1234ABC",
                  summary="a device on the adb server at HOST:PORT", parse=_parse, caps=AdbTarget.caps)
