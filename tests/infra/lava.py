"""A real LAVA lab for the tests: PostgreSQL, LAVA's web API (gunicorn), its publisher, scheduler
and one worker, from the cached trixie chroot (tests/infra/lava_chroot.py), with two SSH boards
of the device type ``ssh``: virtual trixie boards (tests/infra/board.py's sshd, chrooted into an
overlay of the same chroot, whose AArch64 runtime has glibc 2.41: the package's programs run
under qemu-aarch64) whose sshd has the SFTP subsystem that OpenSSH 10's scp speaks.

- The chroot is the lower layer of an overlay mounted in a mount namespace of the session's own
  (held by one process; /proc, /dev and /sys are mounted in it): the database, the jobs and
  their logs are written to the session's temporary directory, and the cache stays pristine.
- Every service runs in that namespace (``nsenter``), chrooted, as a child of this process, and
  is stopped by its PID at the end; PostgreSQL listens on a free loopback port, the API on
  another, the event stream on a third (the scheduler schedules on its events at once instead
  of every 20 s; the worker pings every second), nothing on another address.
- Each session makes a new API token (``lab.token``) and worker token.

The LAVA tests run by default (scripts/test.sh builds the chroot beside the suite, as the other
root filesystems); ``HEXBUILD_TEST_LAVA=0`` opts out for a quick local run, and the ``lava_lab``
fixture then skips tests/test_lab.py, as it does where it cannot run (not root).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.infra.board import VirtualBoard, binfmt_aarch64, start_board
from tests.processes import stop_process

LAVA_TESTS_ENV = "HEXBUILD_TEST_LAVA"


@dataclass
class LavaLab:
    url: str
    token: str
    device_type: str  # two Good boards
    queue_type: str  # one Good device on a worker that never connects
    boards: list[VirtualBoard]
    root: Path  # the chroot as this machine sees it (through the holder's namespace)
    logs: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    merged: Path = Path("/nonexistent")  # the overlay's mount point inside the holder's namespace

    @property
    def env(self) -> dict[str, str]:
        return {"HEXBUILD_LAB_URL": self.url, "HEXBUILD_LAB_TOKEN": self.token,
                "HEXBUILD_LAB_DEVICE_TYPE": self.device_type, "HEXBUILD_LAB_POLL": "0.5"}

    def manage(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """``lava-server manage ARGS`` in the lab's chroot."""
        return _in(self.procs["holder"].pid, self.merged, ["lava-server", "manage", *args], capture=True,
                   timeout=timeout)


def _in(holder: int, merged: Path, argv: list[str], *, capture: bool = False, timeout: float | None = None,
        log=None, user: str | None = None):
    """A command in the lab's namespace and chroot: run to the end (capture) or started (log)."""
    cmd = ["nsenter", "-t", str(holder), "-m", "--", "chroot"]
    if user:
        cmd.append(f"--userspec={user}:{user}")
    cmd += [str(merged), *argv]
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOME": "/root"}
    if capture:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)


