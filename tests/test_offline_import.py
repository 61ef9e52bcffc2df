"""Importing ctxmw keeps litellm offline and quiet (runtime spec section 5)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import socket, sys
attempts = []
def refuse(self, address, *args):
    attempts.append(address)
    raise OSError("network disabled in this test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.getaddrinfo = lambda *a, **k: attempts.append(a) or (_ for _ in ()).throw(OSError("no dns"))
import ctxmw
assert "litellm" not in sys.modules, "import ctxmw must not import litellm"
{after}
assert not attempts, attempts
"""


def _run(after: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}  # no LITELLM_* from the outside
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(after=after)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_import_ctxmw_is_silent_and_does_not_load_litellm() -> None:
    done = _run("")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""


def test_loading_litellm_through_ctxmw_makes_no_network_attempt_and_prints_nothing() -> None:
    after = """
import os
from ctxmw._litellm import load_litellm
litellm = load_litellm()
assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
assert litellm.suppress_debug_info is True
from ctxmw.testing import text
text("hello")
"""
    done = _run(after)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""
