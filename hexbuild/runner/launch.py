"""The launch scripts `deploy --ndev` writes next to the install (templates/launch)."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import UsageError
from .commands import render
from .defaults import PHONE, RunDefaults
from .flags import BACKEND_OPS_FLAGS, COMMON_FLAGS, COMMON_SAME, VALUE_OPTIONS, Flag, flag_table
from .htp_sessions import SESSION_VARS, check_sessions, sessions
from .install import loader_of
from .revision import Revision
from .templating import render_template

LAUNCH_SCRIPTS = {"completion": "run-completion.sh", "cli": "run-cli.sh", "bench": "run-bench.sh",
                  "server": "run-server.sh", "tool": "run-tool.sh"}


def _case_arms(table: Mapping[str, Flag]) -> list[dict[str, Any]]:
    by_group: dict[str, dict[str, Any]] = {}
    for alias, flag in table.items():
        arm = by_group.setdefault(f"{flag.group}:{flag.takes_value}",
                                  {"group": flag.group, "aliases": [], "takes_value": flag.takes_value,
                                   "also": None})
        arm["aliases"].append(alias)
    arms = list(by_group.values())
    if table is COMMON_FLAGS:
        for arm in arms:
            if arm["group"] in COMMON_SAME:
                arm["also"] = COMMON_SAME[arm["group"]]
    return arms


def launch_scripts(*, facts: dict, dest: str, models_dir: str, ndev: int, os: str,
                   htp_arch: str | None, runtime: dict | None = None,
                   launcher: list[str] | None = None, defaults: RunDefaults = PHONE) -> dict[str, str]:
    """File name → POSIX sh script for each tool the revision builds, opening ``ndev`` sessions
    in the revision's vocabulary; extra arguments pass through and replace injected defaults.
    ``launcher``: words before the program (the target's, e.g. qemu's emulator); ``defaults``:
    the target's and the package's (runner/defaults.py), as ``hexbuild run`` renders with them."""
    check_sessions(ndev, os_name=os, htp_arch=htp_arch)
    rev = Revision.from_facts(facts)
    sess = sessions(rev, ndev=ndev, devices=None)
    out: dict[str, str] = {}
    for kind, filename in LAUNCH_SCRIPTS.items():
        extra = ["TOOL"] if kind == "tool" else []
        try:
            inv = render(kind, rev=rev, dest=dest, models_dir=models_dir, sessions_=sess, extra=extra,
                         defaults=defaults)
        except UsageError:
            continue  # the revision does not build this tool
        table = flag_table(kind, inv.tool)
        context = {
            "shebang": "/system/bin/sh" if os == "android" else "/bin/sh",
            "kind": kind, "tool": inv.tool, "ndev": ndev, "dest": dest, "models_dir": models_dir,
            "env": inv.env, "defaults": inv.defaults, "arms": _case_arms(table),
            "value_options": sorted(VALUE_OPTIONS - set(table)),
            "takes_model": "model" in {f.group for f in table.values()},
            "session_vars": [v for v in SESSION_VARS if v not in inv.env],
            "loader": loader_of(runtime, dest), "launcher": list(launcher or []),
        }
        if kind == "tool":
            # run-tool.sh takes the tool as $1; test-backend-ops gets -b <first device>.
            ops = render("tool", rev=rev, dest=dest, models_dir=models_dir, sessions_=sess,
                         extra=["test-backend-ops"], defaults=defaults)
            context["backend_ops_defaults"] = ops.defaults
            context["backend_ops_arms"] = _case_arms(BACKEND_OPS_FLAGS)
        out[filename] = render_template(f"launch/{kind}.sh.j2", **context)
    return out
