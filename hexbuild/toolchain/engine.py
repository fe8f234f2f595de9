"""The Docker engine, through the Docker SDK (never the docker CLI).

``DockerEngine.connect()`` talks to the engine ``DOCKER_HOST`` names (default: the local
socket) and probes it once into ``EngineInfo``: version, API version, OS/arch, rootless, remote.
Everything else hexbuild does with containers goes through this one object: finding or pulling
the toolchain image (hexbuild/toolchain/images.py), the compiler-cache volume, and running one
build container whose exit status comes from ``wait()`` while a thread streams its log.
"""

from __future__ import annotations

import ipaddress
import os
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable
from urllib.parse import urlparse

from ..errors import BuildFailed, EnvironmentMissing
from ..ui import ui
from . import images
from .buildlog import BuildLog
from .docker_sdk import api_message, import_docker
from .images import ImageInfo
from .spec import CACHE_DIR, PLATFORM, ContainerSpec

DEFAULT_HOST = "unix:///var/run/docker.sock"
VOLUME_MARKER = ".hexbuild-volume"
API_TIMEOUT = 60        # seconds for ordinary API calls


def docker_host(env: dict[str, str] | os._Environ = os.environ) -> str:
    return env.get("DOCKER_HOST") or DEFAULT_HOST


def is_remote(host: str) -> bool:
    """A socket (unix, npipe) or TCP on loopback is this machine; ssh and other hosts are not."""
    u = urlparse(host)
    if u.scheme in ("unix", "npipe", "fd", ""):
        return False
    if u.scheme in ("tcp", "http", "https"):
        name = u.hostname or ""
        if name in ("", "localhost"):
            return False
        try:
            return not ipaddress.ip_address(name).is_loopback
        except ValueError:
            return True
    return True  # ssh:// and anything else


@dataclass(frozen=True)
class EngineInfo:
    host: str
    remote: bool
    version: str
    api_version: str
    os: str
    arch: str
    rootless: bool
    ncpu: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _remembered(known: dict | None, version: dict) -> EngineInfo | None:
    """The remembered EngineInfo when the daemon answers /version as it did then; None for an
    entry of another shape (written by another hexbuild version), which counts as a miss."""
    from . import probe_cache

    if not known or known.get("version_digest") != probe_cache.version_digest(version):
        return None
    try:
        return EngineInfo(**known["engine"])
    except TypeError:
        return None


def engine_info(host: str, version: dict[str, Any], info: dict[str, Any]) -> EngineInfo:
    """What hexbuild needs to know about an engine, from its /version and /info answers.
    Rootless engines list ``name=rootless`` among their security options."""
    security = info.get("SecurityOptions") or []
    return EngineInfo(
        host=host,
        remote=is_remote(host),
        version=version.get("Version", ""),
        api_version=version.get("ApiVersion", ""),
        os=info.get("OSType") or version.get("Os", ""),
        arch=info.get("Architecture") or version.get("Arch", ""),
        rootless=any("name=rootless" in str(o) for o in security),
        ncpu=int(info.get("NCPU") or 0),
    )


def _unreachable(host: str, err: Exception) -> EnvironmentMissing:
    detail = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
    return EnvironmentMissing(
        f"no Docker engine answers at {host} ({detail})",
        hint="start the Docker engine (e.g. systemctl start docker) or point DOCKER_HOST at one; "
             "--engine local builds without Docker, inside the toolchain image")


