"""One identity function for the stateless wrapper and the proxy (issue 13)."""

from __future__ import annotations

from pathlib import Path

from ctxmw.proxy import conversation_identity as proxy_identity
from ctxmw.runtime.identity import MAX_ID, Identity, conversation_identity, normal_id

HEAD = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_the_proxy_exports_the_same_function() -> None:
    assert proxy_identity is conversation_identity


def test_save_file_and_session_come_before_litellms_ids_and_name_their_source() -> None:
    data = {"litellm_session_id": "l", "messages": HEAD}
    assert conversation_identity({**data, "save_file": Path("a b.jsonl")}) == Identity(
        "a b.jsonl", "save_file"
    )
    assert conversation_identity({**data, "session": " s "}) == Identity("s", "session")
    assert conversation_identity(data) == Identity("l", "session_id")


def test_a_path_is_kept_exactly_and_ids_are_cleaned() -> None:
    long_path = " " + "d/" * 150 + "x.jsonl"
    assert conversation_identity({"save_file": long_path}).conversation == long_path
    assert conversation_identity({"litellm_session_id": 42}) == Identity("42", "session_id")
    assert conversation_identity({"litellm_session_id": True, "messages": HEAD}).source == "head"


def test_two_long_ids_stay_two_conversations() -> None:
    first, second = "x" * 300, "x" * 299 + "y"
    ids = [conversation_identity({"litellm_session_id": i}).conversation for i in (first, second)]
    assert ids[0] != ids[1]
    assert all(len(i) <= MAX_ID and i.startswith("x" * 150) for i in ids)
    assert conversation_identity({"litellm_session_id": f"  {first} "}).conversation == ids[0]
    assert normal_id("x" * MAX_ID) == "x" * MAX_ID


def test_without_an_id_the_wrapper_gets_none_and_the_proxy_the_head() -> None:
    assert conversation_identity({"messages": HEAD}, head=False) is None
    assert conversation_identity({"messages": HEAD}).source == "head"
