"""A real image registry on loopback, for the tests that pull.

The session fixture ``registry`` starts Debian's ``docker-registry`` (distribution 2.8, the
registry Docker Hub's protocol is defined by) on 127.0.0.1 at a free port, with its storage in a
temporary directory, and stops it by PID at the end. Docker reaches registries on 127.0.0.0/8 over
plain HTTP without any setting, and Go never sends loopback traffic through the test dockerd's
dead proxy, so the test engine pulls from it while every other registry stays unreachable.

Images get into it the way users' images do: made on the test engine (``load_image`` builds one
from layer contents in ``docker save`` format, with the platform its config names) and pushed
with the SDK (``push``). The storage directory is open to the tests: ``blob_path`` is where a
blob's bytes live, for breaking one on purpose.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.processes import stop_process

from tests.infra.devices import free_port

_REQUEST = re.compile(r'"(GET|HEAD|PUT|POST|PATCH|DELETE) (/v2/\S*) HTTP/')
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
# urllib would follow HTTP(S)_PROXY from the environment; the registry is on loopback.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class RegistryError(Exception):
    """The registry did not start, or refused what a test asked of it."""


@dataclass
class Registry:
    address: str            # 127.0.0.1:PORT, the registry part of an image reference
    storage: Path
    log_path: Path
    proc: subprocess.Popen

    def __str__(self) -> str:
        return self.address

    def url(self, path: str) -> str:
        return f"http://{self.address}{path}"

    def blob_path(self, digest: str) -> Path:
        """The file holding a blob's bytes (filesystem driver layout)."""
        algo, _, hexpart = digest.partition(":")
        return self.storage / "docker/registry/v2/blobs" / algo / hexpart[:2] / hexpart / "data"

    def manifest(self, repo: str, reference: str) -> tuple[dict, str]:
        """The image manifest (schema 2) and its digest, as a client asking for it sees them."""
        req = urllib.request.Request(self.url(f"/v2/{repo}/manifests/{reference}"), headers={"Accept": MANIFEST_V2})
        with _direct.open(req, timeout=10) as r:
            body = r.read()
            digest = r.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(body).hexdigest()
            return json.loads(body), digest

    def mark(self) -> int:
        """Where the log ends now: ``requests(since=mark)`` lists what came after."""
        return self.log_path.stat().st_size

    def requests(self, since: int = 0) -> list[str]:
        """The HTTP requests the registry served (its access log), as ``METHOD /v2/...``."""
        with open(self.log_path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        return [f"{m.group(1)} {m.group(2)}" for m in _REQUEST.finditer(text)]

    def stop(self) -> None:
        stop_process(self.proc)


def _binary() -> str:
    for d in os.environ.get("PATH", "").split(":") + ["/usr/bin"]:
        p = Path(d) / "docker-registry"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise RegistryError("docker-registry not found: run scripts/setup-test-env.sh (it installs docker-registry)")


def _config(storage: Path, address: str) -> str:
    # JSON strings are YAML double-quoted scalars: any path is safe here.
    return "\n".join([
        "version: 0.1",
        "log:",
        "  level: info",
        "  accesslog:",
        "    disabled: false",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {json.dumps(str(storage))}",
        "  delete:",
        "    enabled: true",
        "  maintenance:",
        "    uploadpurging:",
        "      enabled: false",
        "http:",
        f"  addr: {json.dumps(address)}",
        f"  secret: {json.dumps(secrets.token_hex(16))}",
        "",
    ])


def start_registry(workdir: Path, timeout: float = 20.0, *, storage: Path | None = None,
                   address: str | None = None) -> Registry:
    """``docker-registry serve`` on 127.0.0.1 at a free port (or at ``address``, tried once);
    returns once ``/v2/`` answers."""
    binary = _binary()
    storage = storage or workdir / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    for _ in range(1 if address else 3):  # a free port can be taken between finding it and binding it
        address = address or f"127.0.0.1:{free_port()}"
        config = workdir / "config.yml"
        config.write_text(_config(storage, address))
        log_path = workdir / "registry.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        reg = Registry(address, storage, log_path, proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with _direct.open(reg.url("/v2/"), timeout=2) as r:
                    if r.status == 200:
                        return reg
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        reg.stop()
        text = log_path.read_text(errors="replace")
        if "address already in use" not in text:
            raise RegistryError(f"docker-registry did not answer on {address} within {timeout:g}s; "
                                f"its log ({log_path}) ends:\n" + "\n".join(text.splitlines()[-15:]))
        address = None  # taken: the next try finds a free port
    raise RegistryError("docker-registry found no free address on loopback")


# --- images for it ------------------------------------------------------------------------

def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def load_image(client, ref: str, layers: list[dict[str, bytes]], *, arch: str = "amd64", os_name: str = "linux") -> str:
    """An image made of ``layers`` (path → content each) whose config names ``os_name/arch``,
    loaded into the engine with its own image loader (``docker load``). Returns its ID."""
    blobs = [_tar(files) for files in layers]
    diff_ids = ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]
    config = json.dumps({"architecture": arch, "os": os_name, "config": {"Cmd": ["/bin/true"]},
                         "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    names = [f"{i}/layer.tar" for i in range(len(blobs))]
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": names}]).encode()
    client.images.load(_tar({**dict(zip(names, blobs)), config_name: config, "manifest.json": manifest}))
    return "sha256:" + hashlib.sha256(config).hexdigest()


def push(client, image: str, ref: str) -> str:
    """Tag ``image`` as ``ref`` (REGISTRY/REPO:TAG) and push it; returns the manifest digest
    the registry answered with."""
    repo, tag = ref.rsplit(":", 1)
    client.api.tag(image, repo, tag)
    digest = ""
    for ev in client.api.push(repo, tag=tag, stream=True, decode=True):
        if "error" in ev:
            raise RegistryError(f"pushing {ref} failed: {ev['error']}")
        digest = (ev.get("aux") or {}).get("Digest") or digest
    if not digest:
        raise RegistryError(f"pushing {ref} reported no digest")
    return digest


# --- pytest fixtures --------------------------------------------------------------------

def _serving(start: Callable[[], Registry]) -> Iterator[Registry]:
    """A session fixture's registry: one that does not start fails the test in one line; it is
    stopped by its PID at the end."""
    try:
        reg = start()
    except RegistryError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """A running registry on loopback (``str(registry)`` is ``127.0.0.1:PORT``)."""
    yield from _serving(lambda: start_registry(tmp_path_factory.mktemp("registry")))


@pytest.fixture(scope="session")
def toolchain_registry(tmp_path_factory):
    """A registry for the toolchain image, whose layers outlive the session: its storage is in the
    test cache and its address is the same from run to run (a loopback address of this cache's
    own, port 5000), so the test engine, which remembers which layers it pushed where, pushes
    only the layer a test adds; pushing the whole toolchain image again took a minute. When that
    address is taken (another suite with another cache), a registry like ``registry``'s."""
    from tests.infra.docker_engine import cache_dir, worker_suffix

    base, suffix = cache_dir(), worker_suffix()  # each engine (one per xdist worker) its registry
    h = hashlib.sha256((str(base) + suffix).encode()).digest()
    address = f"127.{1 + h[0] % 254}.{h[1]}.1:5000"
    work = tmp_path_factory.mktemp("toolchain-registry")
    storage = base / f"registry-toolchain{suffix}"
    if sum(f.stat().st_size for f in storage.rglob("*") if f.is_file()) > 3 << 30:
        shutil.rmtree(storage)  # toolchain images rebuilt over many runs: start again

    def start() -> Registry:
        try:
            return start_registry(work, storage=storage, address=address)
        except RegistryError:
            return start_registry(work / "fallback")

    yield from _serving(start)
