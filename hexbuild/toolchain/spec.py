"""What a build container is: image, platform, user, mounts, environment, command.

One ``ContainerSpec`` is what the Docker engine creates, what ``--dry-run --json`` prints and
what ``-v`` shows before a run, together with the equivalent ``docker run`` line, so that what
people read is exactly what runs. Building it needs no daemon.

Passthrough variables (``build.env_passthrough``) carry host values that may be secrets: the
spec lists their names only, and the ``docker run`` line passes them as ``-e NAME`` (the value
comes from the environment of whoever runs the line).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

PLATFORM = "linux/amd64"  # the vendor toolchain images are x86_64-only
WORKSPACE = "/workspace"
CACHE_DIR = "/cache"


@dataclass(frozen=True)
class Mount:
    source: str          # host path (bind) or volume name (volume)
    target: str
    type: str = "bind"   # bind | volume
    read_only: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "source": self.source, "target": self.target, "read_only": self.read_only}

    def docker_flag(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass
class ContainerSpec:
    name: str
    image: str
    command: list[str]
    user: str
    mounts: list[Mount]
    env: dict[str, str]
    passthrough: dict[str, str] = field(default_factory=dict)  # values not shown anywhere
    working_dir: str = WORKSPACE
    network: str = "none"
    platform: str = PLATFORM

    @property
    def environment(self) -> dict[str, str]:
        """Everything the container gets: hexbuild's own variables plus the passthrough ones."""
        return {**self.env, **self.passthrough}

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "image": self.image,
            "platform": self.platform,
            "user": self.user,
            "mounts": [m.to_json() for m in self.mounts],
            "env": dict(self.env),
            "env_passthrough": sorted(self.passthrough),
            "working_dir": self.working_dir,
            "network": self.network,
            "command": list(self.command),
            "docker_run": self.docker_run_line(),
        }

    def docker_run_argv(self, *, remove: bool = True) -> list[str]:
        argv = ["docker", "run"]
        if remove:
            argv.append("--rm")
        argv += ["--name", self.name, "--platform", self.platform, "--network", self.network,
                 "--user", self.user, "--workdir", self.working_dir]
        for m in self.mounts:
            argv += ["--volume", m.docker_flag()]
        for k, v in self.env.items():
            argv += ["--env", f"{k}={v}"]
        for k in sorted(self.passthrough):
            argv += ["--env", k]
        return argv + [self.image, *self.command]

    def docker_run_line(self, *, remove: bool = True) -> str:
        return shlex.join(self.docker_run_argv(remove=remove))