class DockerEngine:
    kind = "docker"

    def __init__(self, client: Any, stream_client: Any, info: EngineInfo):
        self.client = client                # ordinary calls, with a timeout
        self.stream_client = stream_client  # log stream and wait: no read timeout
        self.info = info

    @classmethod
    def connect(cls, host: str | None = None) -> "DockerEngine":
        host = host or docker_host()
        use_ssh = host.startswith("ssh://")
        docker = import_docker(ssh=use_ssh)
        from docker.errors import DockerException

        from . import probe_cache

        env = dict(os.environ, DOCKER_HOST=host)
        known = probe_cache.lookup(host)
        try:
            # A remembered API version spares the negotiation; /version still proves the engine
            # answers, and /info is asked only of a daemon not seen before.
            client = docker.from_env(timeout=API_TIMEOUT, environment=env, use_ssh_client=use_ssh,
                                     version=known["api_version"] if known else None)
            version = client.version()
            engine = _remembered(known, version)
            info = None if engine is not None else client.info()
        except (DockerException, OSError) as e:
            raise _unreachable(host, e) from None
        except Exception as e:  # requests' connection errors are not DockerException
            if type(e).__module__.startswith(("requests", "urllib3")):
                raise _unreachable(host, e) from None
            raise
        if engine is None:
            engine = engine_info(host, version, info)
            probe_cache.remember(host, version, engine.to_json())
        stream_client = docker.from_env(timeout=None, environment=env, use_ssh_client=use_ssh,
                                        version=engine.api_version)
        ui.detail(f"docker engine {engine.version} (API {engine.api_version}) at {host}: {engine.os}/{engine.arch}"
                  + (", rootless" if engine.rootless else "") + (", remote" if engine.remote else ""))
        return cls(client, stream_client, engine)

    def close(self) -> None:
        for c in (self.client, self.stream_client):
            try:
                c.close()
            except Exception:
                pass

    # -- images (hexbuild/toolchain/images.py) --------------------------------------------------
    def ensure_image(self, ref: str, policy: str) -> ImageInfo:
        return images.ensure_image(self.client.api, ref, policy)

    def pull(self, ref: str, *, local: dict[str, Any] | None = None) -> None:
        images.pull(self.client.api, ref, local=local)

    # -- the compiler cache -------------------------------------------------------------------
    def ensure_volume(self, name: str, image: str, *, purpose: str = "ccache") -> None:
        """A named volume (the compiler cache, or copy mode's checkout), writable by any build
        user; created once."""
        from docker.errors import NotFound

        try:
            self.client.api.inspect_volume(name)
            return
        except NotFound:
            pass
        self.client.api.create_volume(name, labels={"hexbuild.volume": purpose})
        # A new volume is root-owned; builds run as the invoking user. Open it up once, and
        # leave a file in it: Docker gives an *empty* volume the owner and mode of the mount
        # point (which the working directory creates as root, 755) on its next mount.
        cmd = ["sh", "-c", f"chmod 1777 {CACHE_DIR} && : > {CACHE_DIR}/{VOLUME_MARKER}"]
        hc = self.client.api.create_host_config(binds={name: {"bind": CACHE_DIR, "mode": "rw"}}, network_mode="none")
        c = self.client.api.create_container(image, cmd, user="0:0", host_config=hc, platform=PLATFORM,
                                             use_config_proxy=False, labels={"hexbuild": "cache-init"})
        try:
            self.client.api.start(c["Id"])
            rc = self.stream_client.api.wait(c["Id"])["StatusCode"]
            if rc != 0:
                ui.warn(f"could not make the cache volume {name} writable (chmod exited {rc})")
        finally:
            self._remove(c["Id"])

    # -- one build container ------------------------------------------------------------------
    def run(self, spec: ContainerSpec, log: BuildLog, *, keep: bool = False,
            on_started: Callable[[str], None] | None = None,
            before_start: Callable[[Any, str], None] | None = None,
            after_exit: Callable[[Any, str, int], None] | None = None) -> int:
        """Create, start and wait for the build container; its log goes to ``log``. Removed
        afterwards (also on Ctrl-C) unless ``keep``. ``before_start``/``after_exit`` get the
        low-level API and the container ID (copy mode moves files there)."""
        import docker.types

        from docker.errors import APIError

        api = self.client.api
        mounts = [docker.types.Mount(m.target, m.source, type=m.type, read_only=m.read_only) for m in spec.mounts]
        hc = api.create_host_config(mounts=mounts, network_mode=spec.network)
        ref = spec.name  # until the engine answers with an ID: an interrupted create is found by name
        interrupted = False
        try:
            try:
                created = api.create_container(image=spec.image, command=spec.command, name=spec.name,
                                               user=spec.user, working_dir=spec.working_dir,
                                               environment=spec.environment, host_config=hc, platform=spec.platform,
                                               use_config_proxy=False, labels={"hexbuild": "build"}, tty=False,
                                               stdin_open=False)
                ref = created["Id"]
                if before_start:
                    before_start(api, ref)
                api.start(ref)
            except APIError as e:
                raise _refused(e, spec) from None
            if on_started:
                on_started(spec.name)
            stream = self.stream_client.api.logs(ref, stream=True, follow=True)
            done = threading.Event()
            reader = threading.Thread(target=_pump, args=(stream, log, done), daemon=True, name="hexbuild-log")
            reader.start()
            rc = int(self.stream_client.api.wait(ref)["StatusCode"])
            # wait() is the truth. The follow stream may not end with the container (docker-py
            # #3084) and can miss a last line without a newline: compare with the whole log.
            reader.join(timeout=5)
            if not done.is_set():
                try:
                    stream.close()
                except Exception:
                    pass
                reader.join(timeout=2)
            try:
                full = api.logs(ref, stdout=True, stderr=True, stream=False)
            except APIError as e:  # removed meanwhile by someone else on the engine (docker rm -f, prune)
                raise BuildFailed(f"the build container {spec.name} was removed from outside while it ran "
                                  f"(exit status {rc}): {api_message(e)}",
                                  hint="something else on the Docker engine removes containers; run the build "
                                       "again (the build directory keeps what was compiled)") from None
            if not done.is_set():
                log.replace(full)
            elif len(full) > log.fed_bytes:
                log.feed(full[log.fed_bytes:])
            if after_exit:
                after_exit(api, ref, rc)
            return rc
        except BaseException:
            interrupted = True
            raise
        finally:
            if not keep:
                self._remove(ref)
            elif interrupted:
                try:
                    api.kill(ref)
                except Exception:
                    pass

    def _remove(self, cid: str) -> None:
        from docker.errors import NotFound

        try:
            self.client.api.remove_container(cid, force=True, v=True)
        except NotFound:
            pass
        except Exception as e:  # the build's own error matters more; say what is left behind
            ui.warn(f"could not remove container {cid[:12]}: {e}")


def _refused(e: Exception, spec: ContainerSpec) -> EnvironmentMissing:
    msg = api_message(e)
    if "bind source path does not exist" in msg or "invalid mount config" in msg:
        return EnvironmentMissing(
            f"the Docker engine cannot see the checkout ({msg}): it runs on another machine or in another "
            "container (Docker-in-Docker)",
            hint="use --transfer copy, run hexbuild where the engine runs, or run inside the toolchain image "
                 "with --engine local")
    return EnvironmentMissing(f"the Docker engine refused the build container: {msg}",
                              hint=f"the same container by hand: {spec.docker_run_line()}")


def _pump(stream: Any, log: BuildLog, done: threading.Event) -> None:
    try:
        for chunk in stream:
            log.feed(chunk)
        done.set()
    except Exception:
        pass  # closed under us, or the daemon went away: wait() reports what happened
