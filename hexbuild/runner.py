"""Render and run llama.cpp tools on a target: `hexbuild run`, the launch scripts `deploy --ndev`
writes, and the single runs `hexbuild bench` is made of.

A run is an argv + env + cwd (never one string) rendered from templates/commands/<kind>.j2 in
the vocabulary of the *deployed* revision: which session variable it reads (GGML_HEXAGON_NDEV
or GGML_HEXAGON_DEVICES), which GGML_HEXAGON_* knobs, which tools it has, and which defaults its
own scripts inject. The user's own flags replace those defaults rather than duplicate them.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence

from .errors import EnvironmentMissing, HexbuildError, Interrupted, ParseFailed, RemoteFailed, UsageError
from .ui import ui

KINDS = ("completion", "cli", "bench", "server", "tool")
MAX_SESSIONS = 16  # GGML_HEXAGON_MAX_SESSIONS
RUN_TIMEOUT = 24 * 3600.0  # a run's default limit: a long generation or a server must not be cut
MANIFEST = ".hexbuild/manifest.json"
PROMPTS_DIR = ".hexbuild/prompts"
DEFAULT_DEST = {"android": "/data/local/tmp/llama.cpp", "linux": "~/llama.cpp"}
DEFAULT_MODELS = {"android": "/data/local/tmp/gguf", "linux": "~/gguf"}
SESSION_VARS = ("GGML_HEXAGON_NDEV", "GGML_HEXAGON_DEVICES")
# Knobs whose output the tools only print with -v (run.py and the adb scripts add it).
VERBOSE_KNOBS = ("GGML_HEXAGON_VERBOSE", "GGML_HEXAGON_PROFILE", "GGML_HEXAGON_OPTRACE")
# --hex-<knob> names that are not GGML_HEXAGON_<KNOB>: the adb scripts' HMX variable.
KNOB_ALIASES = {"hmx": "GGML_HEXAGON_USE_HMX"}
_KNOB_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


# -- what each tool's flags are called ----------------------------------------------------------
@dataclass(frozen=True)
class Flag:
    group: str  # the setting it controls; a default of the same group is dropped
    takes_value: bool


def _flags(spec: dict[str, tuple[tuple[str, ...], bool]]) -> dict[str, Flag]:
    return {alias: Flag(group, takes) for group, (aliases, takes) in spec.items() for alias in aliases}


# common/arg.cpp (llama-cli, llama-completion, llama-server, llama-mtmd-cli)
COMMON_FLAGS = _flags({
    "model": (("-m", "--model"), True),
    "threads": (("-t", "--threads"), True),
    "ngl": (("-ngl", "--gpu-layers", "--n-gpu-layers"), True),
    "fa": (("-fa", "--flash-attn"), True),
    "ubatch": (("-ub", "--ubatch-size"), True),
    "batch": (("-b", "--batch-size"), True),
    "ctx": (("-c", "--ctx-size"), True),
    "device": (("-dev", "--device"), True),
    "poll": (("--poll",), True),
    "cpu_mask": (("-C", "--cpu-mask"), True),
    "cpu_strict": (("--cpu-strict",), True),
    "mmap": (("--mmap", "--no-mmap"), False),
    "load_mode": (("-lm", "--load-mode"), True),
    "conversation": (("-cnv", "--conversation", "-no-cnv", "--no-conversation"), False),
    "file": (("-f", "--file"), True),
    "verbose": (("-v", "--verbose", "--log-verbose"), False),
})
# One load-mode setting, two spellings across revisions.
COMMON_SAME = {"load_mode": "mmap", "mmap": "load_mode"}

# tools/llama-bench/llama-bench.cpp
BENCH_FLAGS = _flags({
    "model": (("-m", "--model"), True),
    "threads": (("-t", "--threads"), True),
    "ngl": (("-ngl", "--n-gpu-layers"), True),
    "fa": (("-fa", "--flash-attn"), True),
    "ubatch": (("-ub", "--ubatch-size"), True),
    "batch": (("-b", "--batch-size"), True),
    "device": (("-dev", "--device"), True),
    "poll": (("--poll",), True),
    "cpu_mask": (("-C", "--cpu-mask"), True),
    "cpu_strict": (("--cpu-strict",), True),
    "mmap": (("-mmp", "--mmap"), True),
    "load_mode": (("-lm", "--load-mode"), True),
    "output": (("-o", "--output"), True),
    "repetitions": (("-r", "--repetitions"), True),
    "n_prompt": (("-p", "--n-prompt"), True),
    "n_gen": (("-n", "--n-gen"), True),
    "verbose": (("-v", "--verbose"), False),
})

# tests/test-backend-ops.cpp
BACKEND_OPS_FLAGS = _flags({
    "backend": (("-b",), True),
    "op": (("-o",), True),
    "params": (("-p",), True),
})

# Other value-taking options whose value must not be mistaken for a flag (a prompt "-t").
VALUE_OPTIONS = frozenset({
    "-p", "--prompt", "-sys", "--system-prompt", "-r", "--reverse-prompt", "-n", "--predict",
    "--n-predict", "--grammar", "--grammar-file", "-j", "--json-schema", "-ctk", "--cache-type-k",
    "-ctv", "--cache-type-v", "--mmproj", "--image", "--host", "--port", "-a", "--alias",
    "--temp", "--seed", "-s", "--chat-template", "-ot", "--override-tensor", "-ts", "--tensor-split",
    "-mg", "--main-gpu", "-sm", "--split-mode", "--lora", "-np", "--parallel", "-o", "--output",
})


def flag_table(kind: str, tool: str) -> dict[str, Flag]:
    if kind == "bench":
        return BENCH_FLAGS
    if kind == "tool" and PurePosixPath(tool).name == "test-backend-ops":
        return BACKEND_OPS_FLAGS
    return COMMON_FLAGS  # llama-* tools share common/arg.cpp


def given_groups(args: Sequence[str], table: Mapping[str, Flag]) -> set[str]:
    """The settings the user's own arguments already set."""
    groups: set[str] = set()
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        flag = table.get(arg)
        if flag is not None:
            groups.add(flag.group)
            if table is COMMON_FLAGS and flag.group in COMMON_SAME:
                groups.add(COMMON_SAME[flag.group])
            skip = flag.takes_value
        elif arg in VALUE_OPTIONS:
            skip = True
    return groups


