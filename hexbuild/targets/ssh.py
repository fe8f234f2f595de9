"""Linux on Snapdragon boards over SSH (``ssh://[USER@]HOST[:PORT]``): commands, transfers
(SFTP, or a zstd stream where it pays) and port forwards over one checked session
(``sshsession.py``). Every call has a timeout (``ssh.timeout`` for connecting and commands,
``deploy.timeout`` for a transfer's inactivity).
"""

from __future__ import annotations

import os
import posixpath
import shlex
import socket
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import EnvironmentMissing, RemoteFailed
from ..ui import ui
from .base import ByteProgress, DeviceInfo, OutputSink, Sent, TargetCaps, TargetKind, TargetSettings
from .posix import ShellTarget, shell_command, step_command
from .sshsession import SshSession


ZSTD_SAVING_S_PER_BYTE = 0.008 / 1e6  # what a zstd stream saves over SFTP, per byte (the lower figure)
# the board's side of a zstd push: the parent made, then the frame decoded into the file
_UNZSTD = 'mkdir -p "$(dirname "$1")" && exec zstd -q -d -f -o "$1"'


class SshTarget(ShellTarget):
    kind = "ssh"
    os = "linux"
    caps = TargetCaps(glibc_check=True, forward=True)

    def __init__(self, spec: str, session: SshSession, *, timeout: float = 15.0, transfer_timeout: float = 600.0):
        self.spec = spec
        self.session = session
        self.default_timeout = timeout
        self.transfer_timeout = transfer_timeout
        self._wire = None  # wire.WirePolicy, made on the first push

    def probe(self, dest: str) -> DeviceInfo:
        return self.probe_linux(self.expand(dest))

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output: OutputSink | None = None) -> int:
        command = shell_command(argv, env, cwd)
        ui.command(["ssh", "-p", str(self.session.port), f"{self.session.user}@{self.session.host}", command])
        return self.session.exec(command, timeout=timeout or self.default_timeout, on_output=on_output)

    def forward(self, local_port: int, remote_port: int):
        """One SSH direct-tcpip channel per accepted connection, on this target's session."""
        from .forward import ListenerForward, check_port_free

        check_port_free(local_port)
        transport = self.session.transport()  # connect (and check the host key) before listening

        def open_channel():
            return transport.open_channel("direct-tcpip", ("127.0.0.1", remote_port), ("127.0.0.1", 0),
                                          timeout=self.default_timeout)

        import paramiko

        try:  # nothing listens there yet: "connection refused" is expected, "prohibited" is not
            open_channel().close()
        except paramiko.ChannelException as e:
            if e.code == 1:  # administratively prohibited
                raise EnvironmentMissing(f"{self.session.where} does not allow SSH port forwarding",
                                         hint="set AllowTcpForwarding yes (or local) in the host's sshd_config") from None
        except paramiko.SSHException as e:
            raise RemoteFailed(f"{self.spec}: cannot open a channel: {e}") from None

        ui.detail(f"forwarding 127.0.0.1:{local_port} to 127.0.0.1:{remote_port} on {self.session.where} (SSH direct-tcpip)")
        return ListenerForward(local_port, remote_port, open_channel, how=f"SSH tunnel to {self.session.where}",
                               healthy=transport.is_active)

    def ensure_dirs(self, dirs: Sequence[str]) -> None:
        todo = sorted({d for d in dirs if d not in ("", "/")})
        if todo:
            self.mkdirs(*todo)

    def _with_parent(self, remote: str, action) -> Any:
        """``action()``; when the parent directory is missing, create it and try once more."""
        try:
            return action()
        except FileNotFoundError:
            self.mkdirs(posixpath.dirname(remote))
            return action()

    def wire(self):
        """zstd into the board's own ``zstd -d`` where it has one and a file is large enough to
        win back one remote command (timed on the ``command -v zstd`` that asks), else SFTP;
        whole files' times then decide (docs/commands/deploy.md, "At the link's limit")."""
        if self._wire is None:
            from .wire import MIN_SIZE, WirePolicy

            t = time.perf_counter()
            rc = self.session.exec("command -v zstd >/dev/null 2>&1", timeout=self.default_timeout)
            command_s = time.perf_counter() - t
            self._wire = WirePolicy(zstd=rc == 0, min_size=max(MIN_SIZE, int(command_s / ZSTD_SAVING_S_PER_BYTE)))
        return self._wire

    def send_file(self, local: Path, remote: str, progress: ByteProgress | None = None) -> Sent:
        policy = self.wire()
        choice = policy.choose(local)
        started = time.perf_counter()
        try:
            if choice.level is not None:
                sent = self._send_zstd(local, remote, choice.level, progress)
            else:
                sent = self._send_sftp(local, remote, progress)
            # a large file's time decides the next: compression loses when this CPU is busy
            policy.observe(os.stat(local).st_size, time.perf_counter() - started, sent.compressed)
            return sent
        except (socket.timeout, TimeoutError):
            raise RemoteFailed(f"{self.spec}: sending {remote} stalled for {self.transfer_timeout:g}s") from None
        except OSError as e:
            raise RemoteFailed(f"{self.spec}: sending {remote} failed: {e}") from None

    def _send_sftp(self, local: Path, remote: str, progress: ByteProgress | None) -> Sent:
        sftp = self.session.sftp(self.transfer_timeout)
        done = [0]

        def callback(sent: int, total: int) -> None:
            if progress and sent > done[0]:
                progress(sent - done[0])
            done[0] = sent

        ui.command(["sftp", f"{self.session.where}", f"put {shlex.quote(str(local))} {shlex.quote(remote)}"])

        def put() -> None:
            done[0] = 0
            with open(local, "rb") as f:
                sftp.putfo(f, remote, file_size=os.fstat(f.fileno()).st_size, callback=callback, confirm=True)

        self._with_parent(remote, put)
        return Sent(os.stat(local).st_size)

    def _send_zstd(self, local: Path, remote: str, level: int, progress: ByteProgress | None) -> Sent:
        """One zstd frame (with its checksum) on the stdin of ``zstd -d -o REMOTE`` on the board."""
        from .wire import zstd_frame

        command = step_command(_UNZSTD, [remote])
        ui.command(["zstd", f"-{level}", "-c", str(local), "|", "ssh", "-p", str(self.session.port),
                    self.session.where, command])
        chan = self.session.transport().open_session(timeout=self.default_timeout)
        wire = 0
        try:
            chan.settimeout(self.transfer_timeout)
            chan.exec_command(command)
            try:
                with open(local, "rb", buffering=0) as f:
                    for nread, pieces in zstd_frame(f, level, 1 << 18, checksum=True):
                        for piece in pieces:
                            chan.sendall(piece)
                        n = sum(map(len, pieces))
                        wire += n
                        if progress and (nread or n):
                            progress(nread, n)
                chan.shutdown_write()
            except OSError:
                if not chan.exit_status_ready():  # not zstd giving up: the link
                    raise
            if not chan.status_event.wait(self.transfer_timeout):
                raise socket.timeout()
            err = b""
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            rc = chan.recv_exit_status()
        finally:
            chan.close()
        if rc != 0:  # zstd's own words ("No space left on device") make the message
            why = err.decode("utf-8", "replace").strip() or f"zstd exited with {rc}"
            raise RemoteFailed(f"{self.spec}: sending {remote} failed: {why}")
        return Sent(wire, compressed=True)

    def read_file(self, remote: str) -> bytes | None:
        sftp = self.session.sftp(self.transfer_timeout)
        try:
            with sftp.open(remote, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            if getattr(e, "errno", None) == 2:
                return None
            raise RemoteFailed(f"{self.spec}: reading {remote} failed: {e}") from None

    def write_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> None:
        sftp = self.session.sftp(self.transfer_timeout)
        tmp = self.temp_name(remote)

        def put() -> None:
            with sftp.open(tmp, "wb") as f:
                f.write(data)

        try:
            self._with_parent(remote, put)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, remote)
        except OSError as e:
            raise RemoteFailed(f"{self.spec}: writing {remote} failed: {e}") from None

    def close(self) -> None:
        self.session.close()


def _parse(spec: str, s: TargetSettings) -> SshTarget:
    from .spec import url

    user, host, port, _ = url(spec, KIND, user_ok=True, path_ok=False)
    session = SshSession(host, port, user, known_hosts=s.known_hosts, identity=s.identity, timeout=s.timeout)
    return SshTarget(spec, session, timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="ssh://", form="ssh://[USER@]HOST[:PORT]", example="ssh://root@rb3gen2.local:22",
                  summary="Linux on a Snapdragon board, over SSH and SFTP", parse=_parse, caps=SshTarget.caps)
