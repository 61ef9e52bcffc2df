"""Budget: layers, window from litellm, bands, the record, counts memoised per session."""

from __future__ import annotations

import litellm
import pytest

from ctxmw import Budget, budget
from ctxmw.context.budget import DEFAULT_CONTEXT_WINDOW, band_of, input_window
from ctxmw.context.tokens import LiteLLMCounter
from ctxmw.messages._memo import session_memo
from tests._synthetic import TOOLS
from tests.transcripts import call, group

MESSAGES = [
    {"role": "system", "content": "s" * 40},
    {"role": "user", "content": "u" * 80},
    *group([call("c1", "read", path="x")], ["r" * 400]),
    {"role": "assistant", "content": "a" * 40},
    {"role": "user", "content": "q" * 120},
]


chars = LiteLLMCounter(text_tokens=len)


def test_layers_are_counted_apart() -> None:
    b = budget(MESSAGES, tools=TOOLS, counter=chars, context_window=10_000)
    # litellm's framing: 3 tokens a message, then each string value (role, content, id).
    assert b.system == 3 + len("system") + 40
    assert b.tool_results == 3 + len("tool") + 400 + len("c1")
    assert b.current == 3 + len("user") + 120
    assert b.history > 80 + 40
    assert b.tools == chars.tools_tokens("", TOOLS, True) > 0
    parts = b.system + b.tools + b.history + b.tool_results + b.current
    assert b.total == parts + b.overhead
    assert b.overhead == 3


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
    expected = litellm.token_counter(model="gpt-4o", messages=MESSAGES, tools=TOOLS)
    assert budget(MESSAGES, "gpt-4o", TOOLS).total == expected


class Counting(LiteLLMCounter):
    def __init__(self) -> None:
        super().__init__(text_tokens=len)
        self.seen: list[object] = []

    def message_tokens(self, model: str, message: object) -> int:  # type: ignore[override]
        self.seen.append(message)
        return super().message_tokens(model, message)  # type: ignore[arg-type]


def test_within_a_session_repeated_calls_only_count_new_messages() -> None:
    counting = Counting()
    new = {"role": "assistant", "content": "new"}
    with session_memo({}):
        budget(MESSAGES, counter=counting)
        first = len(counting.seen)
        budget([*MESSAGES, new], counter=counting)
    assert first == len(MESSAGES)
    assert counting.seen[first:] == [new]


def test_without_a_session_nothing_is_kept() -> None:
    counting = Counting()
    budget(MESSAGES, counter=counting)
    budget(MESSAGES, counter=counting)
    assert len(counting.seen) == 2 * len(MESSAGES)


def test_a_plain_function_counter_reuses_its_counts_within_a_session() -> None:
    seen: list[str] = []

    def counting(text: str) -> int:
        seen.append(text)
        return len(text)

    with session_memo({}):
        budget(MESSAGES, counter=counting)
        first = len(seen)
        budget(MESSAGES, counter=counting)  # wrapped anew: the same counts
    assert len(seen) == first
