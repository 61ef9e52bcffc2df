"""Budget accounting: layers, window from litellm, bands, the record, memoised counts."""

from __future__ import annotations

import litellm
import pytest

from ctxmw import Budget, budget
from ctxmw.context.budget import DEFAULT_CONTEXT_WINDOW, band_of, default_counter, input_window
from tests.transcripts import call, group

MESSAGES = [
    {"role": "system", "content": "s" * 40},
    {"role": "user", "content": "u" * 80},
    *group([call("c1", "read", path="x")], ["r" * 400]),
    {"role": "assistant", "content": "a" * 40},
    {"role": "user", "content": "q" * 120},
]


def chars(text: str) -> int:
    return len(text)


def test_layers_are_counted_apart() -> None:
    b = budget(MESSAGES, tools=[{"type": "function"}], counter=chars, context_window=10_000)
    assert b.system == 3 + len("system\n") + 40
    assert b.tool_results == 3 + len("tool\n" + "r" * 400 + "\nc1")
    assert b.current == 3 + len("user\n") + 120
    assert b.history > 80 + 40
    assert b.tools == len('[{"type": "function"}]')
    parts = b.system + b.tools + b.history + b.tool_results + b.current
    assert b.total == parts + 3


@pytest.mark.parametrize(
    ("utilisation", "band"),
    [(0.0, "ok"), (0.599, "ok"), (0.60, "compress"), (0.75, "summarize"), (0.9, "critical")],
)
def test_bands(utilisation: float, band: str) -> None:
    assert band_of(utilisation) == band


def test_utilisation_is_against_the_window_minus_the_reservation() -> None:
    b = Budget(0, 0, 597, 0, 0, window=1_100, output_reservation=100)
    assert (b.usable, b.utilisation, b.band) == (1_000, 0.6, "compress")
    record = b.as_record()
    assert record["utilisation"] == 0.6
    assert record["band"] == "compress"
    assert set(record) >= {"system", "tools", "history", "tool_results", "current", "window"}


def test_the_window_comes_from_litellm() -> None:
    assert input_window("gpt-4o") == litellm.get_model_info("gpt-4o")["max_input_tokens"]
    b = budget(MESSAGES, "gpt-4o", counter=chars, output_reservation=1_000)
    assert b.usable == input_window("gpt-4o") - 1_000


def test_unknown_models_fall_back_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    assert input_window("no-such-model-xyz") == DEFAULT_CONTEXT_WINDOW
    assert input_window(None) == DEFAULT_CONTEXT_WINDOW
    assert capsys.readouterr().out == ""
    assert budget(MESSAGES, "no-such-model-xyz", counter=chars, context_window=50).window == 50


def test_the_default_counter_is_litellms() -> None:
    text = "Tokens are counted by litellm's tokenizer."
    expected = litellm.token_counter(model="gpt-4o", text=text)
    assert default_counter("gpt-4o")(text) == expected
    assert default_counter("gpt-4o") is default_counter("gpt-4o")


def test_repeated_calls_only_count_new_messages() -> None:
    seen: list[str] = []

    def counting(text: str) -> int:
        seen.append(text)
        return len(text)

    budget(MESSAGES, counter=counting)
    first = len(seen)
    budget([*MESSAGES, {"role": "assistant", "content": "new"}], counter=counting)
    assert first == len(MESSAGES)
    assert seen[first:] == ["assistant\nnew"]
