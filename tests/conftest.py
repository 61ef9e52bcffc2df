"""Shared fixtures: the anyio backend is pinned to asyncio (litellm is asyncio-only)."""

from __future__ import annotations

import pytest

# ctxmw first: it keeps litellm offline (no remote cost-map fetch) before any test imports it.
import ctxmw  # noqa: F401


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
