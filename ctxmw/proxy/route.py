"""The inbox over HTTP: the proxy's ``/ctxmw/inbox`` routes, behind its own key check.

- ``POST /ctxmw/inbox/{conversation}`` with ``{"text": "..."}``: a note, shown to the model as
  a user message at the end of the conversation's next prompt, once, by whichever replica
  serves it.
- ``POST /ctxmw/abort/{conversation}`` with ``{"reason": "..."}``: the conversation's next
  request is answered with HTTP 400 and the reason.
- ``GET /ctxmw/inbox/{conversation}``: the notes not yet delivered.

A 200 means the note is stored in the shared state (the acknowledgement). Only the proxy's
admin (the master key, or a key with the ``proxy_admin`` role) may use these routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxmw.proxy.callback import CtxmwProxyHook

__all__ = ["install_routes"]

_MAX_TEXT = 1_048_576


def install_routes(app: Any, hook: CtxmwProxyHook) -> None:
    """Add the inbox routes to the proxy's FastAPI ``app``, ahead of its catch-all routes."""
    from fastapi import APIRouter, Body, Depends, HTTPException
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    router = APIRouter(tags=["ctxmw"])

    def admin(auth: Any = Depends(user_api_key_auth)) -> Any:  # noqa: B008 - FastAPI's idiom
        role = str(getattr(getattr(auth, "user_role", None), "value", ""))
        if role != "proxy_admin":
            raise HTTPException(
                403, {"error": f"ctxmw inbox routes need the proxy admin's key, not role {role!r}."}
            )
        return auth

    @router.post("/ctxmw/inbox/{conversation}")
    async def post_note(
        conversation: str,
        body: dict[str, Any] = Body(...),  # noqa: B008 - FastAPI's idiom
        _: Any = Depends(admin),  # noqa: B008
    ) -> dict[str, Any]:
        note = await hook.state.push_note(conversation, "note", _text(body, "text"))
        return {"conversation": conversation, "seq": note.seq, "kind": note.kind}

    @router.post("/ctxmw/abort/{conversation}")
    async def post_abort(
        conversation: str,
        body: dict[str, Any] = Body(default={}),  # noqa: B008
        _: Any = Depends(admin),  # noqa: B008
    ) -> dict[str, Any]:
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        note = await hook.state.push_note(conversation, "abort", str(reason))
        return {"conversation": conversation, "seq": note.seq, "kind": note.kind}

    @router.get("/ctxmw/inbox/{conversation}")
    async def list_notes(conversation: str, _: Any = Depends(admin)) -> dict[str, Any]:  # noqa: B008
        notes = await hook.state.pending_notes(conversation)
        return {
            "conversation": conversation,
            "pending": [{"seq": n.seq, "kind": n.kind, "text": n.text} for n in notes],
        }

    before = len(app.router.routes)
    app.include_router(router)
    added = app.router.routes[before:]
    del app.router.routes[before:]
    app.router.routes[0:0] = added


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
