"""A real Docker engine for the tests, and the toolchain image it builds with.

The session fixture ``docker_host`` starts its own ``dockerd`` (no bridge, no iptables) with the
image store under ``~/.cache/hexbuild-tests/docker-data`` so images survive between runs, and
stops it by PID at the end. The daemon's registry traffic goes to a closed loopback port
(HTTP(S)_PROXY), so any pull fails at once and never leaves the machine. Go never proxies
loopback addresses, so a registry on 127.0.0.1 (tests/infra/registry.py) is reached directly.

``toolchain_images`` makes the toolchain double, the stand-in for the vendor's Snapdragon toolchain
image with real compilers (tests/infra/toolchain_double.py: hexbuild's open toolchain image plus
LLVM 21 for Hexagon and the SDK stand-in of docker/toolchain-fixture/, whose headers are
hexbuild/dsp/include's), tagged like the vendor's image. It is rebuilt only when one of its inputs
changes.

Set HEXBUILD_TEST_DOCKER_HOST to use an engine you started yourself instead.
The benchmark (benchmarks/build_overhead.py) uses the same functions outside pytest.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.processes import stop_process

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "docker"
FIXTURE_DOCKERFILE = "Dockerfile.toolchain-fixture"

ANDROID_IMAGE = "hexbuild.test/snapdragon-toolchain/arm64-android:v0.7"
LINUX_IMAGE = "hexbuild.test/snapdragon-toolchain/arm64-linux:v0.7"
# A port nothing listens on: the daemon's registry requests are refused on loopback.
DEAD_PROXY = "http://127.0.0.1:9"


class InfraError(Exception):
    """Infrastructure that is missing or busy; the message says what to run."""


def worker_suffix() -> str:
    """"" in a plain run and in pytest-xdist's first worker, "-gw1" and so on in the others: each
    worker runs its own engine (and registry) on state of its own, kept from run to run, so a
    test that counts the engine's containers sees only its own worker's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    suffix = f"-{worker}" if worker not in ("", "gw0") else ""
    # Two test sessions at once (two checkouts of one machine) would share the engines' state:
    # HEXBUILD_TEST_ENGINE names a set of engines of their own.
    session = os.environ.get("HEXBUILD_TEST_ENGINE", "")
    return f"-{session}{suffix}" if session else suffix


