"""The proxy's routes as the strategies see them: every request's conversation in chat form.

The strategies work on OpenAI chat messages. A chat request (``/v1/chat/completions``) already
is one; an Anthropic Messages request (``/v1/messages``, call type ``anthropic_messages``) and
an OpenAI Responses request (``/v1/responses``, ``aresponses``) are translated to chat messages
for the strategies, and their output translated back into the route's own format
(:mod:`ctxmw.proxy._anthropic`, :mod:`ctxmw.proxy._responses`). The translation is exact where
the strategies changed nothing: a message they kept as it was goes upstream as the client sent
it, byte for byte, so the prompt prefix a provider cached stays the same.

In LiteLLM 1.110 the proxy calls the same hooks for all three routes: ``async_pre_call_hook``
with the request as the client sent it (``messages`` and ``system``; ``input`` and
``instructions``), ``async_pre_call_deployment_hook`` with the deployment's kwargs, whose
returned kwargs are sent, and the post-call hooks with the route's own response (a dict in
Anthropic's format; a ``ResponsesAPIResponse``) or stream (Anthropic's server-sent events as
bytes; Responses event objects).

When the deployment does not speak the route's API, LiteLLM translates the request and calls
the deployment hook a second time, for its own call in the other format, with the same
logging object and call id: ``/v1/responses`` in front of ``anthropic/`` (or any chat-only
deployment) makes an ``acompletion`` call; ``/v1/messages`` in front of ``openai/`` makes an
``aresponses`` call (or an ``acompletion`` with ``use_chat_completions_url_for_anthropic_messages``,
and in front of any other chat-only deployment). That second call already carries what the
first one returned, translated: :func:`route_of` tells the two apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ctxmw.proxy._anthropic import anthropic_translation
from ctxmw.proxy._request import checked_messages
from ctxmw.proxy._responses import responses_translation
from ctxmw.types import Messages

__all__ = ["ChatTranslation", "Translation", "route_of", "translation_of"]

_ROUTES = {
    "completion": "chat",
    "acompletion": "chat",
    "anthropic_messages": "anthropic",
    "aanthropic_messages": "anthropic",
    "responses": "responses",
    "aresponses": "responses",
}


class Translation(Protocol):
    """One request's conversation in chat form, and the way back to its route."""

    @property
    def messages(self) -> Messages:
        """The conversation as chat messages (what the strategies get)."""
        ...

    def request(self, kwargs: Mapping[str, Any], prompt: Messages) -> dict[str, Any]:
        """The deployment's kwargs with the strategies' ``prompt`` in the route's format."""
        ...

    def side_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The deployment's kwargs a strategy's own chat call (a summary) may reuse."""
        ...

    def telemetry(self, response: object) -> object:
        """The route's response (or a stream's chunks) as telemetry reads a chat response."""
        ...


@dataclass(frozen=True, slots=True)
class ChatTranslation:
    """A chat request: nothing to translate."""

    messages: Messages

    def request(self, kwargs: Mapping[str, Any], prompt: Messages) -> dict[str, Any]:
        return {**kwargs, "messages": prompt}

    def side_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return dict(kwargs)

    def telemetry(self, response: object) -> object:
        return response


def route_of(call_type: str) -> str | None:
    """The route a call type belongs to (``chat``, ``anthropic``, ``responses``), or None."""
    return _ROUTES.get(call_type)


def translation_of(data: Mapping[str, Any], call_type: str) -> Translation | None:
    """The request's translation, or None when ctxmw leaves the request alone (another
    call type, no conversation, or a Responses request continuing a ``previous_response_id``
    chain, whose history lives with the provider).

    Raises:
        UsageError: the conversation is malformed (the proxy answers HTTP 400).
    """
    route = route_of(call_type)
    if route == "chat":
        messages = data.get("messages")
        return ChatTranslation(checked_messages(messages)) if isinstance(messages, list) else None
    if route == "anthropic":
        return anthropic_translation(data)
    if route == "responses":
        return responses_translation(data)
    return None
