"""How a command's end becomes an exit code: an error is one line on stderr (a JSON object on
stdout with --json) and the exit code of its class (hexbuild/errors.py), a traceback only with
-v. Shared by Typer's path (main.py) and the commands answered before Typer is imported
(fast.py), so that both end alike; nothing here imports Typer."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

from .. import errors
from ..ui import ui


def fail(err: errors.HexbuildError) -> int:
    try:
        if ui.json and not ui.result_emitted:
            doc: dict = {"error": err.to_json()}  # and what was said before it (-q kept it off stderr)
            doc.update({k: v for k, v in (("warnings", ui.warnings), ("notes", ui.notes)) if v})
            sys.stdout.write(json.dumps(doc) + "\n")
            sys.stdout.flush()
        ui.error(err.message, hint=err.hint)
    except BrokenPipeError:
        pass
    return err.exit_code


def interrupted() -> int:
    """The end of an interrupted command (Ctrl-C, or SIGTERM as it): 130. CPython marks an
    interrupt that lands in code run by exec() of a string (a dataclass or namedtuple being made
    by a lazy import) as unhandled for good, even once caught, and under `python -m` the process
    then ends by SIGINT instead of exiting 130; exec() of a string clears that mark."""
    exec("")
    return fail(errors.Interrupted("interrupted"))


def run(call: Callable[[], Any], translate: Callable[[Exception], int | None] = lambda e: None) -> int:
    """``call()``'s exit code: its int, else 0; an error's, as the module says. ``translate``
    gives the code of an exception the caller knows (Typer's), None for any other."""
    try:
        rv = call()
        if rv == errors.INTERRUPTED:
            # typer turns Ctrl-C (and our SIGTERM) into a silent return of 130
            return interrupted()
        return rv if isinstance(rv, int) else 0
    except KeyboardInterrupt:
        return interrupted()
    except errors.HexbuildError as e:
        if ui.verbose:
            import traceback

            traceback.print_exc()
        return fail(e)
    except BrokenPipeError:
        return errors.OK
    except Exception as e:
        code = translate(e)
        if code is not None:
            return code
        # A bug: one line, the traceback with -v.
        if ui.verbose or os.environ.get("HEXBUILD_DEBUG"):
            raise
        return fail(errors.HexbuildError(f"internal error: {type(e).__name__}: {e}",
                                         hint="rerun with -v for the traceback and report it"))


def terminate(signum: int, frame: Any) -> None:
    # SIGTERM (CI cancelling a job, `timeout`) takes the same clean-up path as Ctrl-C.
    raise KeyboardInterrupt
