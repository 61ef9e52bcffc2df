"""A full disk, simulated: every ``fsync`` fails with ``ENOSPC`` until the switch is cleared."""

from __future__ import annotations

import errno
import os

import pytest


def full_disk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every fsync fail as on a full disk; returns a switch (clear it to heal the disk)."""
    real, broken = os.fsync, [1]

    def fsync(fd: int) -> None:
        if broken:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return broken
