"""Give a virtual device the files and device nodes a real Snapdragon device has (or lacks), at
their real paths inside the device's own namespace — never on this machine's / or /dev.

- ``make_fastrpc_phone(soc, ...)`` (per test): a virtual phone (real adbd chrooted into its own
  Android root, tests/infra/devices.py) whose /dev is DEVROOT/dev (the host's basic nodes re-made
  there with mknod, the host's ptys and an shm of its own mounted inside) instead of the host's
  /dev; /vendor is the phone root's own directory. A test changes the phone while it runs,
  through ``phone.files``.
- ``DeviceFiles``: add or remove a dummy ``libcdsprpc.so``, FastRPC nodes (character devices made
  with mknod under DEVROOT/dev), the unsigned PD shell, programs such as a ``getenforce``
  answering a mode, and getprop values.
- ``board_root(dir)`` / ``run_in_board``: the same for a Linux board that is this machine
  (``local:`` targets): a command runs under ``unshare -m`` with DEVROOT/dev over /dev, a
  read-only overlay of DEVROOT/usr/lib over /usr/lib and a /sys/devices/soc0/machine naming
  the board's SoC.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

FASTRPC_MAJOR = 240  # any free char major: the driver is absent, only the node's type is seen
# Host /dev entries a shell, adbd and Python need.
_BASIC = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "kmsg", "console")
_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}


def make_devfs(dev: Path) -> None:
    """DEVROOT/dev: the basic nodes of this machine's /dev (same type and numbers), its
    /proc/self links, and mount points for pts and shm."""
    dev.mkdir(parents=True, exist_ok=True)
    for name in _BASIC:
        src = Path("/dev") / name
        try:
            st = src.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISCHR(st.st_mode) and not (dev / name).exists():
            os.mknod(dev / name, st.st_mode, st.st_rdev)
    for name, target in _LINKS.items():
        if not (dev / name).is_symlink():
            (dev / name).symlink_to(target)
    (dev / "pts").mkdir(exist_ok=True)
    (dev / "shm").mkdir(exist_ok=True)


# Inside the namespace: keep the host's ptys, give shm its own tmpfs, then swap /dev.
DEV_SETUP = ('mount --bind /dev/pts "$DEVROOT/dev/pts" && mount -t tmpfs -o mode=1777 shm "$DEVROOT/dev/shm" '
             '&& mount --rbind "$DEVROOT/dev" /dev && ')
# The phone (devices.py, userland "android") chroots into $R: its /dev is replaced the same way.
PHONE_SETUP = DEV_SETUP.replace(" /dev && ", ' "$R/dev" && ')


@dataclass
class DeviceFiles:
    """A device's own tree: device path /X is ``root/X`` and /dev/X is ``dev/X``; ``bin`` is a
    directory on the device's PATH (the phone's /system/bin)."""

    root: Path
    dev: Path
    bin: Path | None = None

    def path(self, device_path: str) -> Path:
        if device_path.startswith("/dev/"):
            return self.dev / device_path[len("/dev/"):]
        return self.root / device_path.lstrip("/")

    def add_file(self, device_path: str, data: bytes = b"", mode: int = 0o644) -> Path:
        p = self.path(device_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
        return p

    def add_node(self, device_path: str, *, mode: int = 0o666, minor: int = 0) -> Path:
        """A character device node (no driver behind it), as the FastRPC driver makes."""
        p = self.path(device_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            p.unlink()
        os.mknod(p, stat.S_IFCHR | mode, os.makedev(FASTRPC_MAJOR, minor))
        p.chmod(mode)
        return p

    def remove(self, device_path: str) -> None:
        p = self.path(device_path)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()

    def add_program(self, name: str, script: str) -> Path:
        """A script named ``name`` on the device's PATH, replacing a toybox applet link."""
        assert self.bin is not None
        p = self.bin / name
        if p.exists() or p.is_symlink():
            p.unlink()  # never write through the link into toybox itself
        p.write_text(script)
        p.chmod(0o755)
        return p

    def set_getenforce(self, mode: str | None) -> None:
        """A getenforce answering ``mode``; None: no getenforce at all."""
        if mode is None:
            p = self.bin / "getenforce"
            if p.exists() or p.is_symlink():
                p.unlink()
            return
        self.add_program("getenforce", f"#!/system/bin/sh\necho {shlex.quote(mode)}\n")

    def set_prop(self, name: str, value: str) -> None:
        """What the phone's getprop answers for ``name`` (it reads the props file beside it)."""
        props = self.bin / "props"
        lines = [ln for ln in (props.read_text().splitlines() if props.exists() else []) if not ln.startswith(name + "=")]
        props.write_text("\n".join([*lines, f"{name}={value}"]) + "\n")


