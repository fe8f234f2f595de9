"""The ``hexbuild`` program: the one place that runs before the command line is parsed.

A ``serve stop`` or ``--version`` is answered here without Typer (fast.py); a ``serve --detach`` forks its
supervisor here, before Typer is imported, so that the two processes' imports overlap
(hexbuild/serve/prefork.py), and is then read without Typer too when its words allow (fast.py);
everything else starts as before.
"""

from __future__ import annotations

import sys


def run() -> None:
    from . import fast

    code = fast.run(sys.argv[1:])
    if code is None:
        from ..serve import prefork

        prefork.begin(sys.argv[1:])
        try:
            code = fast.run_detached_serve(sys.argv[1:])
            if code is None:
                from .main import run as run_command

                run_command()
        finally:
            prefork.cancel()  # not handed over (an error, --help): the child exits
    import gc

    gc.freeze()  # as main.run does: no cycle collection over every object at exit (3 ms of a stop)
    sys.exit(code)
