"""Typed segments: preloaded noise crowds out the one fact that matters; selection keeps it.

Run: python examples/segments_assembly.py  (offline; litellm's tokenizer counts the tokens)
"""

from __future__ import annotations

import ctxmw
from ctxmw import Segment

system = Segment("system", "You are a support agent. Answer from the context.", stable=True)
noise = [
    Segment("retrieved", f"Branch {k} opening hours: " + "Mon-Fri 9-17. " * 25, trust="external")
    for k in range(6)
]
fact = Segment(
    "retrieved",
    "Refund for ORD-1042 was issued on 3 May; banks take up to 5 business days.",
    trust="tool",
    tags=("refund",),
    name="refund fact",
)
query = Segment("query", "Where is my refund for ORD-1042?", trust="user")
segments = [system, *noise, fact, query]

budget_tokens = ctxmw.assemble([system, *noise, query], 10**6).tokens  # room for the preload only
everything = ctxmw.assemble(segments, budget_tokens)
focused = ctxmw.assemble(ctxmw.select_segments(segments), budget_tokens)

print(f"budget {budget_tokens} tokens")
print(f"all segments:      dropped {[s.name or s.kind for s in everything.dropped]}")
print(f"selected segments: {len(focused.messages)} messages, {focused.tokens} tokens, dropped none")
assert fact in everything.dropped
assert not focused.dropped

try:
    ctxmw.assemble([system, Segment("query", "why? " * 500, trust="user")], 200)
except ctxmw.ContextOverflowError as exc:
    print(f"a required query over budget raises: {type(exc).__name__}")
