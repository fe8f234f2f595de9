"""Render and run llama.cpp tools on a target: `hexbuild run`, the launch scripts `deploy --ndev`
writes, and the single runs `hexbuild bench` is made of.

A run is an argv + env + cwd (never one string) rendered from templates/commands/<kind>.j2 in
the vocabulary of the *deployed* revision: which session variable it reads (GGML_HEXAGON_NDEV
or GGML_HEXAGON_DEVICES), which GGML_HEXAGON_* knobs, which tools it has, and which defaults its
own scripts inject. The user's own flags replace those defaults rather than duplicate them.

Modules: revision (what the deployed revision understands), htp_sessions, knobs, flags (each
tool's flag names), templating (Jinja2), commands (render → Invocation), launch (launch
scripts), install (the deployed manifest), execution (run one invocation, save its log and
record), proof (its output parsed as it streams and the dispatch proof: did it reach the NPU),
request (the whole `hexbuild run`). Callers import from this package, not the modules.
"""

# Imported when first asked for (PEP 562), not with the package: a command that needs one module
# of the runner (serve's thread default, deploy's destinations) does not pay for the rest.
_HOMES = {
    "KINDS": "commands",
    "Invocation": "commands",
    "check_args": "commands",
    "model_path": "commands",
    "render": "commands",
    "resolve_tool": "commands",
    "RUN_TIMEOUT": "execution",
    "RunRecord": "execution",
    "_slug": "execution",
    "_timestamp": "execution",
    "execute": "execution",
    "record_output": "execution",
    "BACKEND_OPS_FLAGS": "flags",
    "BENCH_FLAGS": "flags",
    "COMMON_FLAGS": "flags",
    "COMMON_SAME": "flags",
    "VALUE_OPTIONS": "flags",
    "Flag": "flags",
    "flag_table": "flags",
    "given_groups": "flags",
    "MAX_SESSIONS": "htp_sessions",
    "SESSION_VARS": "htp_sessions",
    "Sessions": "htp_sessions",
    "check_sessions": "htp_sessions",
    "htp_arch_number": "htp_sessions",
    "sessions": "htp_sessions",
    "DEFAULT_DEST": "install",
    "DEFAULT_MODELS": "install",
    "MANIFEST": "install",
    "PROMPTS_DIR": "install",
    "cpu_only": "install",
    "default_dest": "install",
    "default_models_dir": "install",
    "installed_tools": "install",
    "read_manifest": "install",
    "KNOB_ALIASES": "knobs",
    "VERBOSE_KNOBS": "knobs",
    "knob_env": "knobs",
    "LAUNCH_SCRIPTS": "launch",
    "launch_scripts": "launch",
    "Prepared": "request",
    "RunRequest": "request",
    "open_target": "request",
    "prepare": "request",
    "prepare_on": "request",
    "run": "request",
    "Revision": "revision",
    "render_template": "templating",
    "shell_path": "templating",
}
__all__ = sorted([*_HOMES, "backend_absent", "check_dispatch"])


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def backend_absent(record) -> bool:
    """hexbuild.runner.proof.backend_absent, imported on use."""
    from .proof import backend_absent as absent

    return absent(record)


def check_dispatch(record, *, allow_cpu_fallback: bool = False) -> None:
    """hexbuild.runner.proof.check, imported on use: it loads the results parser."""
    from .proof import check

    check(record, allow_cpu_fallback=allow_cpu_fallback)
