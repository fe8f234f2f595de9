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
# The job's own timeout is shared out so that every inner one fits in it, as LAVA's validator
# demands (each of timeouts.action, timeouts.connection and an action's timeout at most the
# job's): the deploy (the overlay and the tarball, the model in it, to the board) a sixth of it,
# the boot (the SSH login) a twelfth, each between STAGE_MIN_S and its cap, the SSH connection
# no longer than the boot, and the test the rest. Below MIN_TIMEOUT_S a stage would get less than
# STAGE_MIN_S: such a job is refused before anything is sent.
STAGE_MIN_S = 30
DEPLOY_MAX_S, BOOT_MAX_S, CONNECTION_MAX_S, ACTION_MAX_S = 600, 300, 120, 1800
MIN_TIMEOUT_S = 3 * STAGE_MIN_S


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
    return {"seconds": max(1, int(seconds))}


def check_timeout(seconds: float) -> None:
    """A job timeout too short to share among LAVA's deploy, boot and test is bad input (exit 2)."""
    from ..errors import UsageError

    if seconds < MIN_TIMEOUT_S:
        raise UsageError(f"--timeout {seconds:g} is too short for a lab job: the minimum is {MIN_TIMEOUT_S} s "
                         f"({STAGE_MIN_S} s each for LAVA's deploy, boot and test)")


def stage_timeouts(job_s: float) -> dict[str, int]:
    """Whole seconds for each inner timeout of a job of ``job_s`` seconds: every one at most the
    job's, and the deploy, boot and test adding up to it."""
    job = int(job_s)
    deploy = max(STAGE_MIN_S, min(DEPLOY_MAX_S, job // 6))
    boot = max(STAGE_MIN_S, min(BOOT_MAX_S, job // 12))
    return {"job": job, "deploy": deploy, "boot": boot, "test": job - deploy - boot,
            "connection": min(CONNECTION_MAX_S, boot), "action": min(ACTION_MAX_S, job)}


def _common(spec: JobSpec) -> dict[str, Any]:
    job: dict[str, Any] = {
        "device_type": spec.device_type,
        "job_name": spec.name[:200],
        "priority": spec.priority,
        "visibility": "public",
        # LAVA cuts the job at timeouts.job; hexbuild waits a little longer before it cancels
        "timeouts": {k: _timeout(stage_timeouts(spec.timeout_s)[k]) for k in ("job", "action", "connection")},
        "metadata": {"hexbuild.version": __version__, **spec.metadata},
    }
    if spec.tags:
        job["tags"] = list(spec.tags)
    return job


def _test(spec: JobSpec, seconds: float | None = None) -> dict[str, Any]:
    return {"timeout": _timeout(spec.timeout_s if seconds is None else seconds),
            "definitions": [{"from": "url", "repository": spec.artifact_url, "name": TEST_NAME, "path": TESTDEF}]}


def board_job(spec: JobSpec) -> dict[str, Any]:
    """A job for an SSH-reachable Linux board (LAVA's ``ssh`` device type and its kin)."""
    job = _common(spec)
    t = stage_timeouts(spec.timeout_s)
    job["actions"] = [
        {"deploy": {"to": "ssh", "os": spec.board_os, "timeout": _timeout(t["deploy"])}},
        {"boot": {"method": "ssh", "connection": "ssh", "prompts": list(spec.prompts), "timeout": _timeout(t["boot"])}},
        {"test": _test(spec, t["test"])},
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
