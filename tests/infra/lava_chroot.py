"""The LAVA server, scheduler and worker for the tests: LAVA 2026.10 from trixie-backports in a
Debian trixie chroot, built offline from the machine's own Debian mirror (read from its apt
sources, as scripts/setup-test-env.sh reads it) and cached in the test cache as ``lava-trixie``.

``python -m tests.infra.lava_chroot build`` (scripts/setup-test-env.sh, unless HEXBUILD_TEST_LAVA=0
opts out; beside the suite under scripts/test.sh) makes it; ``--check`` says (exit 0/1) whether it
is there. One builder at a time (a lock beside it): the ``lava_lab`` fixture waits for the
setup's build, or makes the chroot itself when nothing did.

The same root is the lab's boards' (tests/infra/lava.py): Debian trixie whose AArch64 runtime
(``libc6:arm64``, ``libstdc++6:arm64``, ``libgcc-s1:arm64``: glibc 2.41, as a trixie arm64 board
has; the open-toolchain package needs 2.34) runs the package's programs under qemu-aarch64
(binfmt_misc), while the boards' shell and tools are this machine's architecture. An arm64
debootstrap of its own, whose second stage runs every maintainer script under qemu, took 5 min
28 s once for what the job scripts run through a POSIX shell; here the runtime is three packages
more in the chroot's one apt run.

What the build leaves in the chroot, so that a session only starts processes:
- the packages (``apt-get install --no-install-recommends -t trixie-backports lava-server
  lava-dispatcher postgresql openssh-client ca-certificates wget`` and the AArch64 runtime), with
  a ``policy-rc.d`` that keeps their services from starting;
- a PostgreSQL cluster with LAVA's database made by ``dpkg-reconfigure lava-server``;
- a superuser ``admin`` (no token: each session makes its own), a worker ``lab``, the device
  type ``ssh`` with the devices ``board1`` and ``board2``, and the device type ``ssh-queue``
  whose one device, Good, sits on the worker ``nowhere`` that never connects: a job for it
  stays Submitted, as one for a board whose device dictionary does not validate.

Every command in the chroot runs in a private mount namespace (``unshare -m``) that holds its
/proc, /dev and /sys: nothing is mounted on this machine, and nothing outlives the command.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.infra.board import cache_dir, debian_uri

SUITE = "trixie"
PG = "17"
DONE = ".hexbuild-lava-complete"
PACKAGES = ["lava-server", "lava-dispatcher", "postgresql", "openssh-client", "ca-certificates",
            "wget"]  # wget: a board fetches a model URL with it
# the boards' AArch64 runtime: what the open-toolchain package's programs link (libc, libm,
# libstdc++, libgcc_s) and their loader, /lib/ld-linux-aarch64.so.1
ARM64_RUNTIME = ["libc6:arm64", "libstdc++6:arm64", "libgcc-s1:arm64"]
BOARD_GLIBC = "2.41"

# Made once at build time, inside the chroot (lava-server manage shell).
SETUP_DB = """
from django.contrib.auth.models import User
from lava_scheduler_app.models import Device, DeviceType, Worker
if not User.objects.filter(username="admin").exists():
    User.objects.create_superuser("admin", "", None)
lab, _ = Worker.objects.get_or_create(hostname="lab")
nowhere, _ = Worker.objects.get_or_create(hostname="nowhere")
ssh, _ = DeviceType.objects.get_or_create(name="ssh")
queue, _ = DeviceType.objects.get_or_create(name="ssh-queue")
for name, dt, w in (("board1", ssh, lab), ("board2", ssh, lab), ("nowhere", queue, nowhere)):
    d, _ = Device.objects.get_or_create(hostname=name, defaults={"device_type": dt, "worker_host": w})
    d.health = Device.HEALTH_GOOD
    d.save()
