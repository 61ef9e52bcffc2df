"""Shared fixtures: asyncio as the anyio backend, and no CTXMW_* variables leaking in."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

# ctxmw first: it keeps litellm offline (no remote cost-map fetch) before any test imports it.
import ctxmw  # noqa: F401
from ctxmw.settings import Settings
from ctxmw.types import Messages, StrategyContext


@pytest.fixture
def anyio_backend() -> str:
    # litellm is asyncio-only.
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own CTXMW_* variables must not change what the tests see."""
    for key in list(os.environ):
        if key.startswith("CTXMW_"):
            monkeypatch.delenv(key)


@pytest.fixture
def run() -> Callable[..., Messages]:
    """Apply a synchronous strategy with default (or overridden) settings."""

    def apply(strategy: Callable[..., Any], messages: Messages, **overrides: Any) -> Messages:
        ctx = StrategyContext(settings=Settings(**overrides))
        out = strategy(messages, ctx)
        assert isinstance(out, list)
        return out

    return apply