# -- what the deployed revision understands -----------------------------------------------------
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


def htp_arch_number(arch: str | None) -> int | None:
    m = re.fullmatch(r"v?(\d+)", (arch or "").strip().lower())
    return int(m.group(1)) if m else None


def check_sessions(n: int, *, os_name: str, htp_arch: str | None) -> None:
    if n < 1 or n > MAX_SESSIONS:
        raise UsageError(f"the session count must be 1..{MAX_SESSIONS}, got {n}")
    arch = htp_arch_number(htp_arch)
    if n > 1 and os_name == "android" and arch is not None and arch < 75:
        raise UsageError(f"llama.cpp forces one HTP session on Android below v75 and this device is v{arch}; "
                         f"{n} sessions cannot work", hint="use --ndev 1")


# -- sessions ------------------------------------------------------------------------------------
@dataclass
class Sessions:
    env: dict[str, str]
    names: list[str]  # device names as the tools see them (HTP0, HTP0:1, ...)

    @property
    def count(self) -> int:
        return len(self.names)


def _split_devices(spec: str) -> list[str]:
    """Split a GGML_HEXAGON_DEVICES list at top-level commas (``HTP0[0-1],HTP1[2-3]``)."""
    parts, cur, depth = [], "", 0
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def sessions(rev: Revision, *, ndev: int | None, devices: str | None) -> Sessions:
    """The session selection in the deployed revision's vocabulary."""
    if ndev is not None and devices is not None:
        raise UsageError("give --ndev or --devices, not both")
    if devices is not None:
        devices = devices.strip()
        if not devices:
            raise UsageError("--devices is empty")
        if devices.isdigit():
            ndev, devices = int(devices), None
    if devices is None:
        n = ndev or 1
        if n < 1 or n > MAX_SESSIONS:
            raise UsageError(f"--ndev must be 1..{MAX_SESSIONS}, got {n}")
        names = [f"HTP{i}" for i in range(n)]
        if n == 1:
            return Sessions({}, names)  # the backend's default: one session, HTP0
        if rev.devices_var:
            return Sessions({rev.devices_var: str(n)}, names)
        if rev.known and not rev.ndev_var:
            raise UsageError(f"--ndev {n}: the deployed revision reads neither GGML_HEXAGON_NDEV nor "
                             "GGML_HEXAGON_DEVICES, so it opens one session only")
        # NDEV is read by every revision that can open several sessions (newer ones as a fallback).
        return Sessions({"GGML_HEXAGON_NDEV": str(n)}, names)

    parts = _split_devices(devices)
    names = [p.split("[", 1)[0].strip() for p in parts]
    bad = [n for n in names if not re.fullmatch(r"HTP\d+(:\d+)?", n)]
    if bad:
        raise UsageError(f"--devices: {bad[0]!r} is not an HTP device (HTP<n>, HTP<n>:<m>, HTP<n>[<cores>])")
    if len(names) > MAX_SESSIONS:
        raise UsageError(f"--devices: at most {MAX_SESSIONS} sessions, got {len(names)}")
    plain = all("[" not in p and ":" not in p for p in parts)
    if rev.devices_var:
        return Sessions({rev.devices_var: devices}, names)
    if plain and (rev.ndev_var or not rev.known or names == ["HTP0"]):
        # HTP0..HTP{n-1} is what NDEV=n opens.
        indices = sorted(int(n[3:]) for n in names)
        if indices != list(range(len(indices))):
            raise UsageError(f"--devices {devices}: this revision opens sessions HTP0..HTP<n-1> only "
                             "(GGML_HEXAGON_NDEV)", hint=f"use --ndev {len(indices)}")
        env = {"GGML_HEXAGON_NDEV": str(len(names))} if len(names) > 1 else {}
        return Sessions(env, names)
    if rev.known:
        raise UsageError(f"--devices {devices}: the deployed revision does not read GGML_HEXAGON_DEVICES "
                         "(names like HTP0:1 or HTP0[0-1] need a newer llama.cpp)", hint="use --ndev N")
    return Sessions({"GGML_HEXAGON_DEVICES": devices}, names)


