"""Virtual Snapdragon phones (real AOSP adbd), a private adb server, and a real sshd.

- ``adb_server`` (session): a private adb server on a free port; ANDROID_ADB_SERVER_PORT points
  every adb client of this test session (the adb binary and hexbuild) at it, so tests never touch
  a user's server. Stopped with ``adb -P PORT kill-server``.
- ``make_device(soc=..., userland=..., ...)`` (per test) / ``phones`` (session, three SoCs): each
  device is an ``adbd`` (ADBD_PORT=<free port>, never 5554/5555) under ``unshare -m`` with its own
  DEVROOT bind-mounted at /data/local/tmp (or a small tmpfs for "disk full") and a ``getprop``
  that answers like a phone. ``adb connect`` makes it a device; teardown disconnects and stops
  adbd by PID. Two userlands (``USERLANDS``):
  - ``"android"`` (the default): what a phone has. adbd runs chrooted into a root made of bind
    mounts: ``/system/bin`` holds mksh as ``sh`` and toybox with a link per applet, ``/bin`` is a
    symlink to it (as on Android 10+), ``/system`` is read-only, adbd is ``/apex/com.android.adbd/bin/adbd`` with a phone's
    ``PATH``, ``awk`` is mawk (Android's is BWK awk, also not toybox), and only the host's shared
    libraries (``/usr/lib``, read-only) come along, so no GNU tool is reachable from the device side. adbd runs ``/bin/sh -c`` (Debian's build has
    glibc's ``_PATH_BSHELL``; AOSP's has ``/system/bin/sh``): both are mksh here.
  - ``"debian"``: the host's own userland (dash, GNU coreutils), as a board with a full Linux
    userland has; ``getprop`` is in ``/usr/local/sbin``.
- ``make_locked_phone()``: an *unauthorized* phone. Debian's adbd is built for Linux with
  authentication compiled out (it logs "authentication not required"; there is no
  ro.adb.secure), so the locked phone is emulated one layer down, at the adb wire protocol: a
  listener that answers the server's CNXN with AUTH TOKEN challenges forever, as a phone
  whose owner never accepts the RSA prompt does. The adb client and server are the real ones,
  and they report "unauthorized" themselves.
- An *offline* device is a real one whose adbd was killed (``VirtualDevice.kill()``).
- ``link_mbit=N``: a USB-like link. adbd then runs in a network namespace of its own, reached
  over a veth pair whose both ends are shaped with a tbf qdisc to N Mbit/s; the serial is the
  device-side veth address (10.213.x.y, a host of this test only, inside its own namespace).
- ``sshd_host`` (session): sshd on 127.0.0.1 with its own host key, authorized_keys for a
  generated client key, user root, a known_hosts file for the client, and
  ``SetEnv ANDROID_ADB_SERVER_PORT`` so that `adb` there reaches the virtual devices (adb+ssh).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.processes import stop_process

SOCS = {  # ro.soc.model → (ro.board.platform, marketing name)
    "SM8650": ("pineapple", "Snapdragon 8 Gen 3 phone"),
    "SM8550": ("kalama", "Snapdragon 8 Gen 2 phone"),
    "SM8750": ("sun", "Snapdragon 8 Elite phone"),
}
USERLANDS = ("android", "debian")
# a phone's PATH without the apex/product/odm directories that have nothing here
ANDROID_PATH = "/system/bin:/system/xbin:/vendor/bin"
ADBD_ON_PHONE = "/apex/com.android.adbd/bin/adbd"
GETPROP = """#!{shell}
# getprop of a virtual phone (written by tests/infra/devices.py)
case "$1" in
  ro.soc.model) echo {soc};;
  ro.board.platform) echo {platform};;
  ro.product.model) echo '{model}';;
  ro.product.cpu.abi) echo arm64-v8a;;
  ro.product.manufacturer) echo QTI;;
  sys.boot_completed) echo 1;;
  '') printf '[ro.soc.model]: [%s]\\n[ro.board.platform]: [%s]\\n' {soc} {platform};;
  *) echo;;