PHONE_RUNTIME = {"lib": "/vendor/lib64/libcdsprpc.so", "node": "/dev/adsprpc-smd",
                 "shell": "/vendor/dsp/cdsp/fastrpc_shell_unsigned_3"}
BOARD_RUNTIME = {"lib": "/usr/lib/libcdsprpc.so", "node": "/dev/fastrpc-cdsp",
                 "shell": "/usr/lib/dsp/fastrpc_shell_unsigned_3"}


def give_runtime(files: DeviceFiles, runtime: dict[str, str]) -> None:
    """What a working Snapdragon device has: the FastRPC library, its node, the unsigned PD shell."""
    files.add_file(runtime["lib"], b"\x7fELF dummy libcdsprpc\n")
    files.add_node(runtime["node"])
    files.add_file(runtime["shell"], b"\x7fELF dummy shell\n")


def prepare_phone(root: Path) -> None:
    make_devfs(root / "dev")


def phone_files(dev) -> DeviceFiles:
    sysroot = dev.root / "sysroot"
    return DeviceFiles(sysroot, dev.root / "dev", sysroot / "system" / "bin")


@pytest.fixture
def make_fastrpc_phone(make_device):
    """make_fastrpc_phone(soc="SM8650", runtime=True, selinux="Enforcing", release="14",
    setup_extra="", **make_device options) → a virtual phone with ``.files`` (DeviceFiles) and,
    unless runtime=False, a working FastRPC runtime at the real paths. ``setup_extra`` is more
    shell for adbd's namespace (the phone's root is "$R")."""
    def make(soc: str = "SM8650", *, runtime: bool = True, selinux: str | None = "Enforcing",
             release: str = "14", setup_extra: str = "", **kw):
        dev = make_device(soc, prepare=prepare_phone, setup=PHONE_SETUP + setup_extra, **kw)
        dev.files = phone_files(dev)
        if runtime:
            give_runtime(dev.files, PHONE_RUNTIME)
        dev.files.set_getenforce(selinux)
        dev.files.set_prop("ro.build.version.release", release)
        dev.files.set_prop("ro.build.version.sdk", {"13": "33", "14": "34", "15": "35"}.get(release, "34"))
        return dev

    return make


# -- a Linux board that is this machine ---------------------------------------------------------
def board_root(base: Path, *, runtime: bool = True, soc: str | None = "QCM6490") -> DeviceFiles:
    """DEVROOT for ``run_in_board``: dev/ (basic nodes), usr/lib/ (an overlay's upper files) and
    soc0/machine (the board's /sys/devices/soc0/machine, as Qualcomm Linux kernels give it)."""
    base.mkdir(parents=True, exist_ok=True)
    if soc:
        (base / "soc0").mkdir(exist_ok=True)
        (base / "soc0" / "machine").write_text(soc + "\n")
    make_devfs(base / "dev")
    (base / "usr" / "lib").mkdir(parents=True, exist_ok=True)
    files = DeviceFiles(base, base / "dev")
    if runtime:
        give_runtime(files, BOARD_RUNTIME)
    return files


def run_in_board(files: DeviceFiles, argv: list[str], *, env: dict[str, str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``argv`` in a mount namespace where /dev and /usr/lib are the board's."""
    script = ('mount --make-rprivate / && ' + DEV_SETUP +
              'mount -t overlay board-usr-lib -o lowerdir="$DEVROOT/usr/lib":/usr/lib /usr/lib && '
              '{ [ ! -f "$DEVROOT/soc0/machine" ] || { mount -t tmpfs board-sys-devices /sys/devices && '
              'mkdir /sys/devices/soc0 && cp "$DEVROOT/soc0/machine" /sys/devices/soc0/machine; }; } && exec "$@"')
    full_env = {**os.environ, **(env or {}), "DEVROOT": str(files.root)}
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *argv], capture_output=True, text=True,
                          env=full_env, timeout=timeout, stdin=subprocess.DEVNULL)