# -- knobs ---------------------------------------------------------------------------------------
def knob_env(knobs: Sequence[tuple[str, str]], rev: Revision) -> dict[str, str]:
    """``--hex-nhvx 4`` → GGML_HEXAGON_NHVX=4, checked against what the revision reads."""
    valid = sorted(v for v in (rev.env_vars or []) if v not in SESSION_VARS)
    out: dict[str, str] = {}
    for name, value in knobs:
        key = name.lower()
        if not _KNOB_RE.match(key):
            raise UsageError(f"--hex-{name}: not a knob name")
        if key in ("ndev", "devices"):
            raise UsageError(f"--hex-{key} is spelled --{key}")
        var = KNOB_ALIASES.get(key, "GGML_HEXAGON_" + key.upper().replace("-", "_"))
        if rev.env_vars is not None and var not in valid:
            knob_names = ", ".join("--hex-" + v[len("GGML_HEXAGON_"):].lower().replace("_", "-") for v in valid)
            raise UsageError(f"--hex-{key}: the deployed revision does not read {var}; valid: {knob_names}")
        out[var] = value
    return out


# -- rendering -----------------------------------------------------------------------------------
@dataclass
class Invocation:
    kind: str
    tool: str  # the binary's name
    argv: list[str]
    env: dict[str, str]
    cwd: str
    defaults: list[tuple[str, list[str]]] = field(default_factory=list)  # (group, argv) injected

    def command_line(self) -> str:
        """What runs on the device, as one line a shell would read back into the same argv."""
        parts = [f"cd {shlex.quote(self.cwd)} &&"]
        parts += [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        parts += [shlex.quote(a) for a in self.argv]
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "tool": self.tool, "argv": self.argv, "env": self.env, "cwd": self.cwd,
                "command": self.command_line()}


