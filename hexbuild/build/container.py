"""The build container for a plan (``container_spec``), the same commands for ``--engine local``,
and ``dry_run``: what a build would run, with no daemon."""

from __future__ import annotations

import os
import secrets
from typing import Any

from ..toolchain import commands as cmds
from ..toolchain.spec import CACHE_DIR, WORKSPACE, ContainerSpec, Mount
from .options import BuildOptions, _passthrough
from .plan import BuildPlan, plan_build


def default_user(rootless: bool = False) -> str:
    """The invoking user, so files come back owned by them; root inside on a rootless engine,
    where root maps to the invoking user."""
    return "0:0" if rootless else f"{os.getuid()}:{os.getgid()}"


def resolve_transfer(requested: str, remote: bool) -> str:
    """mount for an engine on this machine, copy for a remote one (``auto``)."""
    return ("copy" if remote else "mount") if requested == "auto" else requested


def container_spec(plan: BuildPlan, *, name: str | None = None, user: str | None = None, jobs: int | None = None,
                   transfer: str = "mount", env: Any = os.environ) -> ContainerSpec:
    from ..toolchain import transfer as xfer

    assert plan.image is not None
    passthrough, _ = _passthrough(plan.options.env_passthrough, env)
    copy = transfer == "copy"
    command = ["sh", "-c", cmds.script(plan.commands(WORKSPACE, copy=copy), keep_marker=plan.options.keep_container,
                                       prelude=xfer.unpack_lines(plan.build_dir) if copy else None)]
    workspace = Mount(xfer.volume_name(plan.root), WORKSPACE, type="volume") if copy else Mount(str(plan.root), WORKSPACE)
    return ContainerSpec(
        name=name or f"hexbuild-build-{secrets.token_hex(4)}",
        image=plan.image,
        command=command,
        user=user or plan.options.user or default_user(),
        mounts=[workspace, cache_mount(plan.options.cache_volume)],
        env={"HOME": "/tmp", "CCACHE_DIR": CACHE_DIR, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs or plan.jobs)},
        passthrough=passthrough,
    )


def cache_mount(cache: str) -> Mount:
    """The compiler cache: a named volume, or a directory of the engine's machine (an absolute
    path, bind-mounted: CI runners and the tests keep it beside their other caches)."""
    return Mount(cache, CACHE_DIR, type="bind" if cache.startswith("/") else "volume")


def local_command(plan: BuildPlan) -> list[str]:
    return ["sh", "-c", cmds.script(plan.commands(str(plan.root)))]


def dry_run(options: BuildOptions) -> dict[str, Any]:
    """What ``run_build`` would run, without a daemon and without touching the checkout."""
    plan = plan_build(options)
    out = {"dry_run": True, **plan.to_json(), "commands": plan.commands(WORKSPACE if options.engine == "docker"
                                                                        else str(plan.root))}
    if options.engine == "docker":
        from ..toolchain.engine import docker_host, is_remote

        transfer = resolve_transfer(options.transfer, is_remote(docker_host()))
        spec = container_spec(plan, transfer=transfer)  # a fresh name, as every run gets
        out["transfer"] = transfer
        out["commands"] = plan.commands(WORKSPACE, copy=transfer == "copy")
        out["container"] = spec.to_json()
        out["note"] = ("the engine was not contacted: on a rootless engine the build runs as root inside "
                       "(which maps to you), and the image is pulled only if the engine lacks it")
        if transfer == "copy":
            out["note"] += ("; copy mode: the checkout is copied into the container before it starts (put_archive) "
                            "and the package out after it ends (get_archive), which a docker run line cannot show")
    else:
        out["command"] = local_command(plan)
    return out

