"""The proxy's failure policy: what a failure of ctxmw's own parts does to a request.

One budget per request: every wait of a request on the shared state, before the upstream call
and after the answer, spends from one :class:`StateBudget` of ``state_timeout`` seconds; once
it is spent, the request's next use of the state fails at once, without waiting.

- **Before the upstream call** (claiming the inbox in the shared state): bounded by the
  request's budget. Then ``on_state_error: closed`` (the default) answers HTTP 503:
  the abort switch lives in the shared state, so a request that cannot read it does not run;
  ``open`` sends the caller's messages upstream unchanged (no strategy, no inbox), logged and
  counted.
- **After the provider answered** (telemetry, the shared state's commit, the ledger, metrics):
  never an error. Each stage's use of the shared state spends from the same budget (local
  work, such as measuring the call, does not), and a failure is logged without
  any content (the exception's type only) and counted in ``ctxmw_failures_total{stage}``;
  the client gets the answer it paid for.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ctxmw.errors import CtxmwError
from ctxmw.proxy.metrics import Metrics

__all__ = ["StateBudget", "StateUnavailable", "after_answer", "before_upstream", "http_error"]

logger = logging.getLogger("ctxmw")
T = TypeVar("T")


class StateUnavailable(Exception):
    """The shared state did not answer in time, or failed, before the upstream call."""


class StateBudget:
    """One request's time for the shared state: ``seconds`` in all, spent by its waits.

    Args:
        seconds: the budget (the config's ``state_timeout``).
    """

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` within what is left of the budget, and spend the time it took.

        Raises:
            TimeoutError: the budget ran out (before ``work`` started, or while it ran).
        """
        if self.left <= 0:
            raise TimeoutError("this request's time for the shared state is spent")
        start = anyio.current_time()
        try:
            with anyio.fail_after(self.left):
                return await work()
        finally:
            self.left -= anyio.current_time() - start


async def before_upstream(work: Callable[[], Awaitable[T]], budget: StateBudget) -> T:
    """Run ``work`` on the shared state within the request's budget.

    Raises:
        StateUnavailable: it failed or took longer (the original chained).
    """
    try:
        return await budget.run(work)
    except Exception as exc:
        # The type only: an error's text may quote what was sent.
        raise StateUnavailable(type(exc).__name__) from exc


async def after_answer(
    stage: str,
    work: Callable[[], Awaitable[object]],
    limit: StateBudget | float | None,
    metrics: Metrics,
) -> bool:
    """Run one stage after the answer, within the request's budget (or ``limit`` seconds;
    ``None``: the stage bounds its own waits); a failure is logged and counted, never raised.

    Returns:
        Whether the stage completed.
    """
    try:
        if isinstance(limit, StateBudget):
            await limit.run(work)
        else:
            with anyio.fail_after(limit):
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


def http_error(status: int, message: str) -> Exception:
    """The proxy's answer to a refused request: FastAPI's ``HTTPException`` with ``message``."""
    try:
        from fastapi import HTTPException
    except ImportError:  # pragma: no cover - outside the proxy
        return CtxmwError(message)
    return HTTPException(status_code=status, detail={"error": message})