@functools.lru_cache(maxsize=1)
def _jinja_env():
    import importlib.resources

    import jinja2

    root = importlib.resources.files("hexbuild.templates")

    def load(name: str) -> str:
        path = root.joinpath(*name.split("/"))
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise jinja2.TemplateNotFound(name) from None

    env = jinja2.Environment(loader=jinja2.FunctionLoader(load), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False, trim_blocks=True,
                             lstrip_blocks=True)
    def defined(v: Any) -> Any:
        if isinstance(v, jinja2.Undefined):
            str(v)  # StrictUndefined raises UndefinedError naming the variable
        return v

    # ASCII-only JSON: no value can carry a line break (\x85, \u2028...) into the line format.
    env.filters["json"] = lambda v: json.dumps(defined(v), ensure_ascii=True)
    env.filters["shquote"] = lambda v: shlex.quote(str(defined(v)))
    env.filters["shpath"] = lambda v: shell_path(str(defined(v)))
    return env


def shell_path(path: str) -> str:
    """A quoted path for sh that still expands a leading ``~/`` (quoting alone would not)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def render_template(name: str, **context: Any) -> str:
    return _jinja_env().get_template(name).render(**context)


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
        name = {"cli": "llama-cli", "bench": "llama-bench", "server": "llama-server"}[kind]
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
    return str(PurePosixPath(models_dir) / model)


def check_args(args: Sequence[str], what: str) -> None:
    for a in args:
        if "\x00" in a:
            raise UsageError(f"{what} contains a NUL character, which no program argument can hold")


def render(kind: str, *, rev: Revision, dest: str, models_dir: str, sessions_: Sessions,
           knobs: Mapping[str, str] | None = None, model: str | None = None, prompt_path: str | None = None,
           extra: Sequence[str] = (), threads: str = "6", ubatch: str = "1024", batch: str | None = None,
           bench_output: str | None = None, installed: set[str] | None = None) -> Invocation:
    """The argv + env + cwd for one run of a tool kind, with the user's ``extra`` args last."""
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
        "threads": str(threads), "ubatch": str(ubatch), "batch": None if batch is None else str(batch),
        "ctx_size": "8192", "device_arg": ",".join(names), "bench_devices": "/".join(names),
        "first_device": names[0], "bench_output": bench_output,
        "backend_ops": PurePosixPath(tool).name == "test-backend-ops",
        "verbose": any(k in (knobs or {}) for k in VERBOSE_KNOBS),
    }
    name = f"commands/{kind}.j2"
    tool_name, env, defaults = _parse_command_spec(render_template(name, **context), name)
    table = flag_table(kind, tool_name)
    unknown = [g for g, _ in defaults if g not in {f.group for f in table.values()}]
    if unknown:
        raise RuntimeError(f"template {name} injects {unknown[0]!r}, which no flag of {tool_name} sets")
    given = given_groups(user, table)
    if bench_output and "output" in given:
        raise UsageError("hexbuild bench reads llama-bench's JSONL output; do not pass -o/--output")
    kept = [(g, a) for g, a in defaults if g not in given]
    exe = tool_name if "/" in tool_name else f"./bin/{tool_name}"
    argv = [exe] + [a for _, argv_ in kept for a in argv_] + list(user)
    return Invocation(kind, PurePosixPath(tool_name).name, argv, env, dest, kept)


