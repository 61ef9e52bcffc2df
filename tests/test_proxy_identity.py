"""Which conversation a proxy request continues."""

from __future__ import annotations

from ctxmw.proxy import conversation_identity
from ctxmw.runtime.identity import head_digest

HEAD = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_the_session_id_comes_first() -> None:
    data = {"litellm_session_id": "s1", "metadata": {"session_id": "m1"}, "messages": HEAD}
    identity = conversation_identity(data)
    assert (identity.conversation, identity.source) == ("s1", "session_id")


def test_then_metadata_session_id() -> None:
    identity = conversation_identity({"metadata": {"session_id": "m1"}, "messages": HEAD})
    assert (identity.conversation, identity.source) == ("m1", "metadata")


def test_else_the_stable_head_whatever_follows() -> None:
    later = [*HEAD, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "More"}]
    first = conversation_identity({"messages": HEAD})
    assert first.source == "head"
    assert conversation_identity({"messages": later}) == first
    other = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Bye"}]
    assert conversation_identity({"messages": other}) != first


def test_the_head_ignores_key_order_of_nothing_but_is_exact_on_content() -> None:
    assert head_digest(HEAD) == head_digest([dict(m) for m in HEAD])
    assert head_digest(HEAD) != head_digest([HEAD[1]])


def test_blank_ids_fall_through() -> None:
    identity = conversation_identity({"litellm_session_id": "  ", "messages": HEAD})
    assert identity.source == "head"
