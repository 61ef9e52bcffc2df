"""ctxmw's options are read wherever a caller or framework puts them, and never reach a provider.

A scripted OpenAI-compatible server on loopback plays the provider: every assertion is on the
request body litellm really sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import litellm
import pytest

import ctxmw
from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.errors import UsageError
from ctxmw.runtime.options import split_options, without_ctxmw

pytestmark = pytest.mark.anyio

MODEL = "openai/scripted"
HISTORY = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


@pytest.fixture
async def provider() -> AsyncIterator[tuple[ScriptedProvider, str]]:
    server = ScriptedProvider()
    async with anyio.create_task_group() as tg:
        base = await server.serve(tg)
        yield server, base
        tg.cancel_scope.cancel()


def _forms(save_file: Path) -> dict[str, dict[str, Any]]:
    options = {"save_file": str(save_file), "prompt_strategies": "none"}
    return {
        "keyword": dict(options),
        "metadata": {"metadata": {"ctxmw": options, "trace": "t-1"}},
        "litellm_metadata": {"litellm_metadata": {"ctxmw": options}},
        "extra_body": {"extra_body": {"metadata": {"ctxmw": options}, "top_k": 3}},
    }


@pytest.mark.parametrize("form", ["keyword", "metadata", "litellm_metadata", "extra_body"])
@pytest.mark.parametrize("entry", ["ctxmw.acompletion", "patched litellm.acompletion"])
async def test_options_are_honoured_and_no_ctxmw_key_reaches_the_provider(
    provider: tuple[ScriptedProvider, str], tmp_path: Path, form: str, entry: str
) -> None:
    server, base = provider
    save_file = tmp_path / form / "agent.jsonl"
    kwargs = _forms(save_file)[form]
    call = dict(model=MODEL, messages=HISTORY, api_base=base, api_key="k", **kwargs)
    if entry == "ctxmw.acompletion":
        await ctxmw.acompletion(**call)
    else:
        with ctxmw.patch_litellm():
            await litellm.acompletion(**call)
    assert save_file.exists(), f"the save_file given as {form} was not honoured"
    body = json.dumps(server.requests[-1])
    assert "ctxmw" not in body
    assert str(tmp_path) not in body
    if form == "extra_body":  # the rest of extra_body still goes out
        assert server.requests[-1]["top_k"] == 3


def test_keyword_beats_metadata_beats_litellm_metadata_beats_extra_body() -> None:
    options, rest = split_options(
        {
            "session": "kw",
            "metadata": {"ctxmw": {"session": "md", "max_rounds": 3}, "user": "u"},
            "litellm_metadata": {"ctxmw": {"session": "lm", "max_rounds": 4, "save_file": "a"}},
            "extra_body": {"metadata": {"ctxmw": {"save_file": "b", "prompt_strategies": "x"}}},
        }
    )
    assert options == {"session": "kw", "max_rounds": 3, "save_file": "a", "prompt_strategies": "x"}
    assert rest == {"metadata": {"user": "u"}}


def test_a_carrier_left_empty_is_dropped_and_others_are_untouched() -> None:
    given = {"extra_body": {"metadata": {"ctxmw": {"session": "s"}}}, "temperature": 0}
    assert without_ctxmw(given) == {"temperature": 0}
    assert given["extra_body"] == {"metadata": {"ctxmw": {"session": "s"}}}  # not mutated
    assert without_ctxmw({"metadata": {"a": 1}}) == {"metadata": {"a": 1}}


@pytest.mark.parametrize("carrier", ["metadata", "litellm_metadata"])
def test_an_unknown_option_names_itself_and_the_allowed_ones(carrier: str) -> None:
    with pytest.raises(UsageError, match=r"'sumary_model'.*prompt_strategies"):
        split_options({carrier: {"ctxmw": {"sumary_model": "x"}}})


async def test_base_url_counts_as_a_custom_endpoint_for_prompt_cache_key(
    provider: tuple[ScriptedProvider, str],
) -> None:
    # A self-hosted endpoint has no use for the key: named by base_url (openai-agents' way) as
    # by api_base, it gets none.
    server, base = provider
    for endpoint in ("api_base", "base_url"):
        await ctxmw.acompletion(
            model=MODEL, messages=HISTORY, api_key="k", prompt_strategies="none", **{endpoint: base}
        )
        assert "prompt_cache_key" not in server.requests[-1], endpoint
