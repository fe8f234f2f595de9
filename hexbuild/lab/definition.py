"""The LAVA job definition hexbuild submits, as JSON (LAVA reads it as YAML, of which JSON is a
part: no YAML writer needed and nothing a value holds can change the document's shape).

- **Linux boards** (``deploy: to: ssh`` and ``boot: method: ssh``, the shape of LAVA's ``ssh``
  device type): a test whose definition LAVA downloads as a tarball (``from: url``) and ships
  to the board, where its script runs hexbuild's rendered commands (job.py).
- **Phones** (an Android package): LAVA's docker test action runs the test definition in a
  container of the lab's image that holds hexbuild, with the phone's adb (``$ANDROID_SERIAL``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from .job import TESTDEF, TEST_NAME

BOARD_OSES = ("debian", "ubuntu", "oe", "fedora", "centos")
# The end of a root shell's prompt. Prompts must not overlap: with "root@" and "# " both, LAVA
# matches "root@" of "root@board:~# ", the "# " left over then ends its next wait at once, and
# it copies the overlay before its `mkdir` ran.
DEFAULT_PROMPTS = ("# ",)


@dataclass
class JobSpec:
    device_type: str
    artifact_url: str
    name: str
    timeout_s: float = 3600.0  # the whole job, in LAVA
    tags: list[str] = field(default_factory=list)
    priority: str = "medium"
    board_os: str = "debian"
    prompts: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPTS))
    docker_image: str | None = None  # phones: the image with hexbuild the test runs in
    metadata: dict[str, str] = field(default_factory=dict)


def _timeout(seconds: float) -> dict[str, int]:
    return {"seconds": max(1, int(round(seconds)))}


def _common(spec: JobSpec) -> dict[str, Any]:
    job: dict[str, Any] = {
        "device_type": spec.device_type,
        "job_name": spec.name[:200],
        "priority": spec.priority,
        "visibility": "public",
        # LAVA cuts the job at timeouts.job; hexbuild waits a little longer before it cancels
        "timeouts": {"job": _timeout(spec.timeout_s), "action": _timeout(min(spec.timeout_s, 1800)),
                     "connection": {"minutes": 2}},
        "metadata": {"hexbuild.version": __version__, **spec.metadata},
    }
    if spec.tags:
        job["tags"] = list(spec.tags)
    return job


def _test(spec: JobSpec) -> dict[str, Any]:
    return {"timeout": _timeout(spec.timeout_s),
            "definitions": [{"from": "url", "repository": spec.artifact_url, "name": TEST_NAME, "path": TESTDEF}]}


def board_job(spec: JobSpec) -> dict[str, Any]:
    """A job for an SSH-reachable Linux board (LAVA's ``ssh`` device type and its kin)."""
    job = _common(spec)
    job["actions"] = [
        {"deploy": {"to": "ssh", "os": spec.board_os, "timeout": {"minutes": 10}}},
        {"boot": {"method": "ssh", "connection": "ssh", "prompts": list(spec.prompts), "timeout": {"minutes": 5}}},
        {"test": _test(spec)},
    ]
    return job


def phone_job(spec: JobSpec) -> dict[str, Any]:
    """A job for a phone: the test runs in ``spec.docker_image`` with the phone's adb."""
    if not spec.docker_image:
        raise ValueError("a phone job needs the image its test runs in")
    job = _common(spec)
    test = _test(spec)
    test["docker"] = {"image": spec.docker_image}
    job["actions"] = [{"test": test}]
    return job


def dump(job: dict[str, Any]) -> str:
    return json.dumps(job, indent=2, ensure_ascii=True) + "\n"
