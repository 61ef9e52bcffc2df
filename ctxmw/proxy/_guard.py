"""The proxy's failure policy: what a failure of ctxmw's own parts does to a request.

- **Before the upstream call** (claiming the inbox in the shared state): bounded by the
  config's ``state_timeout``. Then ``on_state_error: closed`` (the default) answers HTTP 503:
  the abort switch lives in the shared state, so a request that cannot read it does not run;
  ``open`` sends the caller's messages upstream unchanged (no strategy, no inbox), logged and
  counted.
- **After the provider answered** (telemetry, the shared state's commit, the ledger, metrics):
  never an error. Each stage's use of the shared state is bounded by the same timeout (local
  work, such as measuring the call, is not), and a failure is logged without
  any content (the exception's type only) and counted in ``ctxmw_failures_total{stage}``;
  the client gets the answer it paid for.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ctxmw.proxy.metrics import Metrics

__all__ = ["StateUnavailable", "after_answer", "before_upstream"]

logger = logging.getLogger("ctxmw")
T = TypeVar("T")


class StateUnavailable(Exception):
    """The shared state did not answer in time, or failed, before the upstream call."""


async def before_upstream(work: Callable[[], Awaitable[T]], seconds: float) -> T:
    """Run ``work`` on the shared state within ``seconds``.

    Raises:
        StateUnavailable: it failed or took longer (the original chained).
    """
    try:
        with anyio.fail_after(seconds):
            return await work()
    except Exception as exc:
        # The type only: an error's text may quote what was sent.
        raise StateUnavailable(type(exc).__name__) from exc


async def after_answer(
    stage: str, work: Callable[[], Awaitable[object]], seconds: float | None, metrics: Metrics
) -> bool:
    """Run one stage after the answer, within ``seconds`` (``None``: the stage bounds its own
    waits); a failure is logged and counted, never raised.

    Returns:
        Whether the stage completed.
    """
    try:
        with anyio.fail_after(seconds):
            await work()
    except Exception as exc:
        failed(stage, exc, metrics)
        return False
    return True


def failed(stage: str, exc: BaseException, metrics: Metrics) -> None:
    """Log (the exception's type, never its text: it may quote content) and count a failure."""
    kind = str(exc) if isinstance(exc, StateUnavailable) else type(exc).__name__
    logger.warning("ctxmw proxy: %s failed (%s); the request went on without it.", stage, kind)
    metrics.failure(stage)
