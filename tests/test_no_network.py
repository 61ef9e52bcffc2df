"""The suite's network guard (tests/conftest.py): loopback only, anything else refused."""

from __future__ import annotations

import socket

import pytest


def test_lookups_of_real_hosts_are_refused() -> None:
    with pytest.raises(OSError, match="must not use the network"):
        socket.getaddrinfo("api.openai.com", 443)


def test_connections_off_the_machine_are_refused() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="must not use the network"):
        sock.connect(("8.8.8.8", 53))


def test_loopback_stays_open() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())
