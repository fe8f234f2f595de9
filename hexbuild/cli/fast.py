"""The command lines answered before Typer is imported: ``serve stop``, ``--version`` and
``serve --detach``.

A user who stops a server waits for the server's exit, and for hexbuild to start: Python and
Typer's import and parse were two thirds of a stop on 2 cores (0.08 s of 0.11 s, against the
server's own 0.03 s). So the words of a ``serve stop`` in the shapes its help shows (``--port N``
or ``--port=N``, ``-t T``/``--target T``/``--target=T``, ``--all``, the global ``--json``, ``-q``,
``-v``, ``--config FILE`` anywhere) are read here and go to the very code the Typer command calls
(serve_stop.py), ending as every command does (outcome.py). Anything else, however close (help,
a repeated or attached option, a value that is not plainly one, another command), is left to
Typer, which parses it and says what is wrong: this reads only what it is sure of.
``--version`` alone (with ``--json`` or ``-q`` at most) is the next: a script that checks the
version paid 0.11 s for Typer's import to print one line. A ``serve --detach`` with serve's own
options (no ``--hex-KNOB``, nothing after ``--``) is the last: its supervisor may have launched
the server already (serve/early_start.py), and Typer's 45 ms of import and parse beside that
starting server slowed it by 26 ms on 2 cores (measured).
tests/test_cli_fast.py holds them to Typer's answers, word for word.
"""

from __future__ import annotations


def _digits(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _in(low: int, high: int | None):
    def read(value: str) -> int | None:
        n = _digits(value)
        return n if n is not None and n >= low and (high is None or n <= high) else None
    return read


def _seconds(value: str) -> float | None:
    """A plain decimal number of at least 1 (Typer's FloatRange(min=1)); others are Typer's."""
    plain = value.isascii() and value.replace(".", "", 1).isdigit()
    return float(value) if plain and float(value) >= 1 else None


def _text(value: str) -> str:
    return value


STOP_VALUED = {"--port": ("port", _digits), "-t": ("target", _text), "--target": ("target", _text)}
STOP_SWITCHES = {"--all": ("all_", True)}
STOP_DEFAULTS = {"target": None, "port": None, "all_": False}
# serve's options (cli/serve.py) with the values Typer takes; --hex-KNOB and -- are Typer's
SERVE_VALUED = {"-t": ("target", _text), "--target": ("target", _text), "--model": ("model", _text),
                "-m": ("model", _text), "--package": ("package", _text), "--port": ("port", _in(1, 65535)),
                "--device-port": ("device_port", _in(1, 65535)), "--ctx": ("ctx_size", _in(1, None)),
                "--ndev": ("ndev", _in(1, 16)), "--devices": ("devices", _text), "--dest": ("dest", _text),
                "--models-dir": ("models_dir", _text), "--ready-timeout": ("ready_timeout", _seconds)}
SERVE_SWITCHES = {"--detach": ("detach", True), "--allow-cpu-fallback": ("allow_cpu_fallback", True),
                  "--bundle-runtime": ("bundle_runtime", True), "--no-bundle-runtime": ("bundle_runtime", False)}
SERVE_DEFAULTS = {"target": None, "model": None, "package": None, "port": None, "device_port": None,
                  "ctx_size": None, "ndev": None, "devices": None, "dest": None, "models_dir": None,
                  "bundle_runtime": None, "detach": False, "allow_cpu_fallback": False, "ready_timeout": 600.0}


def read_words(argv: list[str], command: list[str], valued: dict, switches: dict,
               defaults: dict) -> tuple[dict, dict] | None:
    """(global flags, the command's options) of a command line naming ``command`` with options
    of the shapes its help shows (``--opt V``, ``--opt=V``, each at most once, a value that is
    plainly one; the global flags anywhere); None for any other."""
    flags: dict = {"json": False, "quiet": False, "verbose": 0, "config": None}
    verbose = [0] * (len(command) + 1)  # -v counted per command: each sets at least its own count
    opts: dict = dict(defaults)
    words: list[str] = []
    given: set[str] = set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, attached = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        mine = words == command
        if name == "--config" or (mine and name in valued):
            if eq:
                value = attached
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                return None
            key, read = ("config", _text) if name == "--config" else valued[name]
            got = None if key in given or not value or value.startswith("-") else read(value)
            if got is None:
                return None  # Typer says which value it takes, or what is wrong with it
            given.add(key)
            (flags if key == "config" else opts)[key] = got
        elif eq:
            return None
        elif mine and arg in switches and switches[arg][0] not in given:
            key, value = switches[arg]
            given.add(key)
            opts[key] = value
        elif arg == "--json":
            flags["json"] = True
        elif arg in ("-q", "--quiet"):
            flags["quiet"] = True
        elif arg == "--verbose" or (len(arg) > 1 and arg[0] == "-" and set(arg[1:]) == {"v"}):
            verbose[len(words)] += 1 if arg == "--verbose" else len(arg) - 1
        elif arg.startswith("-") or mine:
            return None
        else:
            words.append(arg)
        i += 1
    flags["verbose"] = max(verbose)
    return (flags, opts) if words == command else None


def serve_stop_words(argv: list[str]) -> tuple[dict, dict] | None:
    """(global flags, stop's options) of a ``serve stop`` command line this module reads; None
    for any other."""
    return read_words(argv, ["serve", "stop"], STOP_VALUED, STOP_SWITCHES, STOP_DEFAULTS)


def serve_detach_words(argv: list[str]) -> tuple[dict, dict] | None:
    """(global flags, serve's options) of a ``serve ... --detach`` command line this module reads
    (no knobs, nothing after --); None for any other."""
    read = read_words(argv, ["serve"], SERVE_VALUED, SERVE_SWITCHES, SERVE_DEFAULTS)
    return read if read is not None and read[1]["detach"] else None


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
    """The exit code of ``argv`` when this module answers it (``--version``, ``serve stop``); None
    when it does not (then a detached serve's supervisor is forked, and ``run_detached_serve``)."""
    version = version_words(argv)
    if version is not None:
        print_version(as_json=version["json"])
        return 0
    read = serve_stop_words(argv)
    if read is None:
        return None
    from .serve_stop import stop

    return _answer("serve stop", read[0], lambda: stop(**read[1]))


def run_detached_serve(argv: list[str]) -> int | None:
    """The exit code of a ``serve ... --detach`` this module reads; None when Typer is to."""
    read = serve_detach_words(argv)
    if read is None:
        return None
    from ..ui import ui
    from .serve_start import detach, prepare

    opts = {k: v for k, v in read[1].items() if k != "detach"}
    return _answer("serve", read[0], lambda: detach(*prepare(**opts, knobs=[], extra=[], stream_log=not ui.quiet)))


def _answer(command: str, flags: dict, call) -> int:
    import signal

    from ..ui import ui
    from . import outcome
    from .common import state

    # what the global flags' callbacks do in main.py
    ui.json = ui.json or flags["json"]
    ui.quiet = ui.quiet or flags["quiet"]
    ui.verbose = max(ui.verbose, flags["verbose"])
    state.config_file = flags["config"] or state.config_file
    ui.detail(f"{command}: the command line was read before Typer was imported (hexbuild/cli/fast.py)")
    signal.signal(signal.SIGTERM, outcome.terminate)
    return outcome.run(call)
