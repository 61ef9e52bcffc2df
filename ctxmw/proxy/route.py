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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxmw.errors import UsageError
from ctxmw.proxy.tenancy import inbox_target

if TYPE_CHECKING:
    from ctxmw.proxy.callback import CtxmwProxyHook

__all__ = ["install_routes"]

_MAX_TEXT = 1_048_576


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
        note = await hook.state.push_note(target, "note", _text(body, "text"))
        return {"conversation": target, "seq": note.seq, "kind": note.kind}

    @router.post("/ctxmw/abort/{conversation:path}")
    async def post_abort(
        conversation: str,
        body: dict[str, Any] = Body(default={}),  # noqa: B008
        auth: Any = Depends(user_api_key_auth),  # noqa: B008
    ) -> dict[str, Any]:
        target = _target(conversation, auth)
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        note = await hook.state.push_note(target, "abort", str(reason))
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


def _text(body: Any, field: str) -> str:
    from fastapi import HTTPException

    value = body.get(field) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip() or len(value.encode()) > _MAX_TEXT:
        raise HTTPException(
            400,
            {
                "error": f"{field!r} must be a non-empty string of at most {_MAX_TEXT} bytes, "
                f"got {value!r:.80}; send {{{field!r}: 'your note'}}."
            },
        )
    return value
