"""The Jinja2 environment for templates/ (shipped as hexbuild.templates). jinja2 is imported on
first use only: `hexbuild --help` must not pay for it."""

from __future__ import annotations

import functools
import json
import shlex
from typing import Any


@functools.lru_cache(maxsize=1)
def _jinja_env():
    import importlib.resources

    import jinja2

    root = importlib.resources.files("hexbuild.templates")

    def load(name: str) -> str:
        path = root.joinpath(*name.split("/"))
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise jinja2.TemplateNotFound(name) from None

    env = jinja2.Environment(loader=jinja2.FunctionLoader(load), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False, trim_blocks=True,
                             lstrip_blocks=True, bytecode_cache=_bytecode_cache(jinja2))
    def defined(v: Any) -> Any:
        if isinstance(v, jinja2.Undefined):
            str(v)  # StrictUndefined raises UndefinedError naming the variable
        return v

    # ASCII-only JSON: no value can carry a line break (\x85, \u2028...) into the line format.
    env.filters["json"] = lambda v: json.dumps(defined(v), ensure_ascii=True)
    env.filters["shquote"] = lambda v: shlex.quote(str(defined(v)))
    env.filters["shpath"] = lambda v: shell_path(str(defined(v)))
    return env


def _bytecode_cache(jinja2: Any) -> Any:
    """Compiled templates, kept in the user's own cache directory (mode 0700) as Python keeps
    .pyc files: compiling them is most of what `hexbuild run --print` would otherwise spend.
    Jinja2 checks each entry against the template's source checksum and its own version and
    Python's; the directory name carries the environment options, which change the code."""
    import os

    from ..paths import cache_root

    path = cache_root() / f"jinja-{jinja2.__version__}-trim-lstrip-keepnl-v1"
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None  # someone else could plant code there: compile every time instead
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(path), "%s.cache")


def shell_path(path: str) -> str:
    """A quoted path for sh that still expands a leading ``~/`` (quoting alone would not)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def render_template(name: str, **context: Any) -> str:
    return _jinja_env().get_template(name).render(**context)
