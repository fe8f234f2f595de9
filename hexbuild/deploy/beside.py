"""A device call in a thread beside a block of the caller's: a deploy stages its release beside
the push, and takes its lock beside the probe (a round trip less each)."""

from __future__ import annotations

import threading
from typing import Any


class Beside:
    """``call(*args, **kw)`` in a thread for the length of a ``with`` block; leaving the block
    waits for it and raises its error (the block's own error first); ``value`` is what it
    returned."""

    def __init__(self, call, *args, **kw) -> None:
        self.error: BaseException | None = None
        self.value: Any = None

        def run() -> None:
            try:
                self.value = call(*args, **kw)
            except BaseException as e:  # raised in the caller's thread on leaving the block
                self.error = e

        self.thread = threading.Thread(target=run, name="hexbuild-beside", daemon=True)

    def __enter__(self) -> "Beside":
        self.thread.start()
        return self

    def __exit__(self, kind, *rest) -> None:
        self.thread.join()
        if kind is None and self.error is not None:
            raise self.error
