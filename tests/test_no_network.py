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


def test_every_lookup_door_is_guarded() -> None:
    for lookup in (socket.gethostbyname, socket.gethostbyname_ex):
        with pytest.raises(OSError, match="must not use the network"):
            lookup("api.anthropic.com")


def test_connect_ex_off_the_machine_is_refused() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="must not use the network"):
        sock.connect_ex(("8.8.8.8", 53))


def test_datagrams_off_the_machine_are_refused() -> None:
    datagram = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with datagram as sock, pytest.raises(OSError, match="must not use the network"):
        sock.sendto(b"x", ("8.8.8.8", 53))


def test_loopback_stays_open() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())
        with socket.socket() as client:
            assert client.connect_ex(server.getsockname()) == 0


def test_loopback_datagrams_and_lookups_stay_open() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            assert sender.sendto(b"x", receiver.getsockname()) == 1
    assert socket.gethostbyname("localhost")
