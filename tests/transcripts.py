"""Transcript builders and hypothesis strategies shared by the tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from ctxmw.context.tokens import LiteLLMCounter
from ctxmw.types import Messages

LONG_ARG = "a" * 300
LONG_OUT = "o" * 1000


def call(call_id: str, name: str = "read", **arguments: Any) -> dict[str, Any]:
    """One OpenAI tool_call entry."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def group(calls: Sequence[dict[str, Any]], outputs: Sequence[Any]) -> Messages:
    """An assistant message with ``calls`` followed by one tool result per call."""
    msgs: Messages = [{"role": "assistant", "content": None, "tool_calls": list(calls)}]
    for tc, out in zip(calls, outputs, strict=True):
        msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": out})
    return msgs


def adjacent_calls(n: int, *, repeat: dict[int, int] | None = None) -> Messages:
    """System + user, then ``n`` single-call groups with long arguments and outputs.

    Args:
        n: number of completed calls.
        repeat: forward number -> earlier forward number it repeats (same name and arguments).
    """
    repeat = repeat or {}
    msgs: Messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Do the task."},
    ]
    for f in range(1, n + 1):
        source = repeat.get(f, f)
        tc = call(f"call_{f}", "read", path=f"file_{source}", pad=LONG_ARG)
        msgs += group([tc], [f"{LONG_OUT} result {f}"])
    return msgs


def classify(source: Messages, prompt: Messages) -> dict[str, list[int]]:
    """Which forward call numbers a prompt shows full, compacted or not at all.

    Relies on every result in ``source`` being long enough to change when compacted.
    """
    kept = {m.get("tool_call_id"): m for m in prompt if m.get("role") == "tool"}
    regions: dict[str, list[int]] = {"dropped": [], "compacted": [], "full": []}
    f = 0
    for msg in source:
        if msg.get("role") != "tool":
            continue
        f += 1
        shown = kept.get(msg["tool_call_id"])
        if shown is None:
            regions["dropped"].append(f)
        elif shown is msg:
            regions["full"].append(f)
        else:
            assert str(shown["content"]).startswith("[compacted:")
            regions["compacted"].append(f)
    return regions


def span(first: int, last: int) -> list[int]:
    return list(range(first, last + 1))


# --- hypothesis: generated transcripts -----------------------------------------------------

_text = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=0, max_value=2000).map(lambda k: "x" * k),
)
_content = st.one_of(
    _text,
    st.lists(
        st.one_of(
            _text.map(lambda t: {"type": "text", "text": t}),
            st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
        ),
        min_size=1,
        max_size=3,
    ),
)
_args = st.fixed_dictionaries(
    {"path": st.sampled_from(["a", "b", "c"]), "body": _text},
    optional={"n": st.integers(0, 5), "nested": st.just({"deep": "y" * 500})},
)


@st.composite
def transcripts(draw: st.DrawFn, max_turns: int = 40) -> Messages:
    """Valid transcripts: user/assistant turns, single and parallel calls, repeats, list content."""
    msgs: Messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    counter = 0
    made: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, max_turns))):
        kind = draw(st.sampled_from(["tools", "tools", "tools", "user", "assistant"]))
        if kind == "user":
            msgs.append({"role": "user", "content": draw(_content)})
        elif kind == "assistant":
            msgs.append({"role": "assistant", "content": draw(_text)})
        else:
            width = draw(st.integers(1, 3))
            calls = []
            for _ in range(width):
                counter += 1
                if made and draw(st.integers(0, 4)) == 0:  # a repeat: same name and arguments
                    old = draw(st.sampled_from(made))
                    calls.append({**old, "id": f"id{counter}"})
                else:
                    name = draw(st.sampled_from(["read", "grep"]))
                    calls.append(call(f"id{counter}", name, **draw(_args)))
            made += calls
            msgs += group(calls, [draw(_content) for _ in calls])
    return msgs


def call_points(messages: Messages) -> list[int]:
    """Lengths at which a prefix of ``messages`` is valid: after each complete turn."""
    points = []
    open_ids: set[str] = set()
    for i, msg in enumerate(messages):
        for tc in msg.get("tool_calls") or []:
            open_ids.add(tc["id"])
        if msg.get("role") == "tool":
            open_ids.discard(msg["tool_call_id"])
        if not open_ids:
            points.append(i + 1)
    return points


# --- durable material: compaction and summaries -----------------------------------------------

DURABLE_LINES = (
    "DECISION: refund ORD-1042 in full",
    "OPEN: customer wants a callback before Friday",
    "ERROR: carrier API timed out",
    "Refund amount confirmed: $129.99",
    "Parcel tracking: RA123456789DE",
    "Replacement order INV-20931 created",
)
FILLER = "\n".join(f"note {k}: nothing of lasting interest happened here" for k in range(12))


def durable_trace(turns: int = 19) -> Messages:
    """System, task, then ``turns`` tool turns (40 messages by default); the six durable lines
    sit in the first six turns."""
    msgs: Messages = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Sort out the customer's delivery problem."},
    ]
    for t in range(turns):
        line = DURABLE_LINES[t] if t < len(DURABLE_LINES) else f"step {t} done"
        tc = call(f"t{t}", "lookup", query=f"step {t}")
        msgs.append({"role": "assistant", "content": f"Working on step {t}.", "tool_calls": [tc]})
        msgs.append({"role": "tool", "tool_call_id": f"t{t}", "content": f"{line}\n{FILLER}"})
    return msgs


def _quarter(text: str) -> int:
    return len(text) // 4 + 1


quarter_counter = LiteLLMCounter(text_tokens=_quarter)
"""A cheap deterministic token counter: litellm's framing, about four characters a token."""


# Small windows so that generated transcripts of a few dozen calls cross many boundaries.
SMALL_WINDOWS: dict[str, Any] = {
    "epoch_tool_call_threshold": 4,
    "epoch_size": 3,
    "epoch_full_tool_calls": 2,
    "epoch_compacted_tool_calls": 3,
    "economic_full_tool_calls": 2,
    "economic_compacted_tool_calls": 3,
    "epoch_increment_epochs_per_increase": 2,
    "epoch_increment_size_increase": 1,
    "epoch_increment_repeat_increase": 2,
    "epoch_increment_max_size": 8,
    "epoch_increment_max_compacted_tool_calls": 8,
    "full_tool_outputs": 2,
    "max_tool_calls": 6,
    "max_tool_chars": 600,
    "short_string_length": 30,
    "short_output_length": 60,
    "economic_compacted_result_chars": 60,
    "clear_tool_results_trigger": 0,
}
