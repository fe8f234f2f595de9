"""Linux on Snapdragon boards over SSH (``ssh://[USER@]HOST[:PORT]``), and the SSH session that
adb+ssh rides on.

Host keys are checked against ``ssh.known_hosts`` (default ~/.ssh/known_hosts, hashed entries
and ``[host]:port`` entries included). An unknown key is refused — EnvironmentMissing (exit 3),
because the machine is not set up to trust that host yet — with the key's SHA256 fingerprint
and the command that trusts it; a *changed* key is refused the same way, louder. Nothing is ever
added to known_hosts by hexbuild. Authentication: ``ssh.identity`` if set, else the SSH agent
and ~/.ssh/id_*; ~/.ssh/config supplies HostName/User/Port/IdentityFile like ssh(1) would.
No password, passphrase or key material is logged. Every call has a timeout (``ssh.timeout``
for connecting and commands, ``deploy.timeout`` for a transfer's inactivity).
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import posixpath
import select
import shlex
import socket
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import EnvironmentMissing, RemoteFailed
from ..ui import ui
from .base import ByteProgress, DeviceInfo, OutputSink, Sent, TargetCaps, TargetKind, TargetSettings
from .posix import ShellTarget, shell_command


class _UnknownHostKey(Exception):
    def __init__(self, hostname: str, key: Any):
        super().__init__(hostname)
        self.hostname = hostname
        self.key = key


def fingerprint(key: Any) -> str:
    """OpenSSH's SHA256 fingerprint of a paramiko public key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


