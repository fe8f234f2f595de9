"""Spawning external programs: always an argv list (never a shell string), always a timeout,
and printed with -v as a line that can be pasted into a shell."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from .errors import EnvironmentMissing, HexbuildError
from .ui import ui


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


class CommandTimeout(HexbuildError):
    kind = "timeout"

    def __init__(self, argv: Sequence[str], timeout: float):
        super().__init__(f"{os.path.basename(argv[0])} did not answer within {timeout:g}s")
        self.argv = list(argv)
        self.timeout = timeout


def which(program: str, *, hint: str | None = None) -> str:
    path = shutil.which(program)
    if not path:
        raise EnvironmentMissing(f"{program} not found on PATH", hint=hint)
    return path


def run(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
        input: bytes | str | None = None, cwd: str | None = None) -> Completed:
    """Run to completion and capture output as text. Raises CommandTimeout after ``timeout``."""
    argv = [str(a) for a in argv]
    ui.command(argv)
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        cp = subprocess.run(argv, capture_output=True, timeout=timeout, env=full_env, cwd=cwd,
                            input=input.encode() if isinstance(input, str) else input)
    except subprocess.TimeoutExpired:
        raise CommandTimeout(argv, timeout) from None
    except FileNotFoundError:
        raise EnvironmentMissing(f"{argv[0]} not found") from None
    return Completed(argv, cp.returncode, cp.stdout.decode("utf-8", "replace"), cp.stderr.decode("utf-8", "replace"))
