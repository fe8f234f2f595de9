"""hexbuild as a user runs it, for the benchmarks: this checkout installed as a wheel into a
virtual environment of its own (its dependencies from the package index, as pip installs them),
made once per content of the checkout under ~/.cache/hexbuild-bench/wheel-<hash>; or
`python -m hexbuild` from the checkout (--hexbuild checkout), which pays for the sandbox's and
the editable install's .pth files on every start.

    from wheel import hexbuild_command
    argv, env = hexbuild_command("wheel")   # [".../venv/bin/hexbuild"], env without PYTHONPATH
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hexbuild-bench"


def checkout_hash(src: Path = REPO) -> str:
    h = hashlib.sha256()
    for p in sorted([src / "pyproject.toml", *(src / "hexbuild").rglob("*"), *(src / "docker").rglob("*")]):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(src)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def installed_hexbuild(src: Path = REPO) -> Path:
    """The venv's hexbuild program for the content of ``src`` (this checkout, or another
    revision's tree), installed once."""
    venv = CACHE / f"wheel-{checkout_hash(src)}"
    program, done = venv / "bin" / "hexbuild", venv / "installed"
    if done.exists():
        return program
    shutil.rmtree(venv, ignore_errors=True)  # a part left by an interrupted install
    print(f"installing {src} as a wheel into {venv} (once; about a minute) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(src)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done.write_text("")
    return program


def revision_tree(rev: str, into: Path) -> Path:
    """Revision ``rev`` of this repository's files, extracted into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def hexbuild_command(how: str) -> tuple[list[str], dict[str, str]]:
    """(argv prefix, environment) to run hexbuild ``how``: "wheel" or "checkout"."""
    # the test infrastructure's variables are for the benchmarks' engines, not for hexbuild (an older
    # revision refuses a HEXBUILD_ variable it does not know)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("HEXBUILD_TEST_")}
    if how == "wheel":
        return [str(installed_hexbuild())], env
    return [sys.executable, "-m", "hexbuild"], dict(env, PYTHONPATH=str(REPO))
