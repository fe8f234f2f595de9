"""The job tarball (the package installed as deploy lays it out, the model, the text files, the
job script and its test definition) and how the lab's workers get it: served by hexbuild over
HTTP while the jobs run (``--serve-artifacts``), or published by a command of the user's
(``--publish CMD --artifact-url TEMPLATE``: S3, a web server, anything).

The tarball is uncompressed (LAVA's ``tar -xf`` reads it; a model does not compress) and
reproducible: entries sorted, fixed times and owners. Its name is the digest of its entries,
so the same job content is the same file and URL; it is kept in hexbuild's cache (the newest
few) and made again only when the content changed.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import secrets
import shlex
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import EnvironmentMissing, UsageError
from ..paths import cache_root
from ..ui import human_size, ui

KEEP = 4  # tarballs kept in the cache
MTIME = 1700000000  # fixed entry times: the same content is the same bytes


@dataclass
class Member:
    name: str  # path in the tarball
    mode: int
    size: int
    sha256: str
    local: Path | None = None  # the file, or
    data: bytes | None = None  # its bytes


def file_member(name: str, local: Path, mode: int, *, sha256: str | None = None) -> Member:
    st = local.stat()
    if sha256 is None:
        from ..artifacts.hashcache import HashCache

        with HashCache() as cache:
            _, sha256 = cache.one(local)
    return Member(name, mode, st.st_size, sha256, local=local)


def data_member(name: str, data: bytes, mode: int = 0o644) -> Member:
    return Member(name, mode, len(data), hashlib.sha256(data).hexdigest(), data=data)


def digest(members: list[Member]) -> str:
    h = hashlib.sha256()
    for m in sorted(members, key=lambda m: m.name):
        h.update(f"{m.name}\0{m.mode:o}\0{m.size}\0{m.sha256}\n".encode("utf-8"))
    return h.hexdigest()


def make(members: list[Member], *, where: Path | None = None) -> Path:
    """The tarball of ``members`` (made, or found made before) in hexbuild's cache."""
    where = where or cache_root() / "lab"
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"hexbuild-job-{digest(members)[:20]}.tar"
    if path.is_file():
        os.utime(path)  # the newest stay
        return path
    total = sum(m.size for m in members)
    ui.info(f"packing the job tarball ({len(members)} files, {human_size(total)})")
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with tarfile.open(part, "w", format=tarfile.GNU_FORMAT) as tar:
            dirs: set[str] = set()
            for m in sorted(members, key=lambda m: m.name):
                parts = m.name.split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        tar.addfile(_info(d, 0o755, 0, tarfile.DIRTYPE))
                info = _info(m.name, m.mode, m.size, tarfile.REGTYPE)
                if m.data is not None:
                    tar.addfile(info, io.BytesIO(m.data))
                else:
                    assert m.local is not None
                    with open(m.local, "rb") as f:
                        tar.addfile(info, f)
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    _prune(where, keep=path)
    return path


def _info(name: str, mode: int, size: int, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.size, info.type, info.mtime = mode, size, kind, MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _prune(where: Path, keep: Path) -> None:
    old = sorted((p for p in where.glob("hexbuild-job-*.tar") if p != keep), key=lambda p: p.stat().st_mtime)
    for p in old[: max(0, len(old) - (KEEP - 1))]:
        p.unlink(missing_ok=True)


# -- how the workers get it ----------------------------------------------------------------------
class ArtifactServer:
    """One file over HTTP on ``host:port`` while the jobs run, at a path no one can guess (the
    tarball may hold a model that is not public); every other path is 404."""

    def __init__(self, path: Path, host: str, port: int, *, url_template: str | None = None) -> None:
        self.path = path
        self.secret = secrets.token_urlsafe(18)
        self.route = f"/{self.secret}/{path.name}"
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                self._send(body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._send(body=False)

            def _send(self, *, body: bool) -> None:
                if self.path != served.route:
                    self.send_error(404)
                    return
                size = served.path.stat().st_size
                self.send_response(200)
                self.send_header("Content-Type", "application/x-tar")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if body:
                    with open(served.path, "rb") as f:
                        try:
                            while chunk := f.read(1 << 20):
                                self.wfile.write(chunk)
                        except (BrokenPipeError, ConnectionResetError):
                            return
                    served.downloads += 1
                    ui.info(f"the job tarball was downloaded by {self.client_address[0]}")

            def log_message(self, fmt: str, *args) -> None:  # the route is a secret: -v shows no path
                status = args[1] if len(args) > 1 else ""
                ui.detail(f"artifact server: {self.command} from {self.client_address[0]} -> {status}")

        self.downloads = 0
        try:
            self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        except OSError as e:
            raise EnvironmentMissing(f"cannot serve the job tarball on {host}:{port}: {e.strerror or e}",
                                     hint="give a free port, on an address the lab's workers can reach") from None
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        if url_template:
            self.url = fill(url_template, path=self.route.lstrip("/"), name=path.name, port=str(self.port))
        else:
            h = f"[{host}]" if ":" in host else host
            self.url = f"http://{h}:{self.port}{self.route}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="hexbuild-artifacts", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def parse_serve(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--serve-artifacts takes HOST:PORT (an address the lab's workers reach), got {value!r}")
    return host, int(port)


def check_serve(host: str, url_template: str | None) -> None:
    if host in ("0.0.0.0", "::") and not url_template:
        raise UsageError(f"--serve-artifacts {host}: the workers need an address, not a wildcard",
                         hint="give this machine's address, or --artifact-url http://HOST:{port}/{path}")


def fill(template: str, **values: str) -> str:
    """``template`` with {name}-style fields filled; an unknown field is one line (exit 2)."""
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        known = ", ".join("{" + k + "}" for k in values)
        raise UsageError(f"{template!r}: unknown field {e} (known: {known})") from None


def publish(path: Path, command: str, url_template: str, *, run: Callable | None = None) -> str:
    """Run the user's publish command (no shell; {path} and {name} filled in each word; the name
    holds the content's digest) and give the URL the workers download from."""
    from .. import proc

    values = {"path": str(path), "name": path.name}
    argv = [fill(w, **values) for w in shlex.split(command)]
    if not argv:
        raise UsageError("--publish needs a command, e.g. --publish 'aws s3 cp {path} s3://bucket/{name}'")
    ui.info(f"publishing the job tarball: {shlex.join(argv)}")
    done = (run or proc.run)(argv, timeout=3600)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentMissing(f"the publish command exited {done.returncode}: {tail[0][:300]}",
                                 hint="check --publish; the job was not submitted")
    return fill(url_template, **values)