# -- launch scripts for `deploy --ndev` ---------------------------------------------------------
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
                   htp_arch: str | None) -> dict[str, str]:
    """File name → POSIX sh script for each tool the revision builds, opening ``ndev`` sessions
    in the revision's vocabulary; extra arguments pass through and replace injected defaults."""
    check_sessions(ndev, os_name=os, htp_arch=htp_arch)
    rev = Revision.from_facts(facts)
    sess = sessions(rev, ndev=ndev, devices=None)
    out: dict[str, str] = {}
    for kind, filename in LAUNCH_SCRIPTS.items():
        extra = ["TOOL"] if kind == "tool" else []
        try:
            inv = render(kind, rev=rev, dest=dest, models_dir=models_dir, sessions_=sess, extra=extra)
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
        }
        if kind == "tool":
            # run-tool.sh takes the tool as $1; test-backend-ops gets -b <first device>.
            ops = render("tool", rev=rev, dest=dest, models_dir=models_dir, sessions_=sess,
                         extra=["test-backend-ops"])
            context["backend_ops_defaults"] = ops.defaults
            context["backend_ops_arms"] = _case_arms(BACKEND_OPS_FLAGS)
        out[filename] = render_template(f"launch/{kind}.sh.j2", **context)
    return out


# -- reading the deployed install ----------------------------------------------------------------
def read_manifest(target, dest: str) -> dict | None:
    raw = target.read_file(f"{dest.rstrip('/')}/{MANIFEST}")
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        ui.warn(f"{dest}/{MANIFEST} is not valid JSON; using forms every revision understands")
        return None
    return data if isinstance(data, dict) else None


def installed_tools(manifest: Mapping[str, Any] | None) -> set[str] | None:
    """The bin/ entries a deployed manifest lists (None when it lists no files)."""
    files = (manifest or {}).get("files")
    if not isinstance(files, list):
        return None
    return {f["path"][4:] for f in files if isinstance(f, dict) and str(f.get("path", "")).startswith("bin/")}


def default_dest(target) -> str:
    """Where the install is when --dest and deploy.dest say nothing: a local: target's own
    directory, else the convention of the target's OS."""
    if getattr(target, "kind", None) == "local" and getattr(target, "root", None):
        return target.root
    return DEFAULT_DEST.get(getattr(target, "os", None) or "android", DEFAULT_DEST["android"])


# -- running -------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "target"


def _timestamp() -> str:
    t = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(t)) + f"-{int(t * 1000) % 1000:03d}"


def atomic_write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def parse_log(text: str, source: str = "-") -> Any:
    """The results parser's reading of a log (hexbuild/results.py) when it recognizes
    something, else None."""
    try:
        from . import results
    except ImportError:
        return None
    parse = getattr(results, "parse_text", None)
    if parse is None:
        return None
    try:
        return parse(text.splitlines(keepends=True), source) or None
    except ParseFailed:
        return None
    except Exception as e:  # a log the parser cannot read is no reason to fail the run
        ui.detail(f"results parser: {type(e).__name__}: {e}")
        return None


@dataclass
class RunRecord:
    target: str
    invocation: Invocation
    exit_code: int | None  # None: the run did not finish (error says why)
    duration_s: float
    log: str
    stdout: bytes
    results: Any = None
    json_path: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"target": self.target, "tool": self.invocation.tool, "argv": self.invocation.argv,
               "env": self.invocation.env, "cwd": self.invocation.cwd, "exit_code": self.exit_code,
               "duration_s": round(self.duration_s, 3), "log": self.log, "results": self.results}
        if self.error:
            out["error"] = self.error
        return out


