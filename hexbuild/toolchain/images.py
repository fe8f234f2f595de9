"""The toolchain image on a Docker engine: found, or pulled for linux/amd64 with one progress
task per layer (the low-level event stream, whose in-band ``error`` chunks raise), and refused
in one line when it is for another platform or cannot be had."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..errors import EnvironmentMissing, HexbuildError
from ..ui import ui
from .docker_sdk import api_message
from .spec import PLATFORM

PULL_TIMEOUT = 600      # seconds without a pull event before giving up
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_LAYER = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True)
class ImageInfo:
    reference: str
    digest: str      # RepoDigests entry, or the image ID for a local-only image
    id: str
    os: str
    arch: str
    pulled: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ensure_image(api: Any, ref: str, policy: str) -> ImageInfo:
    """The toolchain image, pulled as ``policy`` says (missing|always|never), checked to
    be linux/amd64. EnvironmentMissing when it is absent and cannot be pulled."""
    from docker.errors import ImageNotFound

    try:  # also for "always": a failed pull then says what the engine has
        local = api.inspect_image(ref)
    except ImageNotFound:
        local = None
    if local is not None and policy != "always" and _platform(local) == PLATFORM:
        return _image_info(ref, local, pulled=False)
    if policy == "never":
        if local is not None:
            raise EnvironmentMissing(f"image {ref} is {_platform(local)}; the toolchain needs {PLATFORM}",
                                     hint=f"pull the {PLATFORM} image, or allow it with --pull missing")
        raise EnvironmentMissing(f"image {ref} is not on the Docker engine and --pull never forbids pulling it",
                                 hint=f"docker pull --platform {PLATFORM} {ref} (or docker load -i FILE), "
                                      "or --pull missing")
    pull(api, ref, local=local)
    try:
        pulled = api.inspect_image(ref)
    except ImageNotFound:
        raise EnvironmentMissing(f"image {ref} is still missing after pulling it") from None
    if _platform(pulled) != PLATFORM:
        raise EnvironmentMissing(f"image {ref} is {_platform(pulled)}; the toolchain needs {PLATFORM}")
    return _image_info(ref, pulled, pulled=True)

def pull(api: Any, ref: str, *, local: dict[str, Any] | None = None) -> None:
    """Pull ``ref`` for linux/amd64. ``local`` is the engine's own copy (its inspect
    answer), if it has one: the error then says why that copy was not enough."""
    from docker.errors import APIError, DockerException
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(ref)
    ui.command(["docker", "pull", "--platform", PLATFORM, ref])
    ui.info(f"pulling {ref} ({PLATFORM})")
    failed = lambda why: _pull_failed(ref, local, why)  # noqa: E731
    api_timeout, api.timeout = api.timeout, PULL_TIMEOUT  # a large layer extracts quietly for a while
    try:
        events = api.pull(repo, tag=tag or "latest", stream=True, decode=True, platform=PLATFORM)
        _follow_pull(events, failed)
    except APIError as e:
        raise failed(api_message(e)) from None
    except HexbuildError:
        raise
    except (DockerException, OSError) as e:
        raise failed(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    except Exception as e:
        if type(e).__module__.startswith(("requests", "urllib3")):
            raise failed(str(e).splitlines()[0]) from None
        raise
    finally:
        api.timeout = api_timeout


def _pull_failed(ref: str, local: dict[str, Any] | None, why: str) -> EnvironmentMissing:
    hint = (f"docker pull --platform {PLATFORM} {ref} where the registry is reachable "
            "(or docker load -i FILE), or pass --image with an image the engine has")
    if local is None:
        return EnvironmentMissing(f"image {ref} is not on the Docker engine and pulling it failed: {why}", hint=hint)
    if _platform(local) != PLATFORM:
        return EnvironmentMissing(
            f"image {ref} on the Docker engine is {_platform(local)}, and pulling it failed: {why}", hint=hint)
    return EnvironmentMissing(f"image {ref} is on the Docker engine, but --pull always needs a fresh pull and "
                              f"pulling it failed: {why}", hint=f"--pull missing builds with the engine's copy; {hint}")


def _follow_pull(events: Any, failed: Callable[[str], HexbuildError]) -> None:
    """Draw one progress task per layer from the pull's event stream; raise on ``error``."""
    with ui.progress() as progress:
        tasks: dict[str, int] = {}
        totals: dict[str, float] = {}
        for ev in events:
            if not isinstance(ev, dict):
                continue
            if "error" in ev:
                detail = ev.get("errorDetail") or {}
                raise failed(str(detail.get("message") or ev["error"]).strip())
            layer = ev.get("id")
            status = str(ev.get("status", ""))
            if not layer or not _LAYER.fullmatch(layer):  # whole-image events ("Pulling from ...")
                if status:
                    ui.detail(status)
                continue
            if layer not in tasks:
                tasks[layer] = progress.add_task(f"layer {layer}", total=None)
            detail = ev.get("progressDetail") or {}
            if status.startswith("Downloading") and detail.get("total"):
                totals[layer] = float(detail["total"])
                progress.update(tasks[layer], completed=detail.get("current", 0), total=totals[layer])
            elif status in ("Download complete", "Pull complete", "Already exists"):
                total = totals.get(layer, 1.0)
                progress.update(tasks[layer], completed=total, total=total)


def _platform(attrs: dict[str, Any]) -> str:
    return f"{attrs.get('Os', '?')}/{attrs.get('Architecture', '?')}"


def _image_info(ref: str, attrs: dict[str, Any], *, pulled: bool) -> ImageInfo:
    digests = attrs.get("RepoDigests") or []
    repo = ref.split("@", 1)[0]
    name = repo.rsplit(":", 1)[0] if ":" in repo.rsplit("/", 1)[-1] else repo
    digest = next((d for d in digests if d.split("@", 1)[0] == name), digests[0] if digests else attrs["Id"])
    return ImageInfo(reference=ref, digest=digest, id=attrs["Id"], os=attrs.get("Os", ""),
                     arch=attrs.get("Architecture", ""), pulled=pulled)


def is_digest_pinned(ref: str) -> bool:
    return bool(_DIGEST.search(ref))
