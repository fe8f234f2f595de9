"""Settings: defaults < hexbuild.toml / [tool.hexbuild] < HEXBUILD_* environment < flags.

One table (``OPTIONS``) declares every key once: its type, default, allowed values and help.
Files use sections (``[build] os = "linux"``; in pyproject ``[tool.hexbuild.build]``), the
environment uses ``HEXBUILD_<SECTION>_<KEY>`` (``HEXBUILD_BUILD_OS=linux``), and commands pass
their flags as dotted keys. Every value remembers where it came from (``hexbuild config show``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from .data import toml
from .errors import ConfigError


# No dataclasses here: every command loads settings, and `serve stop`, answered before Typer,
# would import dataclasses (and inspect, ast, dis with it: 7 ms of a 65 ms stop) for these two.
class Option(NamedTuple):
    key: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    item_choices: tuple[str, ...] | None = None  # for list options
    minimum: int | None = None
    maximum: int | None = None
    secret: bool = False  # never shown: `config show` says only whether it is set

    @property
    def env_var(self) -> str:
        return "HEXBUILD_" + self.key.replace(".", "_").replace("-", "_").upper()

    @property
    def type_name(self) -> str:
        if self.type is list:
            return "list of strings"
        return {str: "string", int: "integer", bool: "boolean", float: "number"}[self.type]


def _o(key, type_, default, help_, **kw) -> Option:
    return Option(key, type_, default, help_, **kw)


OPTIONS: dict[str, Option] = {o.key: o for o in [
    _o("source", str, ".", "the llama.cpp checkout"),
    # build
    _o("build.os", str, "android", "target OS", choices=("android", "linux")),
    _o("build.build_type", str, "release", "CMake build type", choices=("release", "debug", "relwithdebinfo")),
    _o("build.preset", str, "", "CMake configure preset (default: the revision's Snapdragon preset)"),
    _o("build.build_dir", str, "", "build directory, relative to the checkout (default: the revision's convention)"),
    _o("build.install_dir", str, "", "install prefix, relative to the checkout (default: the revision's convention)"),
    _o("build.jobs", int, 0, "parallel compile jobs (0: all cores)", minimum=0),
    _o("build.htp", list, [], "NPU library versions to build (default: every version the revision builds)"),
    _o("build.cmake_args", list, [], "extra arguments for cmake configure"),
    _o("build.engine", str, "docker", "where the build runs", choices=("docker", "local")),
    _o("build.image", str, "", "toolchain image (default: the image the checkout pins for the OS)"),
    _o("build.pull", str, "missing", "image pull policy", choices=("missing", "always", "never")),
    _o("build.user", str, "", "uid:gid inside the container (default: the invoking user; root on rootless engines)"),
    _o("build.env_passthrough", list, [], "extra environment variables passed into the build container"),
    _o("build.cache_volume", str, "hexbuild-ccache", "named volume for the compiler cache, or an absolute directory on the engine's machine (bind-mounted)"),
    _o("build.keep_container", bool, False, "keep the build container after the run, for debugging"),
    _o("build.transfer", str, "auto", "how the checkout reaches the container: mount (bind mount), copy (Docker API copy in/out; for remote engines) or auto", choices=("auto", "mount", "copy")),
    _o("build.toolchain", str, "vendor", "vendor (the image the checkout pins) or open (hexbuild toolchain open: Debian's clang, Linux only, no NPU libraries)", choices=("vendor", "open")),
    _o("build.build_targets", list, [], "CMake targets to build and install (default: all; with the open toolchain, the programs hexbuild runs)"),
    # deploy
    _o("deploy.targets", list, [], "deploy targets (adb, adb:SERIAL, adb://HOST:PORT[/SERIAL], adb+ssh://…, ssh://…, local:DIR)"),
    _o("deploy.dest", str, "", "install directory on the target (default /data/local/tmp/llama.cpp on Android, ~/llama.cpp on Linux)"),
    _o("deploy.models_dir", str, "", "models directory on the target (default /data/local/tmp/gguf on Android, ~/gguf on Linux)"),
    _o("deploy.ndev", int, 0, "HTP sessions for the launch scripts (0: do not write them)", minimum=0, maximum=16),
    _o("deploy.parallel", int, 4, "targets deployed at once", minimum=1, maximum=64),
    _o("deploy.timeout", float, 600.0, "seconds allowed for one transfer", minimum=1),
    _o("deploy.wait", float, 10.0, "seconds to wait for another deploy to the same destination", minimum=0),
    _o("deploy.stale_lock", float, 3600.0, "seconds after which another deploy's lock is stale and broken", minimum=1),
    # ssh
    _o("ssh.known_hosts", str, "", "known_hosts file (default ~/.ssh/known_hosts)"),
    _o("ssh.identity", str, "", "private key file (default: the SSH agent and ~/.ssh/id_*)"),
    _o("ssh.timeout", float, 15.0, "seconds to connect and for each remote call", minimum=1),
    # linux (AArch64 glibc runtime)
    _o("linux.sysroot", str, "", "AArch64 glibc runtime for qemu: targets and deploy --bundle-runtime (default: the open toolchain image's /usr/aarch64-linux-gnu, extracted into the cache)"),
    _o("qemu.npu", str, "v73", "HTP version of the virtual NPU of qemu+npu: targets (the emulated cDSP)",
       choices=("v68", "v69", "v73", "v75")),
    _o("deploy.bundle_runtime", bool, False, "ship the package's glibc loader and runtime libraries (runtime/) and start programs through that loader"),
    # run
    _o("run.target", str, "", "default target for run and bench"),
    _o("run.ndev", int, 0, "HTP sessions for run (0: one, or as --devices says)", minimum=0, maximum=16),
    _o("run.model", str, "", "model file name in the models directory"),
    _o("run.threads", int, 6, "CPU threads (-t)", minimum=1),
    _o("run.ubatch", int, 1024, "ubatch size", minimum=1),
    _o("run.results_dir", str, "hexbuild-results", "where logs and JSON results are saved"),
    # ci
    _o("ci.strict", bool, False, "treat warnings as errors (on by default under CI=true)"),
    _o("release.dist_dir", str, "dist", "where release assets are written"),
    # inspect
    _o("inspect.baseline", str, "", "accepted inspect findings (hexbuild inspect --write-baseline), for the strict gate"),
    _o("inspect.objdump", str, "", "disassembler for inspect (default: the newest llvm-objdump 17+ found)"),
    # lab (LAVA)
    _o("lab.url", str, "", "the LAVA server for hexbuild lab (https://lava.example.org)"),
    _o("lab.token", str, "", "the LAVA API token (better in HEXBUILD_LAB_TOKEN than in a file); never printed",
       secret=True),
    _o("lab.device_type", str, "", "the LAVA device type lab run submits to"),
    _o("lab.queue_timeout", float, 3600.0, "seconds a lab job may wait for a board before it is canceled", minimum=1),
    _o("lab.poll", float, 5.0, "seconds between two looks at a lab job's state", minimum=0.1),
    _o("lab.serve_artifacts", str, "", "HOST:PORT hexbuild serves the job tarball on while lab jobs run"),
    _o("lab.publish", str, "", "a command that publishes the job tarball ({path}, {name}), instead of serving it"),
    _o("lab.artifact_url", str, "", "where the lab's workers download the published tarball ({name})"),
]}

SOURCES = ("default", "file", "env", "flag")


class Settings:
    __slots__ = ("values", "origins", "config_file")

    def __init__(self, values: dict[str, Any] | None = None, origins: dict[str, str] | None = None,
                 config_file: Path | None = None) -> None:
        self.values = {} if values is None else values
        self.origins = {} if origins is None else origins
        self.config_file = config_file

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settings):
            return NotImplemented
        return (self.values, self.origins, self.config_file) == (other.values, other.origins, other.config_file)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass's

    def __repr__(self) -> str:
        return f"Settings(values={self.values!r}, origins={self.origins!r}, config_file={self.config_file!r})"

    def with_flags(self, values: dict[str, Any]) -> "Settings":
        """A copy with some values set as if by flags."""
        return Settings({**self.values, **values}, {**self.origins, **{k: "flag" for k in values}}, self.config_file)

    def __getitem__(self, key: str) -> Any:
        if key not in OPTIONS:
            raise KeyError(key)
        return self.values[key]

    def origin(self, key: str) -> str:
        return self.origins[key]

    def as_json(self) -> dict[str, Any]:
        return {
            "config_file": str(self.config_file) if self.config_file else None,
            "settings": {k: {"value": _shown(OPTIONS[k], self.values[k]), "source": self.origins[k],
                             "env": OPTIONS[k].env_var} for k in OPTIONS},
        }


def _shown(opt: Option, value: Any) -> Any:
    """A secret's value is never shown, only whether it is set."""
    if opt.secret:
        return "(set)" if value else ""
    return value


