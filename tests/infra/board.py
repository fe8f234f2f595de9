"""A virtual Linux-on-Snapdragon board: sshd on 127.0.0.1 whose sessions run inside an arm64
Debian root filesystem, its programs executed by qemu-aarch64 through binfmt_misc.

- The root filesystem is Debian **bullseye** (glibc 2.31), arm64, ``debootstrap --variant=minbase``
  (first stage on the host, second stage inside it under qemu), cached in the test cache as
  ``board-rootfs-bullseye-arm64``. It is older than the toolchains' glibc (2.36) on purpose:
  programs built there really cannot load on it without their own runtime.
  ``python -m tests.infra.board build`` (scripts/setup-test-env.sh) makes it; the fixture makes
  it lazily otherwise.
- ``qemu-aarch64`` (static) is registered in binfmt_misc under a name of this session's own with
  the F flag (the kernel opens the interpreter at registration, so it works inside the chroot);
  binfmt_misc is mounted when it is not. Only that entry is removed (``-1``) at the end.
- sshd is the host's own, with a private config: host key checked through a known_hosts file the
  fixture writes, key authentication only, and ``ChrootDirectory`` the root filesystem for the
  test user (root) — so a session's shell, its ``sh -c`` scripts and internal-sftp all see the
  board's files, as on a real board. sshd runs in a private mount namespace (``unshare -m``) in
  which the cached root filesystem is the lower layer of an overlay (writes go to the session's
  temporary directory, so every session starts from a clean board) with /proc, /sys and /dev
  bind-mounted into it: they vanish with sshd and never show up in the host's mount table.
  ``.root`` reaches the board's files through ``/proc/<sshd pid>/root``. Stopped by PID.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.processes import stop_process

SUITE, GLIBC = "bullseye", "2.31"
# The suites boards are made of, with the packages they add to minbase (tests/infra/lava.py's
# boards are the LAVA chroot itself, with its AArch64 runtime).
SUITES = {"bullseye": ("2.31", ())}
BINFMT = Path("/proc/sys/fs/binfmt_misc")
# qemu's own binfmt pattern for AArch64 ELF executables and shared objects (qemu-binfmt-conf.sh)
AARCH64_MAGIC = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
AARCH64_MASK = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"
DONE = ".hexbuild-rootfs-complete"


def cache_dir() -> Path:
    env = os.environ.get("HEXBUILD_TEST_CACHE")
    return Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hexbuild-tests"


def qemu_aarch64() -> str:
    path = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    if not path:
        raise RuntimeError("qemu-aarch64 is missing: run scripts/setup-test-env.sh (installs qemu-user)")
    return path


def debian_uri() -> str:
    """The machine's own Debian mirror, from its apt sources (as setup-test-env.sh reads it)."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "setup-test-env.sh"
    text = script.read_text()
    func = text[text.index("debian_uri() {"):text.index("\n}\n", text.index("debian_uri() {")) + 3]
    out = subprocess.run(["bash", "-c", func + "debian_uri"], capture_output=True, text=True).stdout.split()
    if not out:
        raise RuntimeError("cannot find the Debian mirror in the apt sources")
    return out[0]


# -- binfmt_misc ---------------------------------------------------------------------------------
@contextmanager
def binfmt_aarch64() -> Iterator[str]:
    """qemu-aarch64 registered for AArch64 ELF files under a unique name (F flag) while inside;
    only that entry is removed afterwards."""
    if not (BINFMT / "register").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], check=True)
    name = f"hexbuild-test-{os.getpid()}-{secrets.token_hex(3)}"
    (BINFMT / "register").write_text(f":{name}:M::{AARCH64_MAGIC}:{AARCH64_MASK}:{qemu_aarch64()}:F\n")
    try:
        yield name
    finally:
        entry = BINFMT / name
        if entry.exists():
            entry.write_text("-1")


# -- the root filesystem ---------------------------------------------------------------------------
def rootfs_path(suite: str = SUITE) -> Path:
    return cache_dir() / f"board-rootfs-{suite}-arm64"


def build_rootfs(log=print, suite: str = SUITE) -> Path:
    """The cached arm64 root filesystem of ``suite`` (bullseye unless said), built when missing
    (a few minutes). One builder at a time: a caller that finds another building (the setup's
    job left running beside the suite, or the other test worker) waits for it and takes its
    result."""
    from tests.infra.real_build import _lock

    root = rootfs_path(suite)
    if (root / DONE).exists():
        return root
    with _lock(root.with_name(root.name + ".lock")):
        return _build_rootfs(log, suite)


