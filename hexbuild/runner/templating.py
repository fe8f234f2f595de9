"""The Jinja2 environment for templates/ (shipped as hexbuild.templates). jinja2 is imported on
first use only: `hexbuild --help` must not pay for it, and a render seen before is read back
from a cache (see ``RenderCache``), so a repeated `hexbuild run` does not pay for it either."""

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


def _private_dir(path: Any) -> bool:
    """Create ``path`` (mode 0700) if needed; False when it is not ours alone, since what is
    read back from there becomes code or a command line."""
    import os

    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _bytecode_cache(jinja2: Any) -> Any:
    """Compiled templates, kept in the user's own cache directory (mode 0700) as Python keeps
    .pyc files: compiling them is most of what `hexbuild run --print` would otherwise spend.
    Jinja2 checks each entry against the template's source checksum and its own version and
    Python's; the directory name carries the environment options, which change the code."""
    from ..paths import cache_root

    path = cache_root() / f"jinja-{jinja2.__version__}-trim-lstrip-keepnl-v1"
    if not _private_dir(path):
        return None  # someone else could plant code there: compile every time instead
    return jinja2.FileSystemBytecodeCache(str(path), "%s.cache")


def shell_path(path: str) -> str:
    """A quoted path for sh that still expands a leading ``~/`` (quoting alone would not)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


class RenderCache:
    """Renders seen before, so that a command run again skips importing and running Jinja2
    (a third of what `hexbuild run --print` costs over a bare Typer start-up). An entry holds
    its whole key, compared exactly on reading: the template's name, the context as JSON, and
    the size and mtime of every template, of jinja2 and of this module (the filters), the way
    make and ccache's direct mode tell a file has changed. File names are only buckets."""

    LIMIT = 512  # entries; past it the directory is emptied (each entry is a few hundred bytes)

    def __init__(self) -> None:
        from ..paths import cache_root

        self.root = cache_root() / "renders-v1"
        self._stamp: str | None = None

    def key(self, name: str, context: dict[str, Any]) -> str | None:
        try:
            data = json.dumps(context, sort_keys=True, ensure_ascii=True)
        except (TypeError, ValueError):
            return None  # a value JSON cannot hold: render it every time
        stamp = self._sources_stamp()
        return None if stamp is None else f"{stamp}\n{name}\n{data}"

    def get(self, key: str) -> str | None:
        if not _private_dir(self.root):
            return None
        try:
            text = (self.root / self._bucket(key)).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        head, sep, body = text.partition("\0")
        return body if sep and head == key else None

    def put(self, key: str, rendered: str) -> None:
        import os

        from ..paths import atomic_write

        if not _private_dir(self.root):
            return
        try:
            with os.scandir(self.root) as it:
                if sum(1 for _ in it) >= self.LIMIT:
                    for entry in os.scandir(self.root):
                        os.unlink(entry.path)
            atomic_write(self.root / self._bucket(key), f"{key}\0{rendered}")
        except OSError:
            pass  # a cache that cannot be written costs the next run a render, nothing more

    @staticmethod
    def _bucket(key: str) -> str:
        import zlib

        return f"{zlib.crc32(key.encode()):08x}-{len(key)}"

    def _sources_stamp(self) -> str | None:
        if self._stamp is None:
            import importlib.util
            import os

            import hexbuild.templates as templates

            spec = importlib.util.find_spec("jinja2")
            if spec is None or spec.origin is None or templates.__file__ is None:
                return None
            files = [__file__, spec.origin]
            for root, _dirs, names in os.walk(os.path.dirname(templates.__file__)):
                files += sorted(os.path.join(root, n) for n in names if n.endswith(".j2"))
            parts = []
            for f in files:
                try:
                    st = os.stat(f)
                except OSError:
                    return None
                parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
            self._stamp = "|".join(parts)
        return self._stamp


@functools.lru_cache(maxsize=1)
def _render_cache() -> RenderCache:
    return RenderCache()


def render_template(name: str, **context: Any) -> str:
    cache = _render_cache()
    key = cache.key(name, context)
    if key is not None and (hit := cache.get(key)) is not None:
        return hit
    rendered = _jinja_env().get_template(name).render(**context)
    if key is not None:
        cache.put(key, rendered)
    return rendered
