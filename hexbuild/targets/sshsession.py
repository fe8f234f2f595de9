"""The SSH session under ``ssh://`` boards and ``adb+ssh://`` hosts: host keys checked, identity
and ~/.ssh/config applied as ssh(1) does, every call with a timeout.

Host keys are checked against ``ssh.known_hosts`` (default ~/.ssh/known_hosts, hashed entries
and ``[host]:port`` entries included). An unknown key is refused — EnvironmentMissing (exit 3),
because the machine is not set up to trust that host yet — with the key's SHA256 fingerprint
and the command that trusts it; a *changed* key is refused the same way, louder. Nothing is ever
added to known_hosts by hexbuild. Authentication: ``ssh.identity`` if set, else the SSH agent
and ~/.ssh/id_*; ~/.ssh/config supplies HostName/User/Port/IdentityFile like ssh(1) would.
No password, passphrase or key material is logged.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import EnvironmentMissing, RemoteFailed
from ..ui import ui
from .base import OutputSink

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
        self._connecting = threading.Lock()  # a deploy probes and takes its lock at once: one connection

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
        with self._connecting:
            if self._client is None:
                self._client = self._connect()
        return self._client

    def _connect(self):
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
