"""What the framework tests share: the scripted provider on loopback, and a spy on litellm.

``calls_through(...)`` patches litellm with ctxmw and records, above ctxmw, the messages the
framework passed to ``litellm.acompletion``; the scripted provider records, below it, what the
model received. With strategy ``none`` the two must agree call by call.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import litellm

import ctxmw
from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.messages.normal import normal_message
from ctxmw.runtime.transcript import TranscriptFile
from tests._lock import lock_is_free

MODEL = "openai/scripted"


@contextlib.asynccontextmanager
async def scripted_provider(
    server: ScriptedProvider | None = None,
) -> AsyncIterator[tuple[ScriptedProvider, str]]:
    """The scripted OpenAI-compatible server and its base URL, for the block's duration."""
    server = server if server is not None else ScriptedProvider()
    async with anyio.create_task_group() as tg:
        base = await server.serve(tg)
        yield server, base
        tg.cancel_scope.cancel()


@contextlib.contextmanager
def scripted_provider_thread(
    server: ScriptedProvider | None = None,
) -> Iterator[tuple[ScriptedProvider, str]]:
    """The scripted server on an event loop of its own thread: for synchronous agents, whose
    calls block the thread (and the loop) they are made in."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(scripted_provider(server)) as served,
    ):
        yield served


@contextlib.contextmanager
def calls_through(**defaults: Any) -> Iterator[list[list[Any]]]:
    """Patch litellm with ctxmw (``defaults`` as its options); yields the framework's prompts,
    given to ``litellm.acompletion`` or ``litellm.completion``."""
    passed: list[list[Any]] = []
    with ctxmw.patch_litellm(**defaults), contextlib.ExitStack() as stack:
        for name in ("acompletion", "completion"):
            stack.enter_context(_spying(name, passed))
        yield passed


@contextlib.contextmanager
def _spying(name: str, passed: list[list[Any]]) -> Iterator[None]:
    """Record the messages of every call of litellm's patched ``name``."""
    patched = getattr(litellm, name)

    def record(kwargs: dict[str, Any]) -> None:
        passed.append(list(kwargs.get("messages") or []))

    if name == "acompletion":

        async def spy(*args: Any, **kwargs: Any) -> Any:
            record(kwargs)
            return await patched(*args, **kwargs)

    else:

        def spy(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            record(kwargs)
            return patched(*args, **kwargs)

    holders = [m for m in list(sys.modules.values()) if _holds(m, name, patched)]
    for module in holders:  # litellm, and frameworks that copied its function
        setattr(module, name, spy)
    try:
        yield
    finally:
        # A framework that imported litellm lazily may have copied the spy: hand it back
        # the patched function, which the patch's undo then restores.
        for module in list(sys.modules.values()):
            if getattr(module, name, None) is spy:
                setattr(module, name, patched)


def _holds(module: Any, name: str, fn: Any) -> bool:
    try:
        return bool(getattr(module, name, None) == fn)
    except Exception:  # a module whose attribute access misbehaves
        return False


def normal(messages: list[Any]) -> list[dict[str, Any]]:
    return [normal_message(m) for m in messages]


def assert_model_got_the_callers_messages(
    server: ScriptedProvider, passed: list[list[Any]]
) -> None:
    """Call by call: the provider received what the framework passed, and it validates."""
    assert len(server.requests) == len(passed)
    for got, given in zip(server.prompts, passed, strict=True):
        assert normal(got) == normal(given)
    assert all(problems == [] for problems in server.problems)


async def assert_one_transcript_that_replays(
    save_file: Path, last_prompt: list[Any], *, open_calls: bool = False
) -> None:
    """One save_file beside its ledger (and its lock, free); its current revision is the last
    prompt plus the answer (with ``open_calls``, an answer whose tool calls the agent, stopped
    by its step limit, never ran)."""
    names = sorted(p.name for p in save_file.parent.iterdir() if p.name.startswith(save_file.stem))
    assert names == [save_file.name, f"{save_file.name}.ledger.jsonl", f"{save_file.name}.lock"]
    assert lock_is_free(save_file)
    current = await TranscriptFile(save_file).load()
    assert normal(current[:-1]) == normal(last_prompt)
    assert current[-1]["role"] == "assistant"
    ctxmw.validate(current[:-1] if open_calls else current)


async def assert_faithful(
    server: ScriptedProvider, passed: list[list[Any]], save_file: Path
) -> None:
    """The model got the caller's messages, and one transcript holds the last prompt and answer."""
    assert_model_got_the_callers_messages(server, passed)
    await assert_one_transcript_that_replays(save_file, passed[-1])


async def assert_two_agents_run_concurrently(
    tmp_path: Path, run: Callable[[str, str, Path], Awaitable[str]], answer: str
) -> None:
    """Two agents ("one", "two") on one provider at once, each ``run(base, name, save_file)``
    with its own save_file: both answer, and neither's messages reach the other's transcript."""
    outputs: dict[str, str] = {}
    async with scripted_provider() as (server, base):
        with calls_through() as passed:

            async def one(name: str) -> None:
                outputs[name] = await run(base, name, tmp_path / name / "agent.jsonl")

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "one")
                tg.start_soon(one, "two")
    assert outputs == {"one": answer, "two": answer}
    assert all(problems == [] for problems in server.problems)
    assert len(passed) == len(server.requests) == 4
    for name in ("one", "two"):
        mine = [p for p in passed if f"{name}: add" in str(p)]
        await assert_one_transcript_that_replays(tmp_path / name / "agent.jsonl", mine[-1])


def assert_faithful_sync(
    server: ScriptedProvider, passed: list[list[Any]], save_file: Path, *, open_calls: bool = False
) -> None:
    """:func:`assert_faithful` for a test without an event loop (a synchronous agent's)."""
    assert_model_got_the_callers_messages(server, passed)
    assert_one_transcript_that_replays_sync(save_file, passed[-1], open_calls=open_calls)


def assert_one_transcript_that_replays_sync(
    save_file: Path, last_prompt: list[Any], *, open_calls: bool = False
) -> None:
    """:func:`assert_one_transcript_that_replays` for a test without an event loop."""
    anyio.run(
        functools.partial(
            assert_one_transcript_that_replays, save_file, last_prompt, open_calls=open_calls
        )
    )
