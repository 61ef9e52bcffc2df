"""matplotlib, loaded on demand for the ``--plot`` options (an optional extra)."""

from __future__ import annotations

from typing import Any

from ctxmw.errors import UsageError

__all__ = ["pyplot"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the file-only Agg backend.

    Raises:
        UsageError: matplotlib is not installed (``pip install matplotlib``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UsageError(
            "--plot needs matplotlib, which is not installed; install it with "
            "pip install matplotlib (in a ctxmw checkout: pip install -e '.[plot]')."
        ) from exc
    return plt
