"""What a strategy list hides from the model: replay's loss measure on a generated agent run.

A generated SWE-bench-like run (a bash agent reading, grepping, editing and testing a generated
repository) is replayed through the default list and two baselines. For each, the share of the
references (the strings each recorded next action took from an earlier tool result: paths,
names, line numbers, test ids) that the prompt built at that call no longer showed. Then one
prompt is rebuilt with ``ctxmw.replay.prompts``, exactly as a session would have sent it, and
the references it hides are listed with the tool result each came from.

Run: python examples/replay_loss.py  (offline, deterministic; no model is called)
"""

from __future__ import annotations

import anyio

from ctxmw.context.tokens import ApproxCounter
from ctxmw.replay import prompts, replay
from ctxmw.replay.coding import swe_run
from ctxmw.replay.loss import ReferenceIndex

LISTS = ["default", "shorten_tools_epoch_increment", "clear_tool_results"]
# Small tiers so that a short run shows the effect (the defaults keep 20 full and 80 compacted).
SETTINGS = {
    "economic_full_tool_calls": 3,
    "economic_compacted_tool_calls": 6,
    "clear_tool_results_trigger": 10_000,
}


async def main() -> None:
    messages = swe_run(seed=3)
    result = await replay(
        {"swe:3": messages}, LISTS, settings=SETTINGS, counter=ApproxCounter(), optimal=False
    )
    print(f"{result.calls} calls, {result.strategies['none'].references} references")
    for name, s in result.strategies.items():
        ratio = result.ratio_to_baseline(name)["end_breakpoint"] or 0.0
        print(f"{name:<30} cost {ratio:.2f}x none  hidden {s.hidden_share:6.1%}  ({s.gone} gone)")
    worst = max(result.strategies["default"].calls, key=lambda c: c.loss.gone)
    index = ReferenceIndex(messages)
    async for point, prompt in prompts(messages, "default", settings=SETTINGS):
        if point == worst.message_index:
            loss = index.measure(point, prompt)
            print(f"\nthe prompt before message {point}: {len(prompt)} messages, {loss.gone} gone")
            for item in loss.lost:
                where = f"the tool result at {item.source} ({item.source_shown})"
                print(f"  {item.text!r}: from {where}")


if __name__ == "__main__":
    anyio.run(main)