esac
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10.0, proc: subprocess.Popen | None = None, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def wait_path(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {timeout}s")
        time.sleep(0.05)


def _need(program: str, package: str) -> str:
    path = shutil.which(program) or (f"/usr/sbin/{program}" if Path(f"/usr/sbin/{program}").exists() else None)
    if not path:
        pytest.fail(f"{program} is missing: run scripts/setup-test-env.sh (installs {package})")
    return path


# -- the adb server -------------------------------------------------------------------------------
@dataclass
class AdbServer:
    port: int
    home: Path
    adb: str

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "ANDROID_ADB_SERVER_PORT": str(self.port), "HOME": str(self.home)}

    def __call__(self, *args: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess:
        cp = subprocess.run([self.adb, "-P", str(self.port), *args], capture_output=True, text=True,
                            timeout=timeout, env=self.env)
        if check and cp.returncode != 0:
            raise RuntimeError(f"adb {' '.join(args)} failed: {cp.stdout}{cp.stderr}")
        return cp

    def states(self) -> dict[str, str]:
        out = self("devices", check=False).stdout
        return {p[0]: p[1] for p in (line.split() for line in out.splitlines()[1:]) if len(p) >= 2}

    def wait_state(self, serial: str, state: str | None, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.states().get(serial) == state:
                return
            time.sleep(0.1)
        raise RuntimeError(f"{serial} did not reach state {state} (now {self.states().get(serial)})")

    def stop(self) -> None:
        self("kill-server", check=False)


def start_adb_server(tmp: Path) -> AdbServer:
    adb = _need("adb", "adb")
    home = tmp / "adb-home"
    home.mkdir(parents=True, exist_ok=True)
    server = AdbServer(free_port(), home, adb)
    server("start-server", timeout=30)
    return server


@pytest.fixture(scope="session")
def adb_server(tmp_path_factory):
    server = start_adb_server(tmp_path_factory.mktemp("adb-server"))
    old = os.environ.get("ANDROID_ADB_SERVER_PORT")
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
    yield server
    server.stop()
    if old is None:
        os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
    else:
        os.environ["ANDROID_ADB_SERVER_PORT"] = old


# -- virtual phones ----------------------------------------------------------------------------------
@dataclass
class VirtualDevice:
    server: AdbServer
    root: Path  # DEVROOT: tmp/ is the phone's /data/local/tmp, bin/ holds getprop
    port: int
    soc: str
    disk_kb: int | None = None
    link_mbit: int | None = None
    userland: str = "android"
    proc: subprocess.Popen | None = None
    log: Path | None = None
    _started: list = field(default_factory=list)

    @property
    def address(self) -> str:
        if not self.link_mbit:
            return "127.0.0.1"
        p = self.port
        return f"10.{213 + (p >> 14)}.{(p >> 6) & 0xFF}.{((p & 0x3F) << 2) + 2}"

    @property
    def netns(self) -> str:
        return f"hb{self.port}"

    @property
    def serial(self) -> str:
        return f"{self.address}:{self.port}"

    def _make_link(self) -> None:
        """A namespace for adbd and a shaped veth pair to it (both directions)."""
        host_if, dev_if = f"hbh{self.port}", f"hbd{self.port}"
        host_addr = self.address.rsplit(".", 1)[0] + "." + str(int(self.address.rsplit(".", 1)[1]) - 1)
        rate = f"{self.link_mbit}mbit"
        for cmd in (["ip", "netns", "add", self.netns],
                    ["ip", "link", "add", host_if, "type", "veth", "peer", "name", dev_if],
                    ["ip", "link", "set", dev_if, "netns", self.netns],
                    ["ip", "addr", "add", f"{host_addr}/30", "dev", host_if],
                    ["ip", "link", "set", host_if, "up"],
                    ["tc", "qdisc", "add", "dev", host_if, "root", "tbf", "rate", rate, "burst", "256kb", "latency", "100ms"],
                    ["ip", "netns", "exec", self.netns, "ip", "addr", "add", f"{self.address}/30", "dev", dev_if],
                    ["ip", "netns", "exec", self.netns, "ip", "link", "set", dev_if, "up"],
                    ["ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up"],
                    ["ip", "netns", "exec", self.netns, "tc", "qdisc", "add", "dev", dev_if, "root", "tbf", "rate", rate,
                     "burst", "256kb", "latency", "100ms"]):
            cp = subprocess.run(cmd, capture_output=True, text=True)
            if cp.returncode != 0:
                self._drop_link()
                pytest.fail(f"cannot build the shaped link ({' '.join(cmd)}): {cp.stderr.strip()}; "
                            "needs root, iproute2 and the tbf qdisc")

    def _drop_link(self) -> None:
        subprocess.run(["ip", "link", "del", f"hbh{self.port}"], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)

    @property
    def tmp(self) -> Path:
        """The phone's /data/local/tmp as this machine sees it (through adbd's mount namespace,
        so a tmpfs mounted only there is visible too)."""
        if self.disk_kb and self.proc and self.proc.poll() is None:
            return Path(f"/proc/{self.proc.pid}/root/data/local/tmp")
        return self.root / "tmp"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        adbd = _need("adbd", "adbd")
        Path("/data/local/tmp").mkdir(parents=True, exist_ok=True)  # the mount point (debian)
        tmp_at = "$R/data/local/tmp" if self.userland == "android" else "/data/local/tmp"
        if self.disk_kb:
            mount_tmp = f"mount -t tmpfs -o size={self.disk_kb}k hexbuild-test {tmp_at}"
        else:
            mount_tmp = f'mount --bind "$DEVROOT/tmp" {tmp_at}'
        env = {**os.environ, "ADBD_PORT": str(self.port), "DEVROOT": str(self.root), "ADBD": adbd}
        if self.userland == "android":
            env["R"] = str(self.root / "sysroot")
            env["CHROOT"] = _need("chroot", "coreutils")
            # the host's sh runs the mounts, then adbd starts chrooted with a phone's environment
            script = ('mount --make-rprivate / && '
                      'mount --bind -o ro /usr/lib "$R/usr/lib" && mount --bind -o ro /usr/lib64 "$R/usr/lib64" && '
                      'mount --rbind /dev "$R/dev" && mount -t proc proc "$R/proc" && '
                      'mount --rbind /sys "$R/sys" && mount --bind -o ro "$R/system" "$R/system" && '
                      f'mount --bind -o ro "$ADBD" "$R{ADBD_ON_PHONE}" && {mount_tmp} && '
                      f'exec env -i PATH={ANDROID_PATH} ADBD_PORT="$ADBD_PORT" ANDROID_ROOT=/system '
                      f'ANDROID_DATA=/data TMPDIR=/data/local/tmp "$CHROOT" "$R" {ADBD_ON_PHONE}')
        else:
            script = (f'mount --make-rprivate / && {mount_tmp} && mount --bind "$DEVROOT/bin" /usr/local/sbin '
                      f'&& exec "$ADBD"')
        self.log = self.root / "adbd.log"
        argv = ["unshare", "-m", "sh", "-c", script]
        if self.link_mbit:
            if not Path(f"/run/netns/{self.netns}").exists():
                self._make_link()
            argv = ["ip", "netns", "exec", self.netns, *argv]
        with open(self.log, "ab") as log:
            # ip netns exec, unshare, sh, env and chroot all exec: the Popen PID is adbd's own
            self.proc = subprocess.Popen(argv, cwd="/", env=env,
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_port(self.port, proc=self.proc, host=self.address)
        self.server("connect", self.serial)
        self.server.wait_state(self.serial, "device")

    def kill(self) -> None:
        """Pull the plug: SIGKILL adbd (the server then reports the device offline)."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        self.server("disconnect", self.serial, check=False)
        self.kill()
        if self.link_mbit:
            self._drop_link()

    def shell(self, command: str) -> subprocess.CompletedProcess:
        return self.server("-s", self.serial, "shell", command, check=False)


def android_root(root: Path, getprop: str, without: tuple[str, ...] = ()) -> Path:
    """``root``/sysroot: the mount points and files of a phone's root for adbd to chroot into
    (the mounts themselves are made in adbd's namespace by ``VirtualDevice.start``)."""
    sysroot = root / "sysroot"
    sbin = sysroot / "system" / "bin"
    sbin.mkdir(parents=True)
    for d in ("usr/lib", "usr/lib64", "dev", "proc", "sys", "data/local/tmp", "system/xbin", "vendor/bin",
              "etc", "sdcard", Path(ADBD_ON_PHONE).parent.relative_to("/")):
        (sysroot / d).mkdir(parents=True, exist_ok=True)
    (sysroot / ADBD_ON_PHONE.lstrip("/")).touch()
    for link, to in (("bin", "system/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
        (sysroot / link).symlink_to(to)
    toybox = _need("toybox", "toybox")
    shutil.copy2(toybox, sbin / "toybox")
    shutil.copy2(_need("mksh", "mksh"), sbin / "mksh")
    (sbin / "sh").symlink_to("mksh")
    # Android ships BWK awk (not toybox) at /system/bin/awk; Debian's mawk (not GNU) stands in
    shutil.copy2(_need("mawk", "mawk"), sbin / "awk")
    applets = subprocess.run([toybox], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet not in ("sh", "getprop", "toybox", *without) and "/" not in applet:
            (sbin / applet).symlink_to("toybox")
    (sbin / "getprop").write_text(getprop.replace("{shell}", "/system/bin/sh"))
    (sbin / "getprop").chmod(0o755)
    # Android's shell user: HOME=/ and SHELL=/system/bin/sh (adbd sets both from getpwuid)
    (sysroot / "etc" / "passwd").write_text("root:x:0:0:root:/:/system/bin/sh\n")
    (sysroot / "etc" / "group").write_text("root:x:0:\n")
    (sysroot / "etc" / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
    # the dynamic loader's cache: without it every program start searches the library path
    # (10 ms per toybox call here), which a phone's linker never does
    if Path("/etc/ld.so.cache").is_file():
        shutil.copy2("/etc/ld.so.cache", sysroot / "etc" / "ld.so.cache")
    return sysroot


def new_device(server: AdbServer, base: Path, soc: str = "SM8650", *, platform: str | None = None,
               model: str | None = None, disk_kb: int | None = None, link_mbit: int | None = None,
               userland: str = "android", without: tuple[str, ...] = ()) -> VirtualDevice:
    """``without``: toybox applets the phone lacks (an older or trimmed toybox)."""
    if userland not in USERLANDS:
        raise ValueError(f"userland must be one of {USERLANDS}, not {userland!r}")
    platform = platform if platform is not None else SOCS.get(soc, ("", ""))[0]
    model = model or SOCS.get(soc, ("", f"{soc} phone"))[1]
    root = base / f"dev-{soc}-{free_port()}"
    (root / "tmp").mkdir(parents=True)
    getprop = GETPROP.replace("{soc}", soc).replace("{platform}", platform).replace("{model}", model)
    if userland == "android":
        android_root(root, getprop, without)
    else:
        (root / "bin").mkdir()
        (root / "bin" / "getprop").write_text(getprop.replace("{shell}", "/bin/sh"))
        (root / "bin" / "getprop").chmod(0o755)
    dev = VirtualDevice(server, root, free_port(), soc, disk_kb, link_mbit, userland)
    try:
        dev.start()
    except BaseException:
        dev.stop()
        raise
    return dev


@pytest.fixture(params=USERLANDS)
def userland(request) -> str:
    """Parametrizes a test over both phones: ``make_device(..., userland=userland)``."""
    return request.param


@pytest.fixture
def make_device(adb_server, tmp_path):
    """make_device(soc="SM8650", disk_kb=None, server=None, userland="android") → a fresh
    VirtualDevice for this test."""
    made: list[VirtualDevice] = []

    def make(soc: str = "SM8650", *, server: AdbServer | None = None, **kw) -> VirtualDevice:
        dev = new_device(server or adb_server, tmp_path, soc, **kw)
        made.append(dev)
        return dev

    yield make
    for dev in made:
        dev.stop()


@pytest.fixture(scope="session")
def phones(adb_server, tmp_path_factory):
    """Three long-lived phones: SM8650/pineapple (v75), SM8550/kalama (v73), SM8750/sun (v79)."""
    base = tmp_path_factory.mktemp("phones")
    devs = {soc: new_device(adb_server, base, soc) for soc in ("SM8650", "SM8550", "SM8750")}
    yield devs
    for dev in devs.values():
        dev.stop()


@pytest.fixture(scope="session")
def debian_phone(adb_server, tmp_path_factory):
    """A long-lived SM8650 phone with the host's Debian userland (dash, GNU coreutils)."""
    dev = new_device(adb_server, tmp_path_factory.mktemp("debian-phone"), "SM8650", userland="debian")
    yield dev
    dev.stop()


@pytest.fixture
def private_adb_server(tmp_path, monkeypatch):
    """A second, empty adb server for tests that need to own the whole device list (--all)."""
    server = start_adb_server(tmp_path)
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(server.port))
    yield server
    server.stop()


# -- a locked (unauthorized) phone ----------------------------------------------------------------------
A_CNXN, A_AUTH, AUTH_TOKEN, AUTH_SIGNATURE = 0x4E584E43, 0x48545541, 1, 2


class LockedPhone:
    """Speaks the adb wire protocol as a phone that requires auth and never gets it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    @staticmethod
    def _message(cmd: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
        return struct.pack("<6I", cmd, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF, cmd ^ 0xFFFFFFFF) + data

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = self._read(conn, 24)
                if head is None:
                    return
                cmd, arg0, _, length, _, _ = struct.unpack("<6I", head)
                if length and self._read(conn, length) is None:
                    return
                if cmd == A_CNXN or (cmd == A_AUTH and arg0 == AUTH_SIGNATURE):
                    conn.sendall(self._message(A_AUTH, AUTH_TOKEN, 0, os.urandom(20)))
                # AUTH RSAPUBLICKEY: the prompt would show on the phone; nobody accepts it

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = conn.recv(n - len(buf))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def close(self) -> None:
        self.closed = True
        self.sock.close()


@pytest.fixture
def make_locked_phone(adb_server):
    made: list[LockedPhone] = []

    def make() -> LockedPhone:
        phone = LockedPhone()
        made.append(phone)
        adb_server("connect", phone.serial, check=False)  # "failed to authenticate": expected
        adb_server.wait_state(phone.serial, "unauthorized")
        return phone

    yield make
    for phone in made:
        adb_server("disconnect", phone.serial, check=False)
        phone.close()


# -- sshd ----------------------------------------------------------------------------------------------
@dataclass
class SshHost:
    host: str
    port: int
    user: str
    identity: Path
    known_hosts: Path
    host_key_pub: Path
    proc: subprocess.Popen

    @property
    def settings(self) -> dict:
        """Settings for parse_target: this host trusted, the generated client key."""
        return {"ssh.known_hosts": str(self.known_hosts), "ssh.identity": str(self.identity),
                "ssh.timeout": 15.0, "deploy.timeout": 120.0}

    @property
    def env(self) -> dict[str, str]:
        """The same as HEXBUILD_* variables, for CLI runs."""
        return {"HEXBUILD_SSH_KNOWN_HOSTS": str(self.known_hosts), "HEXBUILD_SSH_IDENTITY": str(self.identity)}


def start_sshd(d: Path, adb_port: int) -> SshHost:
    """sshd on 127.0.0.1 (keys, authorized_keys and known_hosts under ``d``) whose sessions use
    the adb server on ``adb_port``. Stop it with ``stop_sshd``."""
    sshd = _need("sshd", "openssh-server")
    keygen = _need("ssh-keygen", "openssh-client")
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "hexbuild-test", "-f", str(d / "client_key")],
                   check=True)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port = free_port()
    (d / "sshd_config").write_text(f"""ListenAddress 127.0.0.1
Port {port}
HostKey {d / 'host_key'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile {d / 'sshd.pid'}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding yes
Subsystem sftp internal-sftp
SetEnv ANDROID_ADB_SERVER_PORT={adb_port}
""")
    (d / "sshd_config").chmod(0o600)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    with open(d / "sshd.log", "ab") as log:
        proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, proc=proc)
    except RuntimeError as e:
        pytest.fail(f"sshd did not start: {e}; log: {(d / 'sshd.log').read_text()[-2000:]}")
    key_type, key_b64 = (d / "host_key.pub").read_text().split()[:2]
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {key_type} {key_b64}\n")
    return SshHost("127.0.0.1", port, "root", d / "client_key", d / "known_hosts", d / "host_key.pub", proc)


def stop_sshd(host: SshHost) -> None:
    stop_process(host.proc)


@pytest.fixture(scope="session")
def sshd_host(tmp_path_factory, adb_server):
    host = start_sshd(tmp_path_factory.mktemp("sshd"), adb_server.port)
    yield host
    stop_sshd(host)