def _valid_keys_text() -> str:
    return ", ".join(OPTIONS)


def coerce(opt: Option, value: Any, where: str, *, text: bool = False) -> Any:
    """Check a value from a file, or convert one given as text (environment, flags)."""
    t = opt.type
    from_text = text and isinstance(value, str) and t is not str
    try:
        if t is bool:
            if isinstance(value, bool):
                v = value
            elif from_text and value.strip().lower() in ("1", "true", "yes", "on"):
                v = True
            elif from_text and value.strip().lower() in ("0", "false", "no", "off", ""):
                v = False
            else:
                raise ValueError
        elif t is int:
            if isinstance(value, bool):
                raise ValueError
            v = int(value.strip()) if from_text else value
            if not isinstance(v, int):
                raise ValueError
        elif t is float:
            if isinstance(value, bool):
                raise ValueError
            v = float(value.strip()) if from_text else value
            if not isinstance(v, (int, float)):
                raise ValueError
            v = float(v)
        elif t is list:
            if from_text:
                v = [s.strip() for s in value.split(",") if s.strip()]
            elif isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
                # flags may repeat and each may hold a comma list: --htp v73 --htp v75,v79
                v = [s.strip() for item in value for s in (item.split(",") if text else [item]) if s.strip()]
            else:
                raise ValueError
        else:
            if not isinstance(value, str):
                raise ValueError
            v = value
    except ValueError:
        article = "an" if opt.type_name[0] in "aeiou" else "a"
        raise ConfigError(f"{where}: {opt.key} must be {article} {opt.type_name}, got {value!r}") from None
    if opt.choices and v not in opt.choices and not (v == "" and opt.default == ""):
        raise ConfigError(f"{where}: {opt.key} must be one of {', '.join(opt.choices)}, got {v!r}")
    if opt.minimum is not None and isinstance(v, (int, float)) and v < opt.minimum:
        raise ConfigError(f"{where}: {opt.key} must be at least {opt.minimum}, got {v!r}")
    if opt.maximum is not None and isinstance(v, (int, float)) and v > opt.maximum:
        raise ConfigError(f"{where}: {opt.key} must be at most {opt.maximum}, got {v!r}")
    return v


