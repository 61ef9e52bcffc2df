"""The inbox over HTTP: the proxy's ``/ctxmw/inbox`` routes, behind its own key check.

- ``POST /ctxmw/inbox/{conversation}`` with ``{"text": "..."}``: a note, shown to the model as
  a user message at the end of the conversation's next prompt, once, by whichever replica
  serves it.
- ``POST /ctxmw/abort/{conversation}`` with ``{"reason": "..."}``: the conversation's next
  request is answered with HTTP 400 and the reason.
- ``GET /ctxmw/inbox/{conversation}``: the notes not yet delivered.

``{conversation}`` is a conversation of the caller's own scope, named by the id its client
sends (``litellm_session_id``); the proxy admin (the master key, or a key with the
``proxy_admin`` role) may also name any tenant's conversation by its scoped id, as the ledger's
``session`` field shows it (``team:<team_id>/<session id>``; see
:mod:`ctxmw.proxy.tenancy`). Ids may hold ``/``; they are stripped and shortened exactly as the
conversation's own id is, and the answer names the conversation the note went to. A 200 means
the note is stored in the shared state (the acknowledgement); an id that can never be
delivered to is answered 400 with the reason.

Notes are bounded (the config's ``limits``, :mod:`ctxmw.proxy._limits`): a note longer than
``note_bytes`` or an abort reason longer than ``abort_reason_bytes`` is answered 413; a note that
would take the conversation past ``conversation_notes`` or ``conversation_note_bytes`` waiting,
or its scope (the team, user or key) past ``scope_note_bytes``, 429. Each answer names the
limit; nothing is stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxmw.errors import NotesFull, UsageError
from ctxmw.proxy.tenancy import inbox_target
from ctxmw.state import Note, NoteBounds

if TYPE_CHECKING:
    from ctxmw.proxy.callback import CtxmwProxyHook

__all__ = ["install_routes"]


def install_routes(app: Any, hook: CtxmwProxyHook) -> None:
    """Add the inbox routes to the proxy's FastAPI ``app``, ahead of its catch-all routes."""
    from fastapi import APIRouter, Body, Depends
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    router = APIRouter(tags=["ctxmw"])

    @router.post("/ctxmw/inbox/{conversation:path}")
    async def post_note(
        conversation: str,
        body: dict[str, Any] = Body(...),  # noqa: B008 - FastAPI's idiom
        auth: Any = Depends(user_api_key_auth),  # noqa: B008
    ) -> dict[str, Any]:
        target = _target(conversation, auth)
        text = _text(body, "text", hook.config.limits.note_bytes, "note_bytes")
        note = await _push(hook, target, "note", text)
        return {"conversation": target, "seq": note.seq, "kind": note.kind}

    @router.post("/ctxmw/abort/{conversation:path}")
    async def post_abort(
        conversation: str,
        body: dict[str, Any] = Body(default={}),  # noqa: B008
        auth: Any = Depends(user_api_key_auth),  # noqa: B008
    ) -> dict[str, Any]:
        target = _target(conversation, auth)
        limit = hook.config.limits.abort_reason_bytes
        reason = _text(body, "reason", limit, "abort_reason_bytes", blank=True)
        note = await _push(hook, target, "abort", reason)
        return {"conversation": target, "seq": note.seq, "kind": note.kind}

    @router.get("/ctxmw/inbox/{conversation:path}")
    async def list_notes(
        conversation: str,
        auth: Any = Depends(user_api_key_auth),  # noqa: B008
    ) -> dict[str, Any]:
        target = _target(conversation, auth)
        notes = await hook.state.pending_notes(target)
        return {
            "conversation": target,
            "pending": [{"seq": n.seq, "kind": n.kind, "text": n.text} for n in notes],
        }

    before = len(app.router.routes)
    app.include_router(router)
    added = app.router.routes[before:]
    del app.router.routes[before:]
    app.router.routes[0:0] = added


def _target(conversation: str, auth: Any) -> str:
    from fastapi import HTTPException

    try:
        return inbox_target(conversation, auth)
    except UsageError as exc:
        raise HTTPException(400, {"error": str(exc)}) from exc


async def _push(hook: CtxmwProxyHook, target: str, kind: str, text: str) -> Note:
    from fastapi import HTTPException

    limits = hook.config.limits
    bounds = NoteBounds(
        limits.conversation_notes,
        limits.conversation_note_bytes,
        target.partition("/")[0],  # the scope: team:<id>, user:<id>, key:<digest>, open:
        limits.scope_note_bytes,
    )
    try:
        return await hook.state.push_note(target, kind, text, bounds)
    except NotesFull as exc:
        raise HTTPException(429, {"error": str(exc), "limit": exc.limit}) from exc


def _text(body: Any, field: str, limit: int, name: str, *, blank: bool = False) -> str:
    from fastapi import HTTPException

    value = body.get(field, "" if blank else None) if isinstance(body, dict) else None
    if not isinstance(value, str) or not (blank or value.strip()) or not _encodes(value):
        raise HTTPException(
            400,
            {
                "error": f"{field!r} must be a{'' if blank else ' non-empty'} string of text, got "
                f"{value!r:.80}; send {{{field!r}: 'your text'}}."
            },
        )
    size = len(value.encode())
    if size > limit:
        raise HTTPException(
            413,
            {
                "error": f"{field!r} is {size} bytes, over the {name} limit of {limit} bytes; "
                "send a shorter text (the operator sets ctxmw.limits).",
                "limit": name,
            },
        )
    return value


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate, from a JSON \ud800 escape
        return False
    return True
