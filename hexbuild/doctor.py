"""Checks of what the requested work needs: Python packages, the Docker engine, adb and its
devices, SSH agent and keys, the source tree. Each check says what it found and, when it
fails, how to fix it. Which checks are *required* depends on the work asked for."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import socket
import stat
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

WORK = ("build", "deploy", "run", "release", "kernels")

PY_PACKAGES = {  # import name -> distribution name
    "typer": "typer", "rich": "rich", "docker": "docker", "paramiko": "paramiko",
    "jinja2": "Jinja2", "elftools": "pyelftools", "gguf": "gguf",
}

# Which checks each kind of work cannot do without.
REQUIRED = {
    "build": {"python", "docker", "source"},
    "deploy": {"python", "adb"},
    "run": {"python", "adb"},
    "release": {"python", "docker", "source"},
    "kernels": {"python", "docker", "source", "kernel-image"},
}


@dataclass
class Check:
    name: str
    status: str  # ok | missing | warn | info
    detail: str
    required: bool = False
    fix: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def run_checks(*, work: list[str], source: Path, docker_engine: str = "docker") -> list[Check]:
    required: set[str] = {"python"}
    for w in work:
        required |= REQUIRED[w]
    if docker_engine == "local":
        required.discard("docker")
    checks = [*check_python(), check_docker(), check_adb(), *check_ssh(), check_source(source)]
    if "kernels" in work:
        checks.append(check_kernel_image())
    for c in checks:
        c.required = c.name.split(":")[0] in required
    return checks


def check_python() -> list[Check]:
    out = []
    for mod, dist in PY_PACKAGES.items():
        if importlib.util.find_spec(mod) is None:
            out.append(Check(f"python:{dist}", "missing", "not installed", fix=f"pip install '{dist}'"))
            continue
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        out.append(Check(f"python:{dist}", "ok", version))
    return out


def check_docker() -> Check:
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        return Check("docker", "missing", "the docker Python package is missing", fix="pip install docker")
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=5)
        try:
            v = client.version()
        finally:
            client.close()
    except DockerException:
        return Check("docker", "missing", f"no Docker engine answers at {host}",
                     fix="start the Docker engine (systemctl start docker) or set DOCKER_HOST")
    arch = v.get("Arch", "?")
    amd64 = arch in ("amd64", "x86_64")
    detail = f"engine {v.get('Version', '?')} (API {v.get('ApiVersion', '?')}), {v.get('Os', '?')}/{arch} at {host}"
    if not amd64:
        binfmt = Path("/proc/sys/fs/binfmt_misc/qemu-x86_64").exists()
        if not binfmt:
            return Check("docker", "missing", detail + "; cannot run linux/amd64 images",
                         fix="install qemu-user-static/binfmt for x86_64 or use an amd64 engine")
        detail += "; linux/amd64 through qemu binfmt (slow)"
    return Check("docker", "ok", detail + ("; runs linux/amd64" if amd64 else ""))


def check_kernel_image() -> Check:
    """The kernel check's emulator and compilers: its image, for this recipe, on the engine."""
    from .kernels.image import QEMU_VERSION, find, image_ref

    ref = image_ref()
    try:
        import docker
        from docker.errors import DockerException

        client = docker.from_env(timeout=5)
        try:
            attrs = find(client)
        finally:
            client.close()
    except (ImportError, DockerException):
        return Check("kernel-image", "missing", f"{ref}: no Docker engine to look on",
                     fix="start the Docker engine, then `hexbuild toolchain kernels`")
    if attrs is None:
        return Check("kernel-image", "missing", f"{ref} (qemu-hexagon {QEMU_VERSION} with hexbuild's HVX patches, "
                     "LLVM 21) is not on the engine",
                     fix="hexbuild toolchain kernels (minutes, once; without a network on the engine it runs "
                         "debootstrap here, as root); the first `hexbuild test kernels` makes it too")
    return Check("kernel-image", "ok", f"{ref} (qemu-hexagon {QEMU_VERSION} with hexbuild's HVX patches, LLVM 21)")


def _adb_server_up(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def check_adb() -> Check:
    adb = shutil.which("adb")
    if not adb:
        return Check("adb", "missing", "adb not found on PATH",
                     fix="install Android platform-tools (apt install adb) and put adb on PATH")
    try:
        cp = subprocess.run([adb, "version"], capture_output=True, text=True, timeout=10)
        version = cp.stdout.splitlines()[0].replace("Android Debug Bridge version ", "") if cp.stdout else "?"
    except (OSError, subprocess.TimeoutExpired):
        version = "?"
    port = int(os.environ.get("ANDROID_ADB_SERVER_PORT", "5037"))
    if not _adb_server_up(port):
        return Check("adb", "warn", f"adb {version}; server not running on port {port}",
                     fix="adb start-server (hexbuild starts it when it needs it)")
    try:
        cp = subprocess.run([adb, "devices"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return Check("adb", "missing", f"adb {version}; server on port {port} does not answer",
                     fix="adb kill-server && adb start-server")
    devices = [ln.split("\t") for ln in cp.stdout.splitlines()[1:] if "\t" in ln]
    states = ", ".join(f"{serial} ({state})" for serial, state in devices) or "no devices"
    bad = [s for _, s in devices if s != "device"]
    if bad:
        fixes = {"unauthorized": "unlock the phone and accept the USB debugging prompt",
                 "offline": "reconnect the cable or run adb reconnect"}
        return Check("adb", "warn", f"adb {version}; {states}",
                     fix="; ".join(fixes.get(s, f"device is {s}") for s in sorted(set(bad))))
    return Check("adb", "ok", f"adb {version}; {states}")


def check_ssh() -> list[Check]:
    out = []
    sock = os.environ.get("SSH_AUTH_SOCK")
    if sock and Path(sock).exists() and stat.S_ISSOCK(Path(sock).stat().st_mode):
        out.append(Check("ssh:agent", "ok", f"agent at {sock}"))
    else:
        out.append(Check("ssh:agent", "info", "no SSH agent (SSH_AUTH_SOCK unset)",
                         fix="eval $(ssh-agent) && ssh-add, or set ssh.identity"))
    home = Path.home() / ".ssh"
    keys = sorted(p.name for p in home.glob("id_*") if not p.name.endswith(".pub")) if home.is_dir() else []
    out.append(Check("ssh:keys", "ok" if keys else "info", ", ".join(keys) if keys else "no ~/.ssh/id_* keys",
                     fix=None if keys else "ssh-keygen -t ed25519"))
    kh = home / "known_hosts"
    out.append(Check("ssh:known_hosts", "ok" if kh.is_file() else "info",
                     str(kh) if kh.is_file() else "no ~/.ssh/known_hosts: every SSH host will be refused until trusted",
                     fix=None if kh.is_file() else "ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts (check the fingerprint)"))
    return out


def check_source(source: Path) -> Check:
    from .errors import UsageError
    from .source import read_source

    try:
        facts = read_source(source)
    except UsageError as e:
        return Check("source", "missing", e.message, fix="run in a llama.cpp checkout or pass --source DIR")
    if not facts.hexagon:
        return Check("source", "missing", f"{facts.path}: this revision has no Hexagon backend",
                     fix="update the checkout (the backend landed in late 2025)")
    return Check("source", "ok", f"{facts.path} @ {facts.revision or 'no git'}; HTP {' '.join(facts.htp_versions)}")