def _build_rootfs(log, suite: str) -> Path:
    glibc, include = SUITES[suite]
    root = rootfs_path(suite)
    if (root / DONE).exists():
        return root
    if os.geteuid() != 0:
        raise RuntimeError("building the board's root filesystem needs root (debootstrap, chroot)")
    part = root.with_name(root.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    logfile = cache_dir() / ("board-debootstrap.log" if suite == SUITE else f"board-debootstrap-{suite}.log")
    log(f"debootstrap --arch=arm64 --variant=minbase {suite} (virtual board root filesystem, log: {logfile})")
    extra = [f"--include={','.join(include)}"] if include else []
    with open(logfile, "wb") as out:
        first = subprocess.run(["debootstrap", "--arch=arm64", "--variant=minbase", "--foreign", *extra, suite,
                                str(part), debian_uri()], stdout=out, stderr=subprocess.STDOUT)
        if first.returncode != 0:
            raise RuntimeError(f"debootstrap (first stage) failed; see {logfile}")
        with binfmt_aarch64():
            second = subprocess.run(["chroot", str(part), "/debootstrap/debootstrap", "--second-stage"],
                                    stdout=out, stderr=subprocess.STDOUT)
        if second.returncode != 0:
            raise RuntimeError(f"debootstrap (second stage, under qemu) failed; see {logfile}")
    (part / "root").mkdir(mode=0o700, exist_ok=True)
    (part / DONE).write_text(f"{suite} arm64 glibc {glibc}\n")
    shutil.rmtree(root, ignore_errors=True)
    part.rename(root)
    return root


# -- sshd into the root filesystem -------------------------------------------------------------------
@dataclass
class VirtualBoard:
    host: str
    port: int
    user: str
    identity: Path
    known_hosts: Path
    root: Path  # the board's root filesystem as seen from this machine (its session overlay)
    glibc: str
    proc: subprocess.Popen
    image: Path  # the cached, never written, root filesystem under the overlay
    mountpoint: Path  # where the overlay is mounted inside sshd's namespace (empty outside)

    def stop(self) -> None:
        stop_process(self.proc)
        try:
            self.mountpoint.rmdir()
        except OSError:
            pass

    @property
    def spec(self) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}"

    @property
    def settings(self) -> dict:
        """Settings for parse_target: this host trusted, the generated client key."""
        return {"ssh.known_hosts": str(self.known_hosts), "ssh.identity": str(self.identity),
                "ssh.timeout": 30.0, "deploy.timeout": 300.0}

    @property
    def env(self) -> dict[str, str]:
        """The same as HEXBUILD_* variables, for CLI runs."""
        return {"HEXBUILD_SSH_KNOWN_HOSTS": str(self.known_hosts), "HEXBUILD_SSH_IDENTITY": str(self.identity),
                "HEXBUILD_SSH_TIMEOUT": "30"}

    def path(self, inside: str) -> Path:
        """A path on the board as a path on this machine."""
        return self.root / inside.lstrip("/")


def _chroot_parent() -> Path:
    """Where the board's mount point goes: in the test cache when every directory above it is
    root-owned and writable by root alone (sshd refuses a ChrootDirectory under anything else,
    such as a cache on /var/tmp), else under /run, which is."""
    base = cache_dir() / "board-mnt"
    base.mkdir(mode=0o755, parents=True, exist_ok=True)
    for d in [base, *base.parents]:
        st = d.stat()
        if st.st_uid != 0 or st.st_mode & 0o022:
            base = Path("/run/hexbuild-tests-board")
            base.mkdir(mode=0o755, exist_ok=True)
            break
    return base


def start_board(d: Path, root: Path, glibc: str = GLIBC) -> VirtualBoard:
    from tests.infra.devices import _need, free_port, wait_port

    sshd = _need("sshd", "openssh-server")
    keygen = _need("ssh-keygen", "openssh-client")
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "hexbuild-board", "-f", str(d / "client_key")],
                   check=True)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port = free_port()
    # each session writes to an overlay of its own: the cached root filesystem stays pristine and
    # nothing one test run deployed is there for the next
    upper, work = d / "upper", d / "work"
    # the mount point, empty on this machine (the overlay lives in sshd's namespace only), must be
    # on a root-owned path no one else can write, which a world-writable /tmp is not
    merged = _chroot_parent() / f"{os.getpid()}-{secrets.token_hex(3)}"
    for p in (upper, work, merged):
        p.mkdir(mode=0o755, parents=True)
    # sshd checks that every component of ChrootDirectory is root-owned and not group/other writable
    (d / "sshd_config").write_text(f"""ListenAddress 127.0.0.1
Port {port}
HostKey {d / 'host_key'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile none
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding local
Subsystem sftp internal-sftp
ChrootDirectory {merged}
""")
    mounts = " && ".join(f"mount --rbind /{m} {merged / m}" for m in ("proc", "sys", "dev"))
    script = (f"mount --make-rprivate / && mount -t overlay overlay -o lowerdir={root},upperdir={upper},"
              f'workdir={work} {merged} && {mounts} && exec "$@"')
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    with open(d / "sshd.log", "ab") as log:
        proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script, "sh", sshd, "-D", "-e", "-f", str(d / "sshd_config")],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, proc=proc, timeout=20)
    except RuntimeError as e:
        stop_process(proc)
        merged.rmdir()
        pytest.fail(f"the board's sshd did not start: {e}; log: {(d / 'sshd.log').read_text()[-2000:]}")
    key_type, key_b64 = (d / "host_key.pub").read_text().split()[:2]
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {key_type} {key_b64}\n")
    # the board's files as this machine sees them: through sshd's own mount namespace
    view = Path(f"/proc/{proc.pid}/root") / str(merged).lstrip("/")
    return VirtualBoard("127.0.0.1", port, "root", d / "client_key", d / "known_hosts", view, glibc, proc, root,
                        merged)


@pytest.fixture(scope="session")
def virtual_board(tmp_path_factory):
    """A bullseye arm64 board (glibc 2.31) reached as ssh://root@127.0.0.1:PORT."""
    try:
        root = build_rootfs(log=lambda m: print(f"[board] {m}", file=sys.stderr))
    except (RuntimeError, OSError) as e:
        pytest.fail(f"virtual board root filesystem: {e}")
    with binfmt_aarch64():
        board = start_board(tmp_path_factory.mktemp("board"), root)
        try:
            yield board
        finally:
            board.stop()


if __name__ == "__main__":
    if sys.argv[1:2] != ["build"] or len(sys.argv) > 3 or sys.argv[2:] and sys.argv[2] not in SUITES:
        sys.exit(f"usage: python -m tests.infra.board build [{'|'.join(SUITES)}]")
    try:
        print(build_rootfs(log=lambda m: print(f"setup-test-env: {m}", file=sys.stderr),
                           suite=(sys.argv[2:] or [SUITE])[0]))
    except RuntimeError as e:
        sys.exit(f"setup-test-env.sh: {e}")
