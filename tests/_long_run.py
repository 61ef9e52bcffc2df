"""The promises of a long agent run, counted over what the upstream received.

A run is the framework's history at each call (``passed``, recorded above ctxmw) beside the
prompt the upstream got for it (``prompts``, recorded below). :func:`audit` counts:

* invalid prompts: the tool-pairing rules every provider enforces (:func:`ctxmw.messages.
  validate.scan`), or a route's own validator;
* duplicates: a message sent more often in one prompt than the caller's history holds it;
* re-sent removed messages: a message of the caller's left out of (or shortened in) one prompt,
  then sent as the caller has it in a later one (what busts a provider's prompt cache);
* the reduction: characters of the last prompt against the caller's last history.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxmw.messages.normal import normal_key, normal_message
from ctxmw.messages.validate import scan

RESULT_CHARS = 4096  # the 4 KB tool results of the acceptance run
CALLS = 120  # the calls of the acceptance run
SHORTENING_TIERS = {
    "economic_full_tool_calls": 5,
    "economic_compacted_tool_calls": 40,
    "economic_compacted_result_chars": 0,
}
"""Tiers narrower than the default's, so a 120-call run is shortened wherever ctxmw sits: the
default keeps 100 calls before its boundary, so it sends this run whole."""


def big_result(i: int) -> str:
    """The ``i``-th tool result of a long run: 4 KB of distinct lines."""
    line = f"result {i}: " + "lorem ipsum dolor sit amet " * 3
    text = "\n".join(f"{n:03d} {line}" for n in range(RESULT_CHARS // len(line) + 1))
    return text[:RESULT_CHARS]


@dataclass(frozen=True)
class Audit:
    calls: int
    invalid: int
    duplicates: int
    resent: int
    reduction: float

    def line(self, name: str) -> str:
        return (
            f"{name}: {self.calls} calls, {self.invalid} invalid prompts, {self.duplicates} "
            f"duplicated, {self.resent} removed re-sent, {self.reduction:.0%} fewer characters"
        )


def audit(
    prompts: Sequence[Sequence[Any]],
    passed: Sequence[Sequence[Any]],
    problems: Callable[[Sequence[Any]], list[Any]] | None = None,
) -> Audit:
    """Count the promises over a run (see the module docstring); ``problems`` validates one
    prompt (default: the chat format's tool pairing)."""
    check = problems or (lambda prompt: scan(prompt).problems)
    keyed = [[normal_key(m) for m in p] for p in prompts]
    given = [[normal_key(m) for m in p] for p in passed]
    return Audit(
        calls=len(prompts),
        invalid=sum(1 for p in prompts if check(p)),
        duplicates=sum(_duplicates(sent, had) for sent, had in zip(keyed, given, strict=True)),
        resent=_resent(keyed, given),
        reduction=1 - _chars(prompts[-1]) / _chars(passed[-1]),
    )


def assert_kept_promises(found: Audit, name: str) -> None:
    """Print ``name``'s line, then check the acceptance run: every call sent, no prompt invalid,
    nothing duplicated or re-sent, the last prompt at least 60% shorter than the history."""
    print(found.line(name))
    promises = (found.calls, found.invalid, found.duplicates, found.resent)
    assert promises == (CALLS, 0, 0, 0), found.line(name)
    assert found.reduction >= 0.6, found.line(name)


def _duplicates(sent: list[str], had: list[str]) -> int:
    extra = Counter(sent) - Counter(had)
    return sum(n for key, n in extra.items() if key in had)


def _resent(sent: list[list[str]], had: list[list[str]]) -> int:
    removed: set[str] = set()
    resent: set[str] = set()
    for prompt, history in zip(sent, had, strict=True):
        present = set(prompt)
        resent |= removed & present
        removed |= set(history) - present
    return len(resent)


def _chars(messages: Sequence[Any]) -> int:
    return len(json.dumps([normal_message(m) for m in messages]))


def ledger_lines(save_file: Path) -> list[dict[str, Any]]:
    """The telemetry ledger beside ``save_file``, one record per model call."""
    path = save_file.with_name(f"{save_file.name}.ledger.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
