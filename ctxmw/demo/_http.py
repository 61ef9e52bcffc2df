"""The loopback HTTP/1.1 server under the demo's and the frameworks' scripted providers.

One request at a time per connection (keep-alive unless the client or the answer closes it);
the provider answers each request synchronously with the raw response bytes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import Listener, SocketAttribute, SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["Answer", "json_response", "serve"]

Answer = Callable[[list[str], bytes], tuple[bytes, bool]]
"""A provider's answer to ``([method, path], body)``: the HTTP response, whether to keep alive."""

_LINE = 65536


async def serve(task_group: TaskGroup, answer: Answer) -> str:
    """Listen on a free loopback port until the task group is cancelled; returns the base URL
    (``http://127.0.0.1:PORT/v1``)."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    task_group.start_soon(_serve, listener, answer)
    return f"http://127.0.0.1:{listener.extra(SocketAttribute.local_port)}/v1"


def json_response(status: str, payload: dict[str, Any]) -> bytes:
    """An HTTP response carrying ``payload`` as JSON (``status`` like ``"200 OK"``)."""
    data = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
    return (head + f"Content-Length: {len(data)}\r\n\r\n").encode() + data


async def _serve(listener: Listener[SocketStream], answer: Answer) -> None:
    async with listener:  # closed when the task group is cancelled
        await listener.serve(functools.partial(_connection, answer=answer))


async def _connection(stream: SocketStream, answer: Answer) -> None:
    reader = BufferedByteReceiveStream(stream)
    async with stream:
        try:
            while await _exchange(reader, stream, answer):
                pass
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            return


async def _exchange(
    reader: BufferedByteReceiveStream, stream: SocketStream, answer: Answer
) -> bool:
    request_line = (await reader.receive_until(b"\r\n", _LINE)).decode("latin-1")
    headers = {}
    while line := (await reader.receive_until(b"\r\n", _LINE)).decode("latin-1"):
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    body = await reader.receive_exactly(int(headers.get("content-length", "0")))
    data, keep = answer(request_line.split(" ")[:2], body)
    await stream.send(data)
    return keep and headers.get("connection", "").lower() != "close"
