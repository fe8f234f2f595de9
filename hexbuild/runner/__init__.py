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

from .commands import KINDS, Invocation, check_args, model_path, render, resolve_tool
from .execution import RUN_TIMEOUT, RunRecord, _slug, _timestamp, execute, record_output
from .flags import (BACKEND_OPS_FLAGS, BENCH_FLAGS, COMMON_FLAGS, COMMON_SAME, VALUE_OPTIONS, Flag, flag_table,
                    given_groups)
from .htp_sessions import MAX_SESSIONS, SESSION_VARS, Sessions, check_sessions, htp_arch_number, sessions
from .install import (DEFAULT_DEST, DEFAULT_MODELS, MANIFEST, PROMPTS_DIR, cpu_only, default_dest, default_models_dir,
                      installed_tools, read_manifest)
from .knobs import KNOB_ALIASES, VERBOSE_KNOBS, knob_env
from .launch import LAUNCH_SCRIPTS, launch_scripts
from .request import Prepared, RunRequest, open_target, prepare, prepare_on, run
from .revision import Revision
from .templating import render_template, shell_path



def backend_absent(record) -> bool:
    """hexbuild.runner.proof.backend_absent, imported on use."""
    from .proof import backend_absent as absent

    return absent(record)


def check_dispatch(record, *, allow_cpu_fallback: bool = False) -> None:
    """hexbuild.runner.proof.check, imported on use: it loads the results parser."""
    from .proof import check

    check(record, allow_cpu_fallback=allow_cpu_fallback)


__all__ = [
    "BACKEND_OPS_FLAGS", "BENCH_FLAGS", "COMMON_FLAGS", "COMMON_SAME", "DEFAULT_DEST", "DEFAULT_MODELS",
    "KINDS", "KNOB_ALIASES", "LAUNCH_SCRIPTS", "MANIFEST", "MAX_SESSIONS", "PROMPTS_DIR", "RUN_TIMEOUT",
    "SESSION_VARS", "VALUE_OPTIONS", "VERBOSE_KNOBS", "Flag", "Invocation", "Prepared", "Revision",
    "RunRecord", "RunRequest", "Sessions", "backend_absent", "check_args", "check_dispatch", "check_sessions",
    "cpu_only", "default_dest", "default_models_dir",
    "execute", "flag_table", "given_groups", "htp_arch_number", "installed_tools", "knob_env",
    "launch_scripts", "model_path", "open_target", "prepare", "prepare_on", "read_manifest", "record_output", "render",
    "render_template", "resolve_tool", "run", "sessions", "shell_path",
]
