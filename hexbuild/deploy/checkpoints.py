"""Where a deploy may be stopped: on interrupt (one target failed hard, or Ctrl-C) and, in tests,
by ``hexbuild.deploy.FAULT_HOOK`` cutting it at a named step."""

from __future__ import annotations

import sys
import threading

from ..errors import Interrupted
from ..targets.base import Target

# set when the parallel driver gives up: stops transfers at their next chunk; installs stay whole
cancel = threading.Event()


def fault(spec: str, name: str) -> None:
    # read from the package each time: tests assign hexbuild.deploy.FAULT_HOOK, not a copy here
    hook = sys.modules[__package__].FAULT_HOOK
    if hook is not None:
        hook(spec, name)


def checkpoint(target: Target, name: str) -> None:
    if cancel.is_set():
        raise Interrupted("interrupted")
    fault(target.spec, name)
