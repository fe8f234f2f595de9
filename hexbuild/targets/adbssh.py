"""``adb+ssh://[USER@]HOST[:PORT][/SERIAL]``: a phone plugged into another machine, reached by SSH.

How: hexbuild opens SSH ``direct-tcpip`` channels (paramiko) to 127.0.0.1:<adb server port> *on
that host* and speaks the adb smart-socket protocol over them — the same client code as for a
local phone (adbproto.py). The port is the one the host's own `adb` uses
(``${ANDROID_ADB_SERVER_PORT:-5037}`` in the SSH user's environment); when no server answers,
hexbuild runs ``adb start-server`` there over SSH exec.

Why this and not "run adb there over SSH exec + SFTP staging":
- one copy: files stream from this machine through the SSH channel into the host's adb server
  and on to the phone; nothing is staged on the host's disk (no space needed there, no cleanup,
  no second full-size transfer, no half-staged files left behind when the link drops);
- one code path: push progress per chunk, shell v2 exit codes, timeouts, device states and the
  incremental/atomic deploy are exactly the local ones, so adb+ssh is tested by the same tests;
- no second layer of shell quoting (commands are not wrapped in `ssh host "adb shell '...'"`);
- no local listening port (unlike `ssh -L 5037`), so no other local user can reach the phone.
The host needs only sshd with TCP forwarding allowed (the default) and adb.
"""

from __future__ import annotations

from typing import Any

from ..errors import EnvironmentMissing
from .adb import AdbTarget
from .adbproto import AdbClient, AdbConnectError
from .base import TargetKind, TargetSettings
from .sshsession import SshSession


class AdbSshTarget(AdbTarget):
    kind = "adb+ssh"

    def __init__(self, spec: str, session: SshSession, serial: str | None, *, timeout: float = 15.0,
                 transfer_timeout: float = 600.0):
        self.session = session
        self._port: int | None = None
        super().__init__(spec, AdbClient(self._connect, timeout=timeout), serial,
                         server=f"the adb server on {session.where}", timeout=timeout,
                         transfer_timeout=transfer_timeout, start_server=self._start_remote_server)

    def remote_port(self) -> int:
        if self._port is None:
            rc, out, _ = self.session.capture('printf %s "${ANDROID_ADB_SERVER_PORT:-5037}"',
                                              timeout=self.default_timeout)
            try:
                self._port = int(out.strip())
            except ValueError:
                raise EnvironmentMissing(f"{self.spec}: ANDROID_ADB_SERVER_PORT on {self.session.where} "
                                         f"is not a port number: {out.strip()!r}") from None
        return self._port

    def _connect(self, timeout: float) -> Any:
        import paramiko

        port = self.remote_port()
        try:
            chan = self.session.transport().open_channel("direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0),
                                                         timeout=timeout)
        except paramiko.ChannelException as e:
            if e.code == 1:  # administratively prohibited
                raise EnvironmentMissing(f"{self.session.where} does not allow SSH port forwarding",
                                         hint="set AllowTcpForwarding yes in the host's sshd_config") from None
            raise AdbConnectError(f"no adb server on {self.session.where} port {port}") from None
        except paramiko.SSHException as e:
            raise AdbConnectError(f"cannot open a channel to {self.session.where}: {e}") from None
        return chan

    def _start_remote_server(self) -> None:
        rc, out, err = self.session.capture("adb start-server", timeout=max(self.default_timeout, 30))
        if rc == 127:
            raise EnvironmentMissing(f"adb is not installed on {self.session.where}",
                                     hint="install Android platform-tools there (apt install adb)")
        if rc != 0:
            raise EnvironmentMissing(f"adb start-server failed on {self.session.where}: {(err or out).strip()}")

    def _display_prefix(self, serial: str) -> list[str]:
        return ["ssh", "-p", str(self.session.port), f"{self.session.user}@{self.session.host}", "adb", "-s", serial]

    def close(self) -> None:
        self.session.close()


def _parse(spec: str, s: TargetSettings) -> AdbSshTarget:
    from .spec import url

    user, host, port, serial = url(spec, KIND, user_ok=True, path_ok=True)
    session = SshSession(host, port, user, known_hosts=s.known_hosts, identity=s.identity, timeout=s.timeout)
    return AdbSshTarget(spec, session, serial, timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="adb+ssh://", form="adb+ssh://[USER@]HOST[:PORT][/SERIAL]",
                  example="adb+ssh://me@lab-host/R5CT1234ABC",
                  summary="a phone attached to HOST, through HOST's adb server over SSH",
                  parse=_parse, caps=AdbSshTarget.caps)
