"""Whose conversation a proxy request continues: every identity is scoped by the key's owner.

A proxy serves many keys, users and teams. Everything ctxmw keeps for a conversation (its
inbox, its memo, its telemetry state, its keys in Redis, its ledger lines) is kept under a
**scoped id**: the owner of the request's authenticated key, then the conversation's id
inside that scope::

    team:<team_id>/<id>        the key belongs to a team
    user:<user_id>/<id>        else, the key belongs to a user
    key:<digest>/<id>          else, a digest of the key (never the key itself)
    open:/<id>                 a proxy that authenticates nobody

``<id>`` is what :func:`~ctxmw.runtime.identity.conversation_identity` finds: the client's
session id (``litellm_session_id``, the ``x-litellm-session-id`` header, ``metadata.session_id``)
or a digest of the conversation's head. A client therefore only ever names a conversation of
its own scope: two tenants that send the same session id, or open with the same words, have
two conversations. Team and user ids are percent-encoded in the scope (``/`` never appears in
it), so the first ``/`` of a scoped id always ends its scope.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ctxmw.errors import UsageError
from ctxmw.runtime.identity import Identity, conversation_identity, normal_id

__all__ = [
    "SCOPE_KINDS",
    "inbox_target",
    "is_admin",
    "scope_of",
    "scoped_identity",
    "tenant_overrides",
]

SCOPE_KINDS = ("team", "user", "key", "open")
_SOURCES = {
    "session_id": "The session id (litellm_session_id, or the x-litellm-session-id header)",
    "metadata": "The session id in metadata.session_id",
}


def scope_of(key: Any) -> str:
    """The scope of a request's authenticated key (litellm's ``UserAPIKeyAuth``)."""
    for kind, attribute in (("team", "team_id"), ("user", "user_id")):
        value = getattr(key, attribute, None)
        if isinstance(value, str) and value.strip():
            return f"{kind}:{quote(value.strip(), safe='')}"
    token = getattr(key, "token", None) or getattr(key, "api_key", None)
    if isinstance(token, str) and token:
        return "key:" + hashlib.blake2b(token.encode(), digest_size=12).hexdigest()
    return "open:"


def scoped_identity(data: Mapping[str, Any], key: Any) -> Identity:
    """The conversation of one request, inside its key's scope.

    Only litellm's own ids and the head count here: a ``save_file`` or ``session`` in the
    request (top-level or in ``metadata.ctxmw``) names nothing in a proxy.

    Raises:
        UsageError: the id is not Unicode text (a lone surrogate from a ``\\ud800`` escape).
    """
    identity = conversation_identity(data, options=False)
    _unicode(identity.conversation, _SOURCES.get(identity.source, "The session id"))
    return Identity(f"{scope_of(key)}/{identity.conversation}", identity.source)


def _unicode(conversation: str, where: str) -> None:
    try:
        conversation.encode()
    except UnicodeEncodeError:
        raise UsageError(
            f"{where} {conversation!r} is not valid Unicode text (it holds a lone surrogate, "
            "as a JSON escape such as \\ud800 without its pair makes); send the id as plain "
            "text."
        ) from None


def is_admin(key: Any) -> bool:
    """Whether the key is the proxy admin's (the master key, or the ``proxy_admin`` role)."""
    role = getattr(key, "user_role", None)
    return str(getattr(role, "value", role)) == "proxy_admin"


def inbox_target(path: str, key: Any) -> str:
    """The scoped conversation an inbox route's path names for this caller.

    The proxy admin names any conversation by its scoped id (as the ledger's ``session`` field
    shows it); any caller, the admin included, names one of its own scope by its bare id.

    Raises:
        UsageError: the id is blank once stripped.
    """
    if is_admin(key) and _is_scoped(path):
        scope, _, conversation = path.partition("/")
        return f"{scope}/{_checked(conversation, path)}"
    return f"{scope_of(key)}/{_checked(path, path)}"


def _is_scoped(path: str) -> bool:
    scope, slash, _ = path.partition("/")
    kind, colon, _ = scope.partition(":")
    return bool(slash and colon) and kind in SCOPE_KINDS


def _checked(conversation: str, path: str) -> str:
    _unicode(conversation, "The conversation id")
    normal = normal_id(conversation)
    if not normal:
        raise UsageError(
            f"The conversation id {path!r} is blank; name a conversation by its session id "
            "(the client's litellm_session_id) or, as the proxy admin, by its scoped id "
            "('team:<team_id>/<session id>', as the ledger's session field shows it)."
        )
    return normal


def tenant_overrides(
    allowed: Sequence[str],
    entries: Sequence[tuple[str, object]],
    chain: Sequence[str],
) -> dict[str, Any]:
    """The setting overrides a tenant sent, once the operator's rules allow them.

    Args:
        allowed: the setting names the operator lets a tenant set (``request_options``).
        entries: ``(where, mapping)`` in order of precedence, lowest first (the key's
            ``metadata.ctxmw``, then the request's).
        chain: the strategy names the operator's settings run for this request.

    Raises:
        UsageError: an entry is not a mapping, sets a name the operator does not allow, or
            names strategies outside the operator's list (or drops ``inbox`` from it).
    """
    merged: dict[str, Any] = {}
    for where, given in entries:
        if given is None:
            continue
        if not isinstance(given, Mapping):
            raise UsageError(
                f"{where} must be a mapping of ctxmw setting names to values, got {given!r:.80}."
            )
        for name, value in given.items():
            _allowed(str(name), where, allowed)
            merged[str(name)] = value
    if "prompt_strategies" in merged:
        _narrowed(merged["prompt_strategies"], chain)
    return merged


def _allowed(name: str, where: str, allowed: Sequence[str]) -> None:
    if name in allowed:
        return
    what = f"it allows {list(allowed)!r}" if allowed else "it allows none"
    raise UsageError(
        f"{where} sets {name!r}, which this proxy does not let a tenant set ({what}). Remove it "
        "from metadata.ctxmw, or ask the proxy's operator to list it in ctxmw.request_options."
    )


def _narrowed(spec: object, chain: Sequence[str]) -> None:
    if isinstance(spec, str):
        names = [part.strip() for part in spec.split(",")]
    elif isinstance(spec, list) and all(isinstance(part, str) for part in spec):
        names = [part.strip() for part in spec]
    else:
        raise UsageError(
            f"prompt_strategies={spec!r:.80} from a tenant must be a comma-separated string or a "
            f"list of names among {list(chain)!r}."
        )
    names = [name for name in names if name not in ("", "none")]
    most = len(set(chain))
    if len(names) > most:
        raise UsageError(
            f"prompt_strategies from a tenant lists {len(names)} strategies; it may list at most "
            f"{most}, the operator's strategies {list(chain)!r}, each once."
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(
            f"prompt_strategies={spec!r:.80} from a tenant lists {repeated!r} more than once; "
            "list each strategy at most once."
        )
    outside = [name for name in names if name not in chain]
    if outside:
        raise UsageError(
            f"prompt_strategies from a tenant may only choose among the operator's strategies "
            f"{list(chain)!r}; {outside!r} is not among them."
        )
    if "inbox" in chain and "inbox" not in names:
        raise UsageError(
            f"prompt_strategies={spec!r:.80} from a tenant drops 'inbox', which the operator runs: "
            "the operator's notes and abort switch reach a conversation through it. Keep 'inbox'."
        )
