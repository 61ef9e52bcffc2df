"""A 50-turn support agent, four ways: compaction on/off x a stable vs a timestamp-first prefix.

Each turn the prompt is assembled from segments (system, tools, history, query), optionally
passed through the ``compact`` strategy, and measured: utilisation of the input window (budget
accounting) and prefix reuse (the share of the prompt's tokens in leading messages identical to
the previous prompt's: what a provider's prompt cache can serve). Compaction bounds utilisation;
a stable prefix (the timestamp in the query, not at the top of the system prompt) keeps reuse.

Run: python examples/context_simulation.py  (offline, deterministic; no model is called)
"""

from __future__ import annotations

import json
from itertools import product

from ctxmw import Segment, Settings, StrategyContext, assemble, budget
from ctxmw.context.tokens import LiteLLMCounter
from ctxmw.messages.canonical import canonical_json
from ctxmw.strategies.compact import Compact
from ctxmw.types import Messages

TURNS = 50
SETTINGS = Settings(context_window=16_000, output_reservation=2_000)  # other settings: defaults
SYSTEM = "You are a support agent for an online shop. Be brief and exact."
TOOLS = "lookup_order(order_id) -> the order's status, items and delivery history."
FILLER = "\n".join(f"event {k}: parcel scanned at a depot, no action needed" for k in range(24))


def tokens(text: str) -> int:
    """A cheap deterministic counter: about four characters a token."""
    return len(text) // 4 + 1


COUNTER = LiteLLMCounter(text_tokens=tokens)
compact = Compact(counter=COUNTER)


def turn_messages(t: int, query: dict[str, object]) -> Messages:
    """What one turn adds to the history: the query as sent, a tool call, its result, an answer."""
    order = f"ORD-{1000 + t}"
    call = {
        "id": f"call_{t}",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": order})},
    }
    answer = f"DECISION: reship {order}" if t % 7 == 3 else f"{order} is on its way."
    return [
        query,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{t}", "content": f"{order}: delayed\n{FILLER}"},
        {"role": "assistant", "content": answer},
    ]


def prompt_for(t: int, history: Messages, stable: bool) -> Messages:
    clock = f"2025-05-{1 + t // 24:02d} {t % 24:02d}:00"
    system = SYSTEM if stable else f"Time: {clock}\n{SYSTEM}"
    question = f"Where is order ORD-{1000 + t}?" + (f" (asked {clock})" if stable else "")
    segments = [
        Segment("system", system, stable=stable),
        Segment("tools", TOOLS, stable=True),
        Segment("history", history, trust="user", stable=True),
        Segment("query", question, trust="user"),
    ]
    return assemble(segments, 10**9, counter=COUNTER).messages


def reused(previous: Messages, current: Messages) -> float:
    """Share of ``current``'s tokens in leading messages identical to ``previous``'s."""
    same = 0
    for old, new in zip(previous, current, strict=False):
        if canonical_json(old) != canonical_json(new):
            break
        same += COUNTER.message_tokens("", new)
    return same / sum(COUNTER.message_tokens("", m) for m in current)


def simulate(compaction: bool, stable: bool) -> tuple[float, float, bool]:
    history: Messages = []
    previous: Messages = []
    peak, reuse = 0.0, []
    for t in range(TURNS):
        prompt = prompt_for(t, history, stable)
        query = prompt[-1]
        if compaction:
            prompt = compact(prompt, StrategyContext(settings=SETTINGS))
        b = budget(prompt, counter=COUNTER, context_window=16_000, output_reservation=2_000)
        peak = max(peak, b.utilisation)
        if previous:
            reuse.append(reused(previous, prompt))
        previous = prompt
        history += turn_messages(t, query)
    decisions = [f"DECISION: reship ORD-{1000 + t}" for t in range(TURNS - 1) if t % 7 == 3]
    sent = json.dumps(previous)
    return peak, sum(reuse) / len(reuse), all(d in sent for d in decisions)


def main() -> None:
    print(f"{TURNS} turns, window 16,000 tokens (2,000 reserved for the answer)")
    print(f"{'compaction':<11} {'prefix':<16} {'max utilisation':>15} {'mean prefix reuse':>18}")
    results = {}
    for compaction, stable in product((False, True), (True, False)):
        peak, reuse, kept = simulate(compaction, stable)
        results[compaction, stable] = peak, reuse
        prefix = "stable" if stable else "timestamp-first"
        print(f"{'on' if compaction else 'off':<11} {prefix:<16} {peak:>15.2f} {reuse:>18.1%}")
        assert kept, "every DECISION line reaches the last prompt"
    assert results[True, True][0] < 1.0 < results[False, True][0]  # compaction bounds utilisation
    assert results[True, True][1] > 0.5 > results[True, False][1]  # a stable prefix keeps reuse


if __name__ == "__main__":
    main()