def execute(target, inv: Invocation, *, results_dir: Path, passthrough: bool = True,
            timeout: float | None = None, stem: str | None = None, save_json: bool = True) -> RunRecord:
    """Run an invocation, streaming its output and saving the log (and its JSON result) under
    ``results_dir``; the log is written as it arrives and renamed into place at the end."""
    stem = stem or f"{_timestamp()}-{_slug(inv.tool)}-{_slug(target.spec)}"
    results_dir.mkdir(parents=True, exist_ok=True)
    log_path = results_dir / f"{stem}.log"
    fd, part = tempfile.mkstemp(prefix=f".{log_path.name}.", suffix=".part", dir=results_dir)
    stdout_chunks: list[bytes] = []
    # With --json, stdout carries only the result: the program's own stdout goes to stderr.
    out_stream = sys.stderr if ui.json else sys.stdout

    def on_output(stream: str, data: bytes) -> None:
        os.write(fd, data)
        if stream == "stdout":
            stdout_chunks.append(data)
        if passthrough and not ui.quiet:
            sink = out_stream if stream == "stdout" else sys.stderr
            sink.flush()
            try:
                sink.buffer.write(data)  # type: ignore[attr-defined]
            except AttributeError:  # a text-only stream (pytest capture)
                sink.write(data.decode("utf-8", "replace"))
            sink.flush()

    start = time.monotonic()
    interrupted = False
    error: HexbuildError | None = None
    code: int | None
    try:
        code = target.run(inv.argv, env=inv.env, cwd=inv.cwd, timeout=timeout or RUN_TIMEOUT,
                          on_output=on_output)
    except KeyboardInterrupt:
        interrupted, code = True, 130
    except HexbuildError as e:  # a timeout, a device gone mid-run: keep what was logged
        error, code = e, None
    except BaseException:
        os.close(fd)
        Path(part).unlink(missing_ok=True)
        raise
    duration = time.monotonic() - start
    os.close(fd)
    os.replace(part, log_path)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    record = RunRecord(target.spec, inv, code, duration, str(log_path), b"".join(stdout_chunks),
                       results=parse_log(text, str(log_path)), error=error.message if error else None)
    if save_json:
        json_path = results_dir / f"{stem}.json"
        atomic_write(json_path, json.dumps(record.to_json(), indent=2) + "\n")
        record.json_path = str(json_path)
    if interrupted:
        raise Interrupted(f"interrupted; the log so far is in {log_path}")
    if error is not None:
        error.hint = error.hint or f"the output so far is in {log_path}"
        raise error
    return record


# -- the whole `hexbuild run` --------------------------------------------------------------------
@dataclass
class RunRequest:
    kind: str
    target: str
    dest: str = ""
    models_dir: str = ""
    ndev: int | None = None
    devices: str | None = None
    model: str | None = None
    prompt_file: str | None = None
    knobs: list[tuple[str, str]] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    threads: int | str = 6  # a str may be llama-bench's list syntax ("4,6")
    ubatch: int | str = 1024
    batch: str | None = None
    bench_output: str | None = None  # llama-bench -o, forced by hexbuild bench
    results_dir: str = "hexbuild-results"
    timeout: float | None = None  # None: RUN_TIMEOUT (targets' own default is meant for short calls)


@dataclass
class Prepared:
    """A target opened and a request rendered against what is deployed on it."""

    target: Any
    invocation: Invocation
    revision: Revision
    dest: str
    prompt_upload: tuple[Path, str] | None = None  # local prompt file → its path on the device


def open_target(spec: str, settings):
    from .targets import parse_target

    if not spec:
        raise UsageError("no target: give -t TARGET (adb, adb:SERIAL, ssh://HOST, local:DIR) or set run.target")
    return parse_target(spec, settings)


def prepare(req: RunRequest, settings, *, offline_ok: bool = False) -> Prepared:
    """Open the target, read what the deployed revision understands and render the invocation.
    With ``offline_ok`` (for --print) an unreachable target falls back to forms every revision
    understands."""
    target = open_target(req.target, settings)
    try:
        return _prepare(target, req, offline_ok=offline_ok)
    except BaseException:
        target.close()
        raise


