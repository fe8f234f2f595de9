"""A run as argv + env + cwd (never one string), rendered from templates/commands/<kind>.j2 in
the deployed revision's vocabulary, with the user's own flags replacing injected defaults."""

from __future__ import annotations

import posixpath

import json
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Mapping, Sequence

from ..errors import UsageError
from .defaults import PHONE, REVISION_CPU_MASK, RunDefaults
from .flags import flag_table, given_groups
from .htp_sessions import Sessions
from .knobs import VERBOSE_KNOBS
from .revision import Revision
from .templating import render_template

KINDS = ("completion", "cli", "bench", "server", "tool", "mtmd")
# The defaults that only mean something with the Hexagon backend (runner/defaults.py: npu).
NPU_GROUPS = frozenset({"device", "ngl", "poll", "backend"})


@dataclass
class Invocation:
    kind: str
    tool: str  # the binary's name
    argv: list[str]
    env: dict[str, str]
    cwd: str
    defaults: list[tuple[str, list[str]]] = field(default_factory=list)  # (group, argv) injected
    cpu_only: bool = False  # the package has no HTP libraries: no session to ask for or check
    launcher: list[str] = field(default_factory=list)  # what the target starts the program with (qemu:'s emulator)

    def command_line(self) -> str:
        """What runs on the device, as one line a shell would read back into the same argv, with
        the target's launcher (``qemu-aarch64 -L SYSROOT --`` on qemu:): it runs as printed."""
        parts = [f"cd {shlex.quote(self.cwd)} &&"]
        parts += [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        parts += [shlex.quote(a) for a in [*self.launcher, *self.argv]]
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "tool": self.tool, "argv": self.argv, "env": self.env, "cwd": self.cwd,
                "command": self.command_line()}


def _parse_command_spec(text: str, name: str) -> tuple[str, dict[str, str], list[tuple[str, list[str]]]]:
    """The command templates render lines: ``tool JSON``, ``env NAME JSON``, ``default GROUP JSON``."""
    tool, env, defaults = None, {}, []
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        try:
            if word == "tool":
                tool = json.loads(rest)
            elif word == "env":
                var, _, value = rest.partition(" ")
                env[var] = json.loads(value)
            elif word == "default":
                group, _, value = rest.partition(" ")
                argv = json.loads(value)
                if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
                    raise ValueError("not a list of strings")
                defaults.append((group, argv))
            else:
                raise ValueError(f"unknown directive {word!r}")
        except ValueError as e:
            raise RuntimeError(f"template {name} line {lineno}: {e}: {line}") from None
    if not isinstance(tool, str) or not tool:
        raise RuntimeError(f"template {name} names no tool")
    return tool, env, defaults


def resolve_tool(kind: str, rev: Revision, *, extra: Sequence[str], installed: set[str] | None) -> tuple[str, list[str]]:
    """The binary for a kind, as the deployed revision calls it, and the user's remaining args."""
    def available(name: str) -> bool | None:
        if installed is not None:  # what is on the device beats what the source tree builds
            return name in installed
        return rev.has_tool(name)

    extra = list(extra)
    if kind == "tool":
        if not extra:
            raise UsageError("hexbuild run tool needs the tool after --, e.g. -- test-backend-ops -o MUL_MAT")
        return extra[0], extra[1:]
    if kind == "completion":
        if available("llama-completion") is False and available("llama-cli") is not False:
            return "llama-cli", extra  # older trees complete with llama-cli -no-cnv
        name = "llama-completion"
    else:
        name = {"cli": "llama-cli", "bench": "llama-bench", "server": "llama-server", "mtmd": "llama-mtmd-cli"}[kind]
    # Missing from the device: the caller says so (EnvironmentMissing); missing from the
    # revision itself: no deploy can fix that.
    if installed is None and rev.has_tool(name) is False:
        raise UsageError(f"the deployed revision builds no {name}")
    return name, extra


def model_path(model: str | None, models_dir: str) -> str | None:
    if not model:
        return None
    if model.startswith("/"):
        return model
    return posixpath.join(models_dir, model)  # exactly: PurePosixPath would drop a '.' name


def check_args(args: Sequence[str], what: str) -> None:
    for a in args:
        if "\x00" in a:
            raise UsageError(f"{what} contains a NUL character, which no program argument can hold")


__all__ = ["KINDS", "REVISION_CPU_MASK", "Invocation", "check_args", "model_path", "render", "resolve_tool"]


def render(kind: str, *, rev: Revision, dest: str, models_dir: str, sessions_: Sessions,
           knobs: Mapping[str, str] | None = None, model: str | None = None, prompt_path: str | None = None,
           extra: Sequence[str] = (), ubatch: str = "1024", batch: str | None = None,
           bench_output: str | None = None, installed: set[str] | None = None,
           defaults: RunDefaults = PHONE) -> Invocation:
    """The argv + env + cwd for one run of a tool kind, with the user's ``extra`` args last.
    ``defaults`` (runner/defaults.py, the one place that decides them for a target and a
    package): the threads, the CPU mask, and whether the NPU's selection, -ngl and --poll go in."""
    if kind not in KINDS:
        raise UsageError(f"unknown tool kind {kind!r}; valid: {', '.join(KINDS)}")
    check_args(extra, "an argument")
    if model:
        check_args([model], "--model")
    tool, user = resolve_tool(kind, rev, extra=extra, installed=installed)
    if model and kind == "tool" and PurePosixPath(tool).name == "test-backend-ops":
        raise UsageError("test-backend-ops takes no model; drop --model")
    lib = str(PurePosixPath(dest) / "lib")
    names = sessions_.names
    context = {
        "kind": kind, "tool": tool, "style": rev.style, "lib": lib, "session_env": sessions_.env,
        "knobs": dict(knobs or {}), "model_path": model_path(model, models_dir), "prompt_path": prompt_path,
        "threads": defaults.threads, "ubatch": str(ubatch), "batch": None if batch is None else str(batch),
        "ctx_size": "8192", "device_arg": ",".join(names), "bench_devices": "/".join(names),
        "first_device": names[0] if names else None, "bench_output": bench_output,
        "backend_ops": PurePosixPath(tool).name == "test-backend-ops",
        "verbose": any(k in (knobs or {}) for k in VERBOSE_KNOBS), "npu": defaults.npu,
        "cpu_mask": defaults.cpu_mask,
    }
    name = f"commands/{kind}.j2"
    tool_name, env, injected = _parse_command_spec(render_template(name, **context), name)
    if not defaults.npu:  # whatever a template says: no NPU selection, -ngl or --poll without the backend
        injected = [(g, a) for g, a in injected if g not in NPU_GROUPS]
    table = flag_table(kind, tool_name)
    unknown = [g for g, _ in injected if g not in {f.group for f in table.values()}]
    if unknown:
        raise RuntimeError(f"template {name} injects {unknown[0]!r}, which no flag of {tool_name} sets")
    given = given_groups(user, table)
    if bench_output and "output" in given:
        raise UsageError("hexbuild bench reads llama-bench's JSONL output; do not pass -o/--output")
    kept = [(g, a) for g, a in injected if g not in given]
    exe = tool_name if "/" in tool_name else f"./bin/{tool_name}"
    argv = [exe] + [a for _, argv_ in kept for a in argv_] + list(user)
    return Invocation(kind, PurePosixPath(tool_name).name, argv, env, dest, kept)