print("lava-setup-done")
"""


def chroot_path() -> Path:
    return cache_dir() / f"lava-{SUITE}"


def ready() -> bool:
    return (chroot_path() / DONE).exists()


def in_chroot(root: Path, script: str, *, log, timeout: float = 1800) -> None:
    """``script`` (sh) in the chroot, with its own /proc, /dev and /sys for the length of it."""
    mounts = (f"mount --make-rprivate / && mount -t proc proc {root}/proc && mount --rbind /dev {root}/dev "
              f"&& mount --rbind /sys {root}/sys")
    cmd = f"{mounts} && exec chroot {shlex.quote(str(root))} /bin/sh -c {shlex.quote(script)}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", cmd], stdout=log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"in the LAVA chroot: `{script[:120]}` exited {done.returncode}; see {log.name}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build(log=print) -> Path:
    """The cached chroot (made when missing: debootstrap, the packages, the database). A build
    cut off resumes at the stage it was in (each stage leaves a mark in the part directory). A
    caller that finds another building (the setup's job beside the suite) waits and takes its
    result."""
    from tests.infra.real_build import _lock

    root = chroot_path()
    if (root / DONE).exists():
        return root
    if os.geteuid() != 0:
        raise RuntimeError("building the LAVA chroot needs root (debootstrap, chroot, mount)")
    with _lock(root.with_name(root.name + ".lock")):
        return _build(log)


def _build(log) -> Path:
    root = chroot_path()
    if (root / DONE).exists():
        return root
    if os.geteuid() != 0:
        raise RuntimeError("building the LAVA chroot needs root (debootstrap, chroot, mount)")
    part = root.with_name(root.name + ".part")
    logfile = cache_dir() / "lava-build.log"
    uri = debian_uri()
    steps = {}
    with open(logfile, "ab") as out:
        if not (part / ".stage-debootstrap").exists():
            shutil.rmtree(part, ignore_errors=True)
            t = time.monotonic()
            log(f"debootstrap --variant=minbase {SUITE} (LAVA chroot, log: {logfile})")
            if subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(part), uri], stdout=out,
                              stderr=subprocess.STDOUT).returncode != 0:
                raise RuntimeError(f"debootstrap {SUITE} failed; see {logfile}")
            (part / ".stage-debootstrap").write_text(f"{time.monotonic() - t:.0f}\n")
        steps["debootstrap"] = float((part / ".stage-debootstrap").read_text())
        if not (part / ".stage-apt").exists():
            (part / "etc/apt/sources.list").unlink(missing_ok=True)
            (part / "etc/apt/sources.list.d/debian.sources").write_text(
                f"Types: deb\nURIs: {uri}\nSuites: {SUITE} {SUITE}-backports\nComponents: main\n"
                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
            policy = part / "usr/sbin/policy-rc.d"
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
            t = time.monotonic()
            log(f"installing LAVA from {SUITE}-backports into the chroot")
            in_chroot(part, "export DEBIAN_FRONTEND=noninteractive && dpkg --add-architecture arm64 "
                            "&& apt-get update -qq && apt-get install -y -q --no-install-recommends "
                            f"-t {SUITE}-backports {' '.join(PACKAGES + ARM64_RUNTIME)} && apt-get clean "
                            "&& rm -rf /var/lib/apt/lists/*", log=out)
            (part / ".stage-apt").write_text(f"{time.monotonic() - t:.0f}\n")
        steps["apt"] = float((part / ".stage-apt").read_text())
        t = time.monotonic()
        log("LAVA's database (dpkg-reconfigure lava-server), the admin, the worker and the devices")
        # LAVA's postinst would write PORT 5432 and connect there over TCP, where another server
        # may listen on this machine: the cluster gets a free port, and LAVA that one
        port = _free_port()
        (part / "etc/lava-server/settings.d/00-database.yaml").write_text(
            "DATABASES:\n  default:\n    ENGINE: \"django.db.backends.postgresql\"\n    NAME: \"lavaserver\"\n"
            f"    USER: \"lavaserver\"\n    PASSWORD: \"{secrets.token_hex(8)}\"\n    HOST: \"127.0.0.1\"\n"
            f"    PORT: {port}\n")
        (part / "tmp/setup-db.py").write_text(SETUP_DB)
        conf = part / f"etc/postgresql/{PG}/main/postgresql.conf"
        text = re.sub(r"(?m)^port = \d+", f"port = {port}", conf.read_text())
        conf.write_text(re.sub(r"(?m)^#?listen_addresses = '[^']*'", "listen_addresses = '127.0.0.1'", text))
        in_chroot(part, "chown lavaserver:lavaserver /etc/lava-server/settings.d/00-database.yaml "
                        "&& chmod 640 /etc/lava-server/settings.d/00-database.yaml "
                        f"&& pg_ctlcluster {PG} main start && export PGPORT={port} "
                        "&& DEBIAN_FRONTEND=noninteractive dpkg-reconfigure -fnoninteractive lava-server "
                        "&& lava-server manage shell -c \"exec(open('/tmp/setup-db.py').read())\" "
                        f"; rc=$?; pg_ctlcluster {PG} main stop; rm -f /tmp/setup-db.py; exit $rc", log=out)
        steps["database"] = time.monotonic() - t
    (part / DONE).write_text(" ".join(f"{k}={v:.0f}s" for k, v in steps.items()) + "\n")
    for mark in part.glob(".stage-*"):
        mark.unlink()
    shutil.rmtree(root, ignore_errors=True)
    part.rename(root)
    return root


def _main(argv: list[str]) -> int:
    if argv not in (["build"], ["build", "--check"]):
        print("usage: python -m tests.infra.lava_chroot build [--check]", file=sys.stderr)
        return 2
    if "--check" in argv:
        return 0 if ready() else 1
    try:
        t = time.monotonic()
        root = build(log=lambda m: print(f"setup-test-env: {m}", file=sys.stderr))
        print(f"setup-test-env: LAVA chroot ready ({time.monotonic() - t:.0f}s; stages: "
              f"{(root / DONE).read_text().strip()})", file=sys.stderr)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"setup-test-env.sh: {e}", file=sys.stderr)
        return 3
    print(chroot_path())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
