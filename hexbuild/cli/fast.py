"""The command lines answered before Typer is imported: ``serve stop`` and ``--version``.

A user who stops a server waits for the server's exit, and for hexbuild to start: Python and
Typer's import and parse were two thirds of a stop on 2 cores (0.08 s of 0.11 s, against the
server's own 0.03 s). So the words of a ``serve stop`` in the shapes its help shows (``--port N``
or ``--port=N``, ``-t T``/``--target T``/``--target=T``, ``--all``, the global ``--json``, ``-q``,
``-v``, ``--config FILE`` anywhere) are read here and go to the very code the Typer command calls
(serve_stop.py), ending as every command does (outcome.py). Anything else, however close (help,
a repeated or attached option, a value that is not plainly one, another command), is left to
Typer, which parses it and says what is wrong: this reads only what it is sure of.
``--version`` alone (with ``--json`` or ``-q`` at most) is the other: a script that checks the
version paid 0.11 s for Typer's import to print one line.
tests/test_cli_fast.py holds both to Typer's answers, word for word.
"""

from __future__ import annotations

STOP_VALUED = {"--port": "port", "-t": "target", "--target": "target"}


def serve_stop_words(argv: list[str]) -> tuple[dict, dict] | None:
    """(global flags, stop's options) of a ``serve stop`` command line this module reads; None
    for any other."""
    flags: dict = {"json": False, "quiet": False, "verbose": 0, "config": None}
    verbose = [0, 0, 0]  # -v counted per command (hexbuild, serve, stop): each sets at least its own count
    opts: dict = {"target": None, "port": None, "all_": False}
    words: list[str] = []
    given: set[str] = set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, attached = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        valued = name == "--config" or (name in STOP_VALUED and words == ["serve", "stop"])
        if valued:
            if eq:
                value = attached
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                return None
            key = "config" if name == "--config" else STOP_VALUED[name]
            if key in given or not value or value.startswith("-"):
                return None  # Typer says which value it takes, or what is wrong with it
            given.add(key)
            if key == "port":
                if not (value.isascii() and value.isdigit()):
                    return None
                opts["port"] = int(value)
            elif key == "target":
                opts["target"] = value
            else:
                flags["config"] = value
        elif eq:
            return None
        elif arg == "--all" and words == ["serve", "stop"] and "all" not in given:
            given.add("all")
            opts["all_"] = True
        elif arg == "--json":
            flags["json"] = True
        elif arg in ("-q", "--quiet"):
            flags["quiet"] = True
        elif arg == "--verbose" or (len(arg) > 1 and arg[0] == "-" and set(arg[1:]) == {"v"}):
            verbose[len(words)] += 1 if arg == "--verbose" else len(arg) - 1
        elif arg.startswith("-") or len(words) == 2:
            return None
        else:
            words.append(arg)
        i += 1
    flags["verbose"] = max(verbose)
    return (flags, opts) if words == ["serve", "stop"] else None


def version_words(argv: list[str]) -> dict | None:
    """{"json": bool} of a ``--version`` command line this module reads; None for any other."""
    rest = [a for a in argv if a not in ("--json", "-q", "--quiet")]
    if rest != ["--version"] or argv.count("--json") > 1:
        return None
    return {"json": "--json" in argv}


def print_version(*, as_json: bool) -> None:
    """What ``--version`` prints, here and in main.py's callback."""
    from .. import __version__

    if as_json:
        import json

        print(json.dumps({"version": __version__}))
    else:
        print(f"hexbuild {__version__}")


def run(argv: list[str]) -> int | None:
    """The exit code of ``argv`` when this module answers it; None when Typer is to."""
    version = version_words(argv)
    if version is not None:
        print_version(as_json=version["json"])
        return 0
    read = serve_stop_words(argv)
    if read is None:
        return None
    flags, opts = read
    import signal

    from ..ui import ui
    from . import outcome
    from .common import state
    from .serve_stop import stop

    # what the global flags' callbacks do in main.py
    ui.json = ui.json or flags["json"]
    ui.quiet = ui.quiet or flags["quiet"]
    ui.verbose = max(ui.verbose, flags["verbose"])
    state.config_file = flags["config"] or state.config_file
    ui.detail("serve stop: the command line was read before Typer was imported (hexbuild/cli/fast.py)")
    signal.signal(signal.SIGTERM, outcome.terminate)
    return outcome.run(lambda: stop(**opts))
