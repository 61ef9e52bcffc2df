"""Importing ctxmw keeps litellm offline and quiet (runtime spec section 5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow
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


# What litellm does when it is imported before ctxmw: ctxmw cannot undo it, only say so.
LOOPBACK_PROBE = """
import ipaddress, socket, sys
attempts = []
def loopback(host):
    if not isinstance(host, str) or host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False
real_connect, real_lookup = socket.socket.connect, socket.getaddrinfo
def connect(self, address, *args):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address[0]):
        attempts.append(address)
        raise OSError("network disabled in this test")
    return real_connect(self, address, *args)
def lookup(host, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and not loopback(name):
        attempts.append(name)
        raise OSError("no dns")
    return real_lookup(host, *args, **kwargs)
socket.socket.connect, socket.getaddrinfo = connect, lookup
{code}
print("ATTEMPTS", len(attempts), sorted(set(map(str, attempts)))[:3])
"""


def _probe(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", LOOPBACK_PROBE.format(code=code)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


@pytest.mark.slow
def test_litellm_imported_before_ctxmw_fetches_its_price_table_unless_told_not_to() -> None:
    """The limit docs/telemetry.md states: litellm reads LITELLM_LOCAL_MODEL_COST_MAP when it is
    imported, so a program that imports litellm first must set it in its environment."""
    first = "import litellm\nimport ctxmw"
    assert not _probe(first).startswith("ATTEMPTS 0 ")
    assert _probe(first, LITELLM_LOCAL_MODEL_COST_MAP="True").startswith("ATTEMPTS 0 ")


@pytest.mark.slow
def test_the_cli_and_the_demo_never_fetch_anything(tmp_path: Path) -> None:
    out = str(tmp_path / "demo")
    code = f"""
from pathlib import Path
from ctxmw.cli import main
assert main(["demo", "--calls", "6", "--out", {out!r}]) == 0
assert main(["stats", "--check", *map(str, Path({out!r}).glob("*.ledger.jsonl"))]) == 0
assert main(["strategies"]) == 0
"""
    assert _probe(code, XDG_STATE_HOME=str(tmp_path / "state")).startswith("ATTEMPTS 0 ")