def _wait(check, what: str, timeout: float, procs: dict[str, subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} (pid {p.pid}) exited {p.returncode} while waiting for {what}")
        try:
            if check():
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{what}: not within {timeout:g}s")


def _mount_parent() -> Path:
    base = Path("/run/hexbuild-tests-lava")
    base.mkdir(mode=0o755, exist_ok=True)
    return base


def start_lab(d: Path, boards: list[VirtualBoard]) -> LavaLab:
    import requests

    from tests.infra import lava_chroot  # here, not at the top: pytest loads it as a plugin after this one
    from tests.infra.devices import free_port

    image = lava_chroot.chroot_path()
    upper, work, logs = d / "upper", d / "work", d / "logs"
    merged = _mount_parent() / f"{os.getpid()}-{secrets.token_hex(3)}"
    for p in (upper, work, logs, merged):
        p.mkdir(parents=True, mode=0o755)
    script = (f"mount --make-rprivate / && mount -t overlay overlay -o lowerdir={image},upperdir={upper},"
              f"workdir={work} {merged} && mount -t proc proc {merged}/proc && mount --rbind /dev {merged}/dev "
              f"&& mount --rbind /sys {merged}/sys && exec sleep 86400")
    holder = subprocess.Popen(["unshare", "-m", "sh", "-c", script], stdin=subprocess.DEVNULL,
                              stdout=open(logs / "holder.log", "wb"), stderr=subprocess.STDOUT)
    lab = LavaLab("", "", "ssh", "ssh-queue", boards, Path(f"/proc/{holder.pid}/root") / str(merged).lstrip("/"),
                  logs, {"holder": holder})
    lab.merged = merged
    try:
        _wait(lambda: (lab.root / "etc/lava-server").is_dir(), "the LAVA chroot's overlay", 20, {"holder": holder})
        _configure(lab, boards, pg_port := free_port(), event_port := free_port())
        _start(lab, "postgres", ["/usr/lib/postgresql/17/bin/postgres", "-D", "/var/lib/postgresql/17/main",
                                 "-c", "config_file=/etc/postgresql/17/main/postgresql.conf",
                                 "-c", f"port={pg_port}", "-c", "listen_addresses=127.0.0.1"], user="postgres")
        from tests.infra.devices import wait_port

        wait_port(pg_port, timeout=60, proc=lab.procs["postgres"])
        lab.token, worker_token = secrets.token_hex(24), secrets.token_hex(16)
        setup = (f"from django.contrib.auth.models import User\n"
                 f"from linaro_django_xmlrpc.models import AuthToken\n"
                 f"from lava_scheduler_app.models import Worker\n"
                 f"u = User.objects.get(username='admin')\n"
                 f"AuthToken.objects.filter(user=u).delete()\n"
                 f"AuthToken.objects.create(user=u, secret={lab.token!r}, description='hexbuild tests')\n"
                 f"w = Worker.objects.get(hostname='lab')\n"
                 f"w.token = {worker_token!r}\nw.save()\n")
        (lab.root / "tmp/session.py").write_text(setup)
        cp = lab.manage("shell", "-c", "exec(open('/tmp/session.py').read())")
        if cp.returncode != 0:
            raise RuntimeError(f"setting the lab's tokens failed: {cp.stderr[-2000:]}")
        (lab.root / "tmp/session.py").unlink()
        port = free_port()
        lab.url = f"http://127.0.0.1:{port}"
        _start(lab, "publisher", ["lava-server", "manage", "lava-publisher", "--level", "INFO"])
        _start(lab, "gunicorn", _api_argv(port))
        _start(lab, "scheduler", ["lava-server", "manage", "lava-scheduler", "--level", "INFO",
                                  "--event-url", f"tcp://127.0.0.1:{event_port}"])
        _wait(lambda: requests.get(f"{lab.url}/api/v0.2/system/version/", timeout=2).ok, "LAVA's API", 90, lab.procs)
        _start(lab, "worker", ["lava-worker", "--level", "INFO", "--url", f"{lab.url}/", "--token", worker_token,
                               "--name", "lab", "--ping-interval", "1", "--job-log-interval", "1"])
        headers = {"Authorization": f"Token {lab.token}"}

        def online() -> bool:
            w = requests.get(f"{lab.url}/api/v0.2/workers/lab/", headers=headers, timeout=2).json()
            return w.get("state") == "Online"

        _wait(online, "the LAVA worker online", 90, lab.procs)
        return lab
    except BaseException:
        stop_lab(lab)
        raise


def _configure(lab: LavaLab, boards: list[VirtualBoard], pg_port: int, event_port: int) -> None:
    etc = lab.root / "etc/lava-server"
    db = etc / "settings.d/00-database.yaml"
    db.write_text(re.sub(r"(?m)^(\s*PORT:) \d+", rf"\g<1> {pg_port}", db.read_text()))
    (etc / "settings.d/01-hexbuild-tests.yaml").write_text(
        'ALLOWED_HOSTS: ["127.0.0.1", "localhost"]\nEVENT_NOTIFICATION: true\n'
        f'EVENT_SOCKET: "tcp://127.0.0.1:{event_port}"\n')
    devices = etc / "dispatcher-config/devices"
    devices.mkdir(parents=True, exist_ok=True)
    for name, board in (("board1", boards[0]), ("board2", boards[-1]), ("nowhere", boards[0])):
        key = etc / f"{name}_key"
        shutil.copy(board.identity, key)
        key.chmod(0o600)
        (devices / f"{name}.jinja2").write_text(
            "{% extends 'ssh.jinja2' %}\n"
            f"{{% set ssh_host = '{board.host}' %}}\n{{% set ssh_port = {board.port} %}}\n"
            f"{{% set ssh_user = '{board.user}' %}}\n{{% set ssh_identity_file = '/etc/lava-server/{name}_key' %}}\n"
            "{% block schroot %}{% endblock schroot %}\n")
    (lab.root / "var/run/postgresql").mkdir(parents=True, exist_ok=True)
    (lab.root / "var/run/postgresql").chmod(0o2775)
    pg_uid = (lab.root / "var/lib/postgresql/17/main").stat().st_uid
    os.chown(lab.root / "var/run/postgresql", pg_uid, pg_uid)


def _start(lab: LavaLab, name: str, argv: list[str], *, user: str | None = None) -> None:
    log = open(lab.logs / f"{name}.log", "ab")
    lab.procs[name] = _in(lab.procs["holder"].pid, lab.merged, argv, log=log, user=user)


def _api_argv(port: int) -> list[str]:
    return ["gunicorn3", "lava_server.wsgi", "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread",
            "--workers", "2", "--threads", "4", "-u", "lavaserver", "-g", "lavaserver"]


def restart_api(lab: LavaLab, *, down_s: float) -> None:
    """LAVA's web API (gunicorn) stopped, ``down_s`` seconds of nothing, and started again."""
    import requests

    port = int(lab.url.rsplit(":", 1)[1])
    stop_process(lab.procs["gunicorn"], grace=20)
    time.sleep(down_s)
    _start(lab, "gunicorn", _api_argv(port))
    _wait(lambda: requests.get(f"{lab.url}/api/v0.2/system/version/", timeout=2).ok, "LAVA's API again", 90,
          lab.procs)


def stop_lab(lab: LavaLab) -> None:
    for name in ("worker", "scheduler", "gunicorn", "publisher", "postgres", "holder"):
        p = lab.procs.get(name)
        if p is not None:
            stop_process(p, grace=20)
    try:
        lab.merged.rmdir()
    except OSError:
        pass


def skip_reason(env=os.environ, euid: int | None = None) -> str | None:
    """Why the LAVA tests cannot run in this session, or None: they run by default, and skip only
    when the run opted out or the machine lacks what a lab needs."""
    if env.get(LAVA_TESTS_ENV) == "0":
        return f"the LAVA tests were opted out ({LAVA_TESTS_ENV}=0)"
    if (os.geteuid() if euid is None else euid) != 0:
        return "a LAVA lab needs root: its chroot, overlay and mount namespace"
    return None


@pytest.fixture(scope="session")
def lava_lab(tmp_path_factory):
    """A running LAVA lab with two SSH boards (device type ``ssh``) and a queue that never moves
    (``ssh-queue``). The chroot is the setup's (built beside the suite under scripts/test.sh: this
    waits for it), else made here. Skips when the run opted out (HEXBUILD_TEST_LAVA=0) or is not
    root (the chroot, its overlay and mount namespace need it)."""
    import sys

    from tests.infra import lava_chroot

    if (why := skip_reason()) is not None:
        pytest.skip(why)
    try:
        root = lava_chroot.build(log=lambda m: print(f"[lava] {m}", file=sys.stderr))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"the LAVA chroot: {e}")
    d = tmp_path_factory.mktemp("lava")
    with binfmt_aarch64():
        boards = []
        try:
            for i in (1, 2):
                boards.append(start_board(d / f"board{i}", root, glibc=lava_chroot.BOARD_GLIBC))
            lab = start_lab(d / "lab", boards)
            try:
                yield lab
            finally:
                stop_lab(lab)
        finally:
            for b in boards:
                b.stop()
