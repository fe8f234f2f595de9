"""The docker package (docker-py), imported on first use, and its errors in one line."""

from __future__ import annotations

import sys
import threading
import types
from typing import Any


def import_docker(*, ssh: bool = False) -> Any:
    """The docker package. docker-py's ssh transport does `import paramiko` (which imports
    cryptography and invoke) whether or not an ssh:// host is used: half of its 0.3 s import
    here. So paramiko is imported lazily: `import paramiko` gets a stand-in module that imports
    the real one on its first attribute use, which only an ssh:// engine (or an ssh target)
    makes. docker keeps its ssh support; nothing is hidden."""
    if not ssh:
        defer_import("paramiko")
    import docker

    return docker


class _Deferred(types.ModuleType):
    """A module imported on its first attribute use; then the real one replaces it in
    sys.modules. (importlib's LazyLoader would not do: in Python 3.11 the import statement
    itself reads ``__spec__._initializing`` and so runs the module at once.)"""

    def __getattr__(self, attr: str) -> Any:
        import importlib

        with _DEFER_LOCK:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
        return getattr(real, attr)


_DEFER_LOCK = threading.Lock()


def defer_import(name: str) -> None:
    import importlib.util

    if name in sys.modules or importlib.util.find_spec(name) is None:
        return  # imported already, or not installed (docker-py then has no ssh:// support)
    sys.modules[name] = _Deferred(name)


def api_message(e: Exception) -> str:
    explanation = getattr(e, "explanation", None)
    text = explanation if isinstance(explanation, str) and explanation else str(e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__
