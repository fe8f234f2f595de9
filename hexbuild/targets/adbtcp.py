"""``adb+tcp://HOST[:PORT]``: a phone's own adbd on the network (wireless debugging, or a phone
switched with ``adb tcpip 5555``; default port 5555), reached through this machine's adb server.

On first use hexbuild asks the server to connect (``adb connect HOST:PORT``) and waits until the
device is ready, so a pipeline needs no separate connect step and no sleep; after that it is the
``adb:HOST:PORT`` device and everything else is adb.py's.
"""

from __future__ import annotations

import time

from ..errors import EnvironmentMissing
from .adb import AdbTarget, local_client, local_server_port, start_local_server
from .base import TargetKind, TargetSettings
from .posix import not_ready_message

DEFAULT_PORT = 5555


class AdbTcpTarget(AdbTarget):
    kind = "adb+tcp"

    def __init__(self, spec: str, host: str, port: int, *, timeout: float = 15.0, transfer_timeout: float = 600.0):
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        super().__init__(spec, local_client(timeout), address,
                         server=f"the local adb server (port {local_server_port()})", timeout=timeout,
                         transfer_timeout=transfer_timeout, start_server=start_local_server)
        self.local_server = True
        self.host, self.port = host, port
        self._connected = False

    def resolve_serial(self) -> str:
        if not self._connected:
            self._connect()
        return self.serial or super().resolve_serial()

    def _connect(self) -> None:
        answer = self._call(self.client.connect_device, self.host, self.port).strip()
        if answer.startswith("failed to authenticate"):  # the phone shows its RSA key prompt
            what, fix = not_ready_message("unauthorized")
            raise EnvironmentMissing(f"{self.spec}: device {self.serial} {what}", hint=fix)
        if not answer.startswith(("connected to", "already connected to")):
            raise EnvironmentMissing(f"{self.spec}: the adb server could not connect to {self.serial}: {answer}",
                                     hint="is wireless debugging (or `adb tcpip 5555`) on, and the port the one "
                                          "the phone shows?")
        # The server lists the device as offline until adbd's handshake is done.
        deadline = time.monotonic() + self.default_timeout
        state = "missing"
        while True:
            entry = next((d for d in self.devices() if d.serial == self.serial), None)
            state = entry.state if entry else "missing"
            if state == "device":
                self._connected = True
                return
            if state == "unauthorized" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if state == "missing":
            raise EnvironmentMissing(f"{self.spec}: {self.serial} did not appear on {self.server} after it "
                                     "connected", hint="adb devices -l; adb disconnect, then retry")
        what, fix = not_ready_message(state)
        raise EnvironmentMissing(f"{self.spec}: device {self.serial} {what}", hint=fix)


def _parse(spec: str, s: TargetSettings) -> AdbTcpTarget:
    from .spec import url

    _, host, port, _ = url(spec, KIND, user_ok=False, path_ok=False)
    return AdbTcpTarget(spec, host, port or DEFAULT_PORT, timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="adb+tcp://", form="adb+tcp://HOST[:PORT]", example="adb+tcp://192.168.1.42:5555",
                  summary="a phone's adbd on the network (wireless debugging), connected on first use",
                  parse=_parse, caps=AdbTcpTarget.caps)
