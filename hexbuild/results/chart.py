"""PNG charts: matplotlib (the optional ``chart`` extra) on the Agg backend, loaded only when a
chart is drawn. Without it, ``pyplot()`` is EnvironmentMissing with the install hint: a chart
asked for by name fails on it, one drawn beside other outputs is skipped with a warning."""

from __future__ import annotations

import io
from typing import Any

from ..errors import EnvironmentMissing


def pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise EnvironmentMissing("charts need matplotlib", hint="pip install 'hexbuild[chart]'") from None
    return plt


def png(fig: Any) -> bytes:
    """The figure as PNG bytes (110 dpi); the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
