"""Shared fixtures: the anyio backend is pinned to asyncio (litellm is asyncio-only)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
