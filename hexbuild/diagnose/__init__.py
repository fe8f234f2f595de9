"""Why an HTP session did not open: device checks for ``hexbuild doctor --target`` and the
FastRPC/AEE error decoder behind ``hexbuild explain``.

Other commands call ``explain_code(code) -> Explanation`` (e.g. ``run`` when a session fails)
and ``explain_line`` / ``explain_log`` for log lines; ``check_device`` runs the device checks.
"""

from ..results.fastrpc_errors import Explanation, explain_code, explain_line, explain_log, parse_code, related_facts

__all__ = ["Explanation", "check_device", "explain_code", "explain_line", "explain_log", "parse_code",
           "related_facts"]


def check_device(*args, **kwargs):
    """See :func:`hexbuild.diagnose.device.check_device` (imported on use: it needs the targets)."""
    from .device import check_device as run

    return run(*args, **kwargs)