def cache_dir() -> Path:
    env = os.environ.get("HEXBUILD_TEST_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hexbuild-tests"
    base.mkdir(parents=True, exist_ok=True)
    return base


@dataclass
class DockerDaemon:
    cache: Path
    pid: int | None = None
    proc: subprocess.Popen | None = None
    lock_fd: int | None = None
    run_dir: Path = field(default_factory=lambda: Path(f"/tmp/hbx-{os.getpid()}"))

    suffix: str = field(default_factory=worker_suffix)

    @property
    def data_root(self) -> Path:
        return self.cache / f"docker-data{self.suffix}"

    @property
    def pidfile(self) -> Path:
        return self.cache / f"dockerd{self.suffix}.pid"

    @property
    def socket(self) -> Path:
        return self.run_dir / "docker.sock"

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def log_path(self) -> Path:
        return self.cache / f"dockerd{self.suffix}.log"

    def start(self, timeout: float = 60.0) -> None:
        dockerd = _which("dockerd")
        self._lock()
        self._check_stale()
        self.data_root.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env[k] = DEAD_PROXY
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
        env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin"
        argv = [dockerd, "--data-root", str(self.data_root), "--exec-root", str(self.run_dir / "exec"),
                "-H", self.host, "--pidfile", str(self.pidfile), "--bridge=none", "--iptables=false",
                "--ip-masq=false", "--userland-proxy=false"]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        log.close()
        self.pid = self.proc.pid
        deadline = time.monotonic() + timeout
        import docker

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise InfraError(f"dockerd exited with {self.proc.returncode}; its log ({self.log_path}) ends:\n"
                                 + _tail(self.log_path))
            if self.socket.exists():
                try:
                    docker.DockerClient(base_url=self.host, timeout=5).ping()
                    return
                except Exception:
                    pass
            time.sleep(0.2)
        self.stop()
        raise InfraError(f"dockerd did not answer on {self.socket} within {timeout:g}s; log:\n" + _tail(self.log_path))

    def stop(self) -> None:
        try:
            if self.proc is not None:
                stop_process(self.proc, grace=30)
        finally:
            self.proc = None
            shutil.rmtree(self.run_dir, ignore_errors=True)
            if self.lock_fd is not None:
                os.close(self.lock_fd)
                self.lock_fd = None

    def _lock(self) -> None:
        path = self.cache / f"docker-data{self.suffix}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise InfraError(f"another test session's dockerd is using {self.data_root} (lock {path} is held); "
                                 "wait for it to finish, or set HEXBUILD_TEST_CACHE to another directory") from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.lock_fd = fd

    def _check_stale(self) -> None:
        """A dockerd left running by a killed session still owns the data root: say so, by PID."""
        if not self.pidfile.exists():
            return
        try:
            pid = int(self.pidfile.read_text().strip() or "0")
        except ValueError:
            pid = 0
        cmdline = b""
        if pid:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                cmdline = b""
        if b"dockerd" in cmdline and str(self.data_root).encode() in cmdline:
            raise InfraError(f"a dockerd from an earlier test run (pid {pid}) still uses {self.data_root}; "
                             f"stop it with `kill {pid}` and run the tests again")
        self.pidfile.unlink(missing_ok=True)


def engine_for_benchmark() -> tuple[DockerDaemon | None, str]:
    """The benchmarks' engine: $DOCKER_HOST when set, else a dockerd of their own on the test
    cache (the daemon is returned so the caller stops it)."""
    host = os.environ.get("DOCKER_HOST")
    if host:
        return None, host
    daemon = DockerDaemon(cache_dir())
    daemon.start()
    return daemon, daemon.host


def _which(program: str) -> str:
    for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/usr/bin", "/sbin"]:
        p = Path(d) / program
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise InfraError(f"{program} not found: run scripts/setup-test-env.sh (it installs docker.io)")


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


# --- images -------------------------------------------------------------------------------

def ensure_toolchain_images(client, cache: Path) -> dict[str, str]:
    """The toolchain double's images (tests/infra/toolchain_double.py), tagged like the vendor's:
    {"android": ref, "linux": ref, "base": the open toolchain image they are built on}."""
    from tests.infra import toolchain_double
    from tests.infra.real_build import ensure_open_image_on

    made = toolchain_double.ensure(client, cache, {"arm64-android": [ANDROID_IMAGE], "arm64-linux": [LINUX_IMAGE]})
    return {"android": made["arm64-android"], "linux": made["arm64-linux"], "base": ensure_open_image_on(client, cache)}


# --- pytest fixtures --------------------------------------------------------------------

@pytest.fixture(scope="session")
def docker_host():
    """The URL of a running test Docker engine (unix socket)."""
    external = os.environ.get("HEXBUILD_TEST_DOCKER_HOST")
    if external:
        yield external
        return
    daemon = DockerDaemon(cache_dir())
    try:
        daemon.start()
    except InfraError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield daemon.host
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def docker_client(docker_host):
    import docker

    client = docker.DockerClient(base_url=docker_host, timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="session")
def toolchain_images(docker_client) -> dict[str, str]:
    """{"android": ref, "linux": ref, "base": ref} of the fixture toolchain images."""
    try:
        return ensure_toolchain_images(docker_client, cache_dir())
    except InfraError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def docker_env(docker_host, monkeypatch):
    """DOCKER_HOST pointing at the test engine, for code under test that reads the environment."""
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    for k in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT"):
        monkeypatch.delenv(k, raising=False)
    return docker_host