def _flatten(table: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            if not any(o.startswith(key + ".") for o in OPTIONS):
                raise ConfigError(f"{where}: unknown section [{key}]; valid keys: {_valid_keys_text()}")
            out.update(_flatten(v, where, key + "."))
        else:
            if key not in OPTIONS:
                raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {_valid_keys_text()}")
            out[key] = v
    return out


def read_file(path: Path) -> dict[str, Any]:
    """The dotted settings in a hexbuild.toml, or in a pyproject.toml's [tool.hexbuild]."""
    tomllib = toml()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file is a directory: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("hexbuild", {})
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: [tool.hexbuild] must be a table")
    raw = _flatten(data, str(path))
    return {k: coerce(OPTIONS[k], v, str(path)) for k, v in raw.items()}


def find_config_file(source_dir: Path) -> Path | None:
    candidate = source_dir / "hexbuild.toml"
    if candidate.is_file():
        return candidate
    pyproject = source_dir / "pyproject.toml"
    if pyproject.is_file():
        try:
            text = pyproject.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if "hexbuild" not in text:
            return None  # someone else's pyproject: not worth a TOML parse on every command
        tomllib = toml()
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None  # someone else's pyproject; only ours must parse
        if "hexbuild" in data.get("tool", {}):
            return pyproject
    return None


def load(*, flags: Mapping[str, Any] | None = None, config_file: str | Path | None = None,
         env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Resolve every setting. ``flags`` holds dotted keys whose value is not None."""
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    for k in flags:
        if k not in OPTIONS:
            raise KeyError(f"flag for unknown setting {k}")  # a programming error, not a user one
    cwd = cwd or Path.cwd()
    s = Settings()
    for k, o in OPTIONS.items():
        s.values[k] = list(o.default) if isinstance(o.default, list) else o.default
        s.origins[k] = "default"

    env_values = {}
    for k, o in OPTIONS.items():
        if o.env_var in env:
            env_values[k] = coerce(o, env[o.env_var], o.env_var, text=True)
    unknown_env = [v for v in env if v.startswith("HEXBUILD_") and v not in {o.env_var for o in OPTIONS.values()}
                   and v not in _NON_SETTING_ENV]
    if unknown_env:
        raise ConfigError(f"unknown environment variable {unknown_env[0]}; valid: "
                          + ", ".join(o.env_var for o in OPTIONS.values()))

    # The checkout decides where the config file is, so resolve it first (flag > env > cwd).
    source = flags.get("source", env_values.get("source"))
    source_dir = (cwd / source) if source else cwd
    path: Path | None = None
    explicit = config_file or env.get("HEXBUILD_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_absolute():
            path = cwd / path
        if not path.exists():
            raise ConfigError(f"config file not found: {explicit}")
    elif source_dir.is_dir():
        path = find_config_file(source_dir)
    if path is not None:
        s.config_file = path
        for k, v in read_file(path).items():
            if k == "source" and not Path(v).is_absolute():
                v = str((path.parent / v).resolve())
            s.values[k] = v
            s.origins[k] = "file"
    for k, v in env_values.items():
        s.values[k] = v
        s.origins[k] = "env"
    for k, v in flags.items():
        s.values[k] = coerce(OPTIONS[k], v, _flag_name(k), text=True)
        s.origins[k] = "flag"
    return s


# Variables that share the prefix but are not settings. HEXBUILD_VNPU_*: the environment of a
# program running on the virtual NPU (its libcdsprpc.so and DSP runtime read them), which a shell
# that runs such programs by hand has set when it runs hexbuild too.
_NON_SETTING_ENV = {"HEXBUILD_CONFIG", "HEXBUILD_TEST_CACHE", "HEXBUILD_TEST_DOCKER_HOST", "HEXBUILD_DEBUG",
                    "HEXBUILD_TEST_LAVA", "HEXBUILD_TEST_ENGINE", "HEXBUILD_TEST_VNPU_QEMU",
                    "HEXBUILD_TEST_VNPU_RUNTIME", "HEXBUILD_VNPU_QEMU", "HEXBUILD_VNPU_RUNTIME", "HEXBUILD_VNPU_CPU",
                    "HEXBUILD_VNPU_LOG", "HEXBUILD_VNPU_FARF"}


def _flag_name(key: str) -> str:
    return "--" + key.split(".")[-1].replace("_", "-")


def is_strict(settings: Settings, env: Mapping[str, str] | None = None) -> bool:
    """--strict defaults to on under CI=true unless the config or environment says otherwise."""
    env = os.environ if env is None else env
    if settings.origin("ci.strict") != "default":
        return bool(settings["ci.strict"])
    return env.get("CI", "").lower() in ("1", "true", "yes")


Loader = Callable[..., Settings]
