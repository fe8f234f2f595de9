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
                             lstrip_blocks=True)
    def defined(v: Any) -> Any:
        if isinstance(v, jinja2.Undefined):
            str(v)  # StrictUndefined raises UndefinedError naming the variable
        return v

    # ASCII-only JSON: no value can carry a line break (\x85, \u2028...) into the line format.
    env.filters["json"] = lambda v: json.dumps(defined(v), ensure_ascii=True)
    env.filters["shquote"] = lambda v: shlex.quote(str(defined(v)))
    env.filters["shpath"] = lambda v: shell_path(str(defined(v)))
    return env


def shell_path(path: str) -> str:
    """A quoted path for sh that still expands a leading ``~/`` (quoting alone would not)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def render_template(name: str, **context: Any) -> str:
    return _jinja_env().get_template(name).render(**context)
