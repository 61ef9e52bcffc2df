"""Stateless calls without an id: their conversation found by head, thread and process."""

from __future__ import annotations

from typing import Any

from ctxmw.runtime._heads import HeadThreads, process_tag

HEAD: list[dict[str, Any]] = [
    {"role": "system", "content": "You review code."},
    {"role": "user", "content": "Review wrapper.py"},
]


def grown(history: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    return [*history, {"role": "assistant", "content": tag}, {"role": "user", "content": "go"}]


def free(session: str) -> bool:
    return False


def test_a_call_that_extends_the_previous_one_continues_its_session() -> None:
    heads = HeadThreads()
    first = heads.session_for(HEAD, free)
    assert first.startswith("head-")
    assert first.endswith(f"@{process_tag()}")
    assert heads.session_for(grown(HEAD, "a"), free) == first
    assert heads.session_for(grown(grown(HEAD, "a"), "b"), free) == first


def test_another_conversation_with_the_same_head_is_another_session() -> None:
    heads = HeadThreads()
    one = heads.session_for(grown(HEAD, "a"), free)
    two = heads.session_for(grown(HEAD, "b"), free)  # same head and last message, not the same
    assert two == f"{one}-2"
    assert heads.session_for(grown(grown(HEAD, "a"), "c"), free) == one
    assert heads.session_for(grown(grown(HEAD, "b"), "d"), free) == two


def test_a_session_in_use_is_never_given_to_another_call() -> None:
    heads = HeadThreads()
    one = heads.session_for(HEAD, free)
    assert heads.session_for(grown(HEAD, "a"), lambda s: s == one) == f"{one}-2"


def test_threads_and_heads_are_bounded() -> None:
    heads = HeadThreads(max_heads=2, max_threads=2)
    sessions = [heads.session_for(grown(HEAD, str(n)), free) for n in range(3)]
    assert sessions[2].endswith("-3")
    assert len(heads._heads[next(iter(heads._heads))]) == 2  # the oldest thread went
    for n in range(3):
        heads.session_for([{"role": "user", "content": f"other {n}"}], free)
    assert len(heads._heads) == 2
