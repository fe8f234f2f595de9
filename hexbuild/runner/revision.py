"""What the llama.cpp revision deployed on a target understands, from its manifest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass
class Revision:
    """Facts about the llama.cpp revision on the target (the manifest's ``llama_cpp`` section);
    every field is None when unknown, and then hexbuild uses forms that work on every revision."""

    ndev_var: str | None = None
    devices_var: str | None = None
    env_vars: list[str] | None = None
    tools: list[str] | None = None
    style: str = "unknown"  # adb-scripts | run.py | unknown: whose injected defaults to follow
    known: bool = False

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any] | None) -> "Revision":
        if not facts or "device_selection" not in facts:
            return cls()  # a manifest from a build that recorded no source facts
        sel = facts.get("device_selection") or {}
        scripts = [str(s) for s in facts.get("scripts") or []]
        if any(s.endswith("run.py") for s in scripts):
            style = "run.py"
        elif any(s.endswith(".sh") for s in scripts):
            style = "adb-scripts"
        elif sel.get("devices_var"):
            style = "run.py"
        elif sel.get("ndev_var"):
            style = "adb-scripts"
        else:
            style = "unknown"
        env_vars = facts.get("env_vars")
        tools = facts.get("tools")
        return cls(ndev_var=sel.get("ndev_var"), devices_var=sel.get("devices_var"),
                   env_vars=list(env_vars) if env_vars else None, tools=list(tools) if tools else None,
                   style=style, known=True)

    def has_tool(self, name: str) -> bool | None:
        return None if self.tools is None else name in self.tools