class SshSession:
    """One authenticated SSH connection (paramiko), opened on first use."""

    def __init__(self, host: str, port: int | None, user: str | None, *, known_hosts: str = "",
                 identity: str = "", timeout: float = 15.0):
        self.alias = host
        self.host, self.port, self.user, self.identity = host, port, user, identity or None
        self._apply_ssh_config()
        self.port = self.port or 22
        self.user = self.user or getpass.getuser()
        self.known_hosts = Path(known_hosts or "~/.ssh/known_hosts").expanduser()
        self.timeout = timeout
        self._client = None
        self._sftp = None

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}" + (f":{self.port}" if self.port != 22 else "")

    def _apply_ssh_config(self) -> None:
        path = Path("~/.ssh/config").expanduser()
        if not path.is_file():
            return
        try:
            import paramiko

            cfg = paramiko.SSHConfig.from_path(str(path)).lookup(self.host)
        except Exception:  # a config paramiko cannot read is ssh(1)'s business, not ours
            return
        self.host = cfg.get("hostname", self.host)
        if self.port is None and cfg.get("port"):
            self.port = int(cfg["port"])
        if self.user is None and cfg.get("user"):
            self.user = cfg["user"]
        if self.identity is None and cfg.get("identityfile"):
            files = [f for f in cfg["identityfile"] if Path(f).expanduser().is_file()]
            self.identity = files[0] if files else None

    def _check_identity(self) -> None:
        """Refuse a key file that ssh(1) would ignore: one that group or others can read."""
        if not self.identity:
            return
        path = Path(self.identity).expanduser()
        try:
            st = path.stat()
        except FileNotFoundError:
            raise EnvironmentMissing(f"SSH key not found: {path}", hint="set ssh.identity to an existing private key") from None
        except OSError as e:
            raise EnvironmentMissing(f"cannot read the SSH key {path}: {e.strerror}") from None
        if not path.is_file():
            raise EnvironmentMissing(f"the SSH key {path} is not a file", hint="set ssh.identity to a private key file")
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            raise EnvironmentMissing(f"the SSH key {path} is readable by others (mode {st.st_mode & 0o777:04o}); "
                                     "ssh refuses such keys", hint=f"chmod 600 {path}")

    # -- connection -------------------------------------------------------------------------------
    def client(self):
        if self._client is not None:
            return self._client
        import paramiko

        class Refuse(paramiko.MissingHostKeyPolicy):
            def missing_host_key(self, client, hostname, key):
                raise _UnknownHostKey(hostname, key)

        self._check_identity()
        client = paramiko.SSHClient()
        if self.known_hosts.is_file():
            try:
                client.get_host_keys().load(str(self.known_hosts))
            except Exception as e:
                raise EnvironmentMissing(f"cannot read known_hosts {self.known_hosts}: {e}") from None
        client.set_missing_host_key_policy(Refuse())
        scan = f"ssh-keyscan{' -p ' + str(self.port) if self.port != 22 else ''} {self.host}"
        ui.command(["ssh", "-p", str(self.port), f"{self.user}@{self.host}"])
        try:
            client.connect(self.host, port=self.port, username=self.user, key_filename=self.identity,
                           allow_agent=True, look_for_keys=self.identity is None, timeout=self.timeout,
                           banner_timeout=self.timeout, auth_timeout=self.timeout)
        except _UnknownHostKey as e:
            client.close()
            raise EnvironmentMissing(
                f"SSH host {self.host} port {self.port} is not in {self.known_hosts}: refusing its "
                f"{e.key.get_name()} key {fingerprint(e.key)}",
                hint=f"check that fingerprint with the host's owner (`{scan} | ssh-keygen -lf -`), then trust it: "
                     f"{scan} >> {self.known_hosts}") from None
        except paramiko.BadHostKeyException as e:
            client.close()
            raise EnvironmentMissing(
                f"SSH host key of {self.host} port {self.port} has CHANGED: got {fingerprint(e.key)}, "
                f"{self.known_hosts} has {fingerprint(e.expected_key)} (possible man-in-the-middle)",
                hint=f"if the host was reinstalled, remove the old entry (ssh-keygen -R '{self.host}' -f {self.known_hosts}) "
                     f"and trust the new key: {scan} >> {self.known_hosts}") from None
        except paramiko.PasswordRequiredException:
            client.close()
            key = self.identity or "your SSH key"
            raise EnvironmentMissing(f"the SSH key {key} for {self.where} is protected by a passphrase and no SSH agent "
                                     "holds it", hint=f"start an agent and load the key: eval $(ssh-agent) && ssh-add {key}"
                                     ) from None
        except paramiko.AuthenticationException:
            client.close()
            raise EnvironmentMissing(
                f"SSH authentication to {self.where} failed",
                hint="add your public key to ~/.ssh/authorized_keys on the host, load it with ssh-add, "
                     "or set ssh.identity") from None
        except (socket.timeout, TimeoutError):
            client.close()
            raise EnvironmentMissing(f"SSH host {self.host} port {self.port} did not answer within {self.timeout:g}s",
                                     hint="check the address and that sshd runs there") from None
        except (OSError, paramiko.SSHException) as e:
            client.close()
            # paramiko wraps refusals as "[Errno None] Unable to connect …": keep the words, not the noise
            reason = str(e).replace("[Errno None] ", "")
            raise EnvironmentMissing(f"cannot reach SSH host {self.host} port {self.port}: {reason}",
                                     hint="check the address and that sshd runs there") from None
        transport = client.get_transport()
        transport.set_keepalive(max(5, int(self.timeout)))
        self._client = client
        return client

    def transport(self):
        return self.client().get_transport()

    def sftp(self, timeout: float):
        if self._sftp is None:
            self._sftp = self.client().open_sftp()
        self._sftp.get_channel().settimeout(timeout)
        return self._sftp

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- commands -----------------------------------------------------------------------------------
    def exec(self, command: str, *, timeout: float, on_output: OutputSink | None = None) -> int:
        """Run a shell command line on the host; stream output; its exit status."""
        chan = self.transport().open_session(timeout=timeout)
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            chan.shutdown_write()
            deadline = time.monotonic() + timeout
            while True:
                got = False
                while chan.recv_ready():
                    data = chan.recv(65536)
                    got = True
                    if on_output and data:
                        on_output("stdout", data)
                while chan.recv_stderr_ready():
                    data = chan.recv_stderr(65536)
                    got = True
                    if on_output and data:
                        on_output("stderr", data)
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RemoteFailed(f"{self.where}: the command did not finish within {timeout:g}s")
                if not got:
                    if chan.eof_received:  # stdout is done: only the exit status is still to come
                        chan.status_event.wait(min(left, 1.0))
                    else:
                        select.select([chan], [], [], min(left, 1.0))
            status = chan.recv_exit_status()
            return status if status >= 0 else 255  # -1: killed by a signal, no status
        except (socket.timeout, TimeoutError):
            raise RemoteFailed(f"{self.where}: no answer within {timeout:g}s") from None
        finally:
            chan.close()

    def capture(self, command: str, *, timeout: float) -> tuple[int, str, str]:
        out: list[bytes] = []
        err: list[bytes] = []
        rc = self.exec(command, timeout=timeout,
                       on_output=lambda s, d: (out if s == "stdout" else err).append(d))
        return rc, b"".join(out).decode("utf-8", "replace"), b"".join(err).decode("utf-8", "replace")


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
        whole files' times then decide (README, "At the link's limit")."""
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

        command = shell_command(["sh", "-c", _UNZSTD, "sh", remote])
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
