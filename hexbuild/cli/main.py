"""The hexbuild command line: Typer commands that parse, call and render; no logic here.

Every command module under hexbuild/cli/ defines ``register(app)``. Global flags (--json, -v,
-q, --config) are added to every command, so they work before or after the command name.
Errors become one line on stderr (a JSON object on stdout with --json) and the exit code of
their class (hexbuild/errors.py); a traceback only with -v (outcome.py, which the one command
answered before Typer starts, fast.py's ``serve stop``, shares).
"""

from __future__ import annotations

import functools
import gc
import importlib
import inspect
import signal
import sys
from typing import Any, Callable, Optional

import typer

from .. import errors
from ..ui import ui
from . import outcome
from .common import state

# Commands in the order `--help` lists them; each module defines register(app).
COMMAND_MODULES = ["build", "verify", "package", "deploy", "run", "serve", "bench", "bisect", "test", "lab", "plan",
                   "results", "release", "source", "toolchain", "config", "doctor", "explain", "inspect"]
# Commands registered by a module of another name.
COMMAND_HOMES = {"chat": "serve"}


def new_app() -> typer.Typer:
    return typer.Typer(
        name="hexbuild",
        help="Build, package, deploy and run llama.cpp's Hexagon (Snapdragon NPU) backend.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
    )


app = new_app()


def _version(value: bool) -> None:
    if value:
        from .fast import print_version

        print_version(as_json=ui.json)
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Build, package, deploy and run llama.cpp's Hexagon (Snapdragon NPU) backend."""


def _set_json(value: bool) -> None:
    if value:
        ui.json = True


def _set_verbose(value: int) -> None:
    if value:
        ui.verbose = max(ui.verbose, value)


def _set_quiet(value: bool) -> None:
    if value:
        ui.quiet = True


def _set_config(value: str | None) -> None:
    if value:
        state.config_file = value


_PANEL = "Global options"


def _global_parameters() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("_hexbuild_json", kw, annotation=bool, default=typer.Option(
            False, "--json", expose_value=False, is_eager=True, callback=_set_json, rich_help_panel=_PANEL,
            help="Machine output on stdout (JSON); human progress stays on stderr.")),
        inspect.Parameter("_hexbuild_verbose", kw, annotation=int, default=typer.Option(
            0, "-v", "--verbose", count=True, expose_value=False, is_eager=True, callback=_set_verbose,
            rich_help_panel=_PANEL, show_default=False, metavar="",  # a flag, counted (-vv), not -v N
            help="Print every external command and container spec; tracebacks. Repeat for more: -vv.")),
        inspect.Parameter("_hexbuild_quiet", kw, annotation=bool, default=typer.Option(
            False, "-q", "--quiet", expose_value=False, is_eager=True, callback=_set_quiet,
            rich_help_panel=_PANEL, help="Only errors on stderr.")),
        inspect.Parameter("_hexbuild_config", kw, annotation=Optional[str], default=typer.Option(
            None, "--config", metavar="FILE", expose_value=False, is_eager=True, callback=_set_config,
            rich_help_panel=_PANEL, help="Config file (default: hexbuild.toml or \\[tool.hexbuild] in the checkout).")),
    ]


def with_global_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the global flags, so they work after the command name too."""
    if getattr(fn, "_hexbuild_globals", False):
        return fn

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        for name in [k for k in kwargs if k.startswith("_hexbuild_")]:
            del kwargs[name]  # their callbacks already acted
        return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    command.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *_global_parameters()])  # type: ignore[attr-defined]
    command._hexbuild_globals = True  # type: ignore[attr-defined]
    return command


def _group_callback() -> None:
    pass


def _add_globals(typer_app: typer.Typer) -> None:
    if typer_app.registered_callback is None:
        typer_app.callback()(_group_callback)
    if typer_app.registered_callback is not None and typer_app.registered_callback.callback is not None:
        typer_app.registered_callback.callback = with_global_options(typer_app.registered_callback.callback)
    for info in typer_app.registered_commands:
        info.callback = with_global_options(info.callback)
    for group in typer_app.registered_groups:
        _add_globals(group.typer_instance)


_clis: dict[str | None, Any] = {}


def build_cli(only: str | None = None) -> Any:
    """The click command tree, built once per process (in-process tests call main() many times).
    ``only``: a command module whose commands alone make the tree; Typer's introspection of
    every other command is most of a short command's start-up."""
    if only not in _clis:
        tree = new_app() if only else app
        tree.callback()(_root)
        for name in [only] if only else COMMAND_MODULES:
            importlib.import_module(f"hexbuild.cli.{name}").register(tree)
        _add_globals(tree)
        _clis[only] = typer.main.get_command(tree)
    return _clis[only]


def command_module(argv: list[str]) -> str | None:
    """The command module the command line names (its first word after the global flags), or
    None when it names none (--help, --version, a typo: the whole tree answers those)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--config":
            i += 2
            continue
        if arg.startswith("-"):
            if arg in ("-h", "--help", "--version"):
                return None
            i += 1
            continue
        arg = COMMAND_HOMES.get(arg, arg)
        return arg if arg in COMMAND_MODULES else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    head = argv[: argv.index("--")] if "--" in argv else argv
    if "--json" in head:  # so that even a parse error answers in JSON
        ui.json = True
    cli = build_cli(command_module(argv))
    return outcome.run(lambda: cli.main(args=argv, prog_name="hexbuild", standalone_mode=False), _typer_end)


def _typer_end(e: Exception) -> int | None:
    """The exit code of Typer's (and click's) own ends and usage errors; None for the others."""
    if isinstance(e, typer.Exit):
        return e.exit_code
    if isinstance(e, typer.Abort):
        return outcome.interrupted()
    names = {c.__name__ for c in type(e).__mro__}
    if "NoArgsIsHelpError" in names:  # typer has printed the help already
        return errors.USAGE
    if "ClickException" in names:  # click's (or typer's own copy of click's) usage errors
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None else "hexbuild"
        msg = e.format_message().strip().rstrip(".")  # type: ignore[attr-defined]
        return outcome.fail(errors.UsageError(f"{msg} (see '{where} --help')"))
    return None


def run() -> None:
    signal.signal(signal.SIGTERM, outcome.terminate)
    code = main()
    # The interpreter's shutdown runs the cycle collector over every object the imports made
    # (typer, click, the command modules): 27-45 ms of a 0.4 s deploy here, 7-9 ms with them
    # frozen. Nothing of hexbuild's relies on a cycle being finalized at exit: files are closed
    # by their ``with``, temporary directories by their finalizers (atexit, before this matters).
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