def _prepare(target, req: RunRequest, *, offline_ok: bool) -> Prepared:
    os_name = getattr(target, "os", "android") or "android"
    dest = req.dest or default_dest(target)
    models_dir = req.models_dir or DEFAULT_MODELS.get(os_name, DEFAULT_MODELS["android"])
    manifest, installed, reachable = None, None, True
    try:
        # "~/llama.cpp" quoted as an argument would not expand: resolve it on the target
        dest, models_dir = target.expand(dest), target.expand(models_dir)
        manifest = read_manifest(target, dest)
        installed = installed_tools(manifest)
        if installed is None:
            installed = set(target.list_files(f"{dest}/bin", hashes=False))
    except (EnvironmentMissing, RemoteFailed):
        if not offline_ok:
            raise
        reachable = False
        ui.warn(f"{req.target} is not reachable: showing the command in forms every revision understands")
    if reachable and not installed:
        if not offline_ok:
            raise EnvironmentMissing(f"nothing is installed at {target.spec}:{dest}",
                                     hint="run hexbuild deploy first, or give --dest")
        ui.warn(f"nothing is installed at {target.spec}:{dest}")
        installed = None
    rev = Revision.from_facts((manifest or {}).get("llama_cpp"))
    if not rev.known and reachable:
        ui.detail(f"{dest}/{MANIFEST} not found: using forms every revision understands")

    sess = sessions(rev, ndev=req.ndev, devices=req.devices)
    if sess.count > 1 and reachable:
        arch = (manifest or {}).get("htp_arch")
        if not arch:
            try:
                arch = target.probe(dest).htp_arch
            except (EnvironmentMissing, RemoteFailed):
                if not offline_ok:
                    raise
        check_sessions(sess.count, os_name=os_name, htp_arch=arch)
    knobs = knob_env(req.knobs, rev)
    if rev.style == "run.py" and "GGML_HEXAGON_OPPOLL" in (rev.env_vars or []):
        knobs.setdefault("GGML_HEXAGON_OPPOLL", "1")  # run.py's default

    prompt_upload, prompt_path = None, None
    if req.prompt_file:
        local = Path(req.prompt_file).expanduser()
        if local.is_file():
            import hashlib

            digest = hashlib.sha256(local.read_bytes()).hexdigest()[:12]
            prompt_path = f"{dest}/{PROMPTS_DIR}/{digest}-{_slug(local.name)}"
            prompt_upload = (local, prompt_path)
        elif req.prompt_file.startswith("/"):
            prompt_path = req.prompt_file  # a file already on the device
        else:
            raise UsageError(f"prompt file not found: {req.prompt_file}")
    if req.kind == "bench" and prompt_path:
        raise UsageError("llama-bench takes no prompt file")

    inv = render(req.kind, rev=rev, dest=dest, models_dir=models_dir, sessions_=sess, knobs=knobs,
                 model=req.model, prompt_path=prompt_path, extra=req.extra, threads=str(req.threads),
                 ubatch=str(req.ubatch), batch=req.batch, bench_output=req.bench_output, installed=installed)
    if installed is not None and "/" not in inv.tool and inv.argv[0].startswith("./bin/") \
            and inv.argv[0][len("./bin/"):] not in installed:
        raise EnvironmentMissing(f"{inv.argv[0][len('./bin/'):]} is not installed in {dest}/bin on {target.spec}",
                                 hint="deploy a build that has it")
    return Prepared(target, inv, rev, dest, prompt_upload)


def run(req: RunRequest, settings) -> RunRecord:
    prepared = prepare(req, settings)
    with prepared.target as target:
        if prepared.prompt_upload:
            local, remote = prepared.prompt_upload
            target.write_file(remote, local.read_bytes())
        ui.info(f"running {prepared.invocation.tool} on {req.target}")
        record = execute(target, prepared.invocation, results_dir=Path(req.results_dir), timeout=req.timeout)
    ui.info(f"{record.invocation.tool} exited {record.exit_code} after {record.duration_s:.1f}s; log: {record.log}")
    return record
