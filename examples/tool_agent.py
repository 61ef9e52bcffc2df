"""A tool-using agent, end to end, offline: ctxmw.Session against the scripted fake.

Run it with ``python examples/tool_agent.py``. Swap ``completion=fake`` for nothing (the default
is ``litellm.acompletion``) and set an API key to run the same agent against a real model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

from ctxmw import Session
from ctxmw.cli import main as ctxmw_cli
from ctxmw.testing import FakeCompletion, text, tool_calls, usage

INVENTORY = {"apples": 12, "pears": 7, "plums": 0}


def stock(item: str) -> int:
    """How many of an item are in stock.

    Args:
        item: the product name, lower case.
    """
    if item not in INVENTORY:
        raise KeyError(f"unknown item {item!r}")
    return INVENTORY[item]


async def reorder(item: str, quantity: int) -> str:
    """Place a reorder with the supplier.

    Args:
        item: the product name.
        quantity: how many to order.
    """
    await anyio.sleep(0.01)  # the supplier's API
    return f"ordered {quantity} {item}"


def scripted_model() -> FakeCompletion:
    """What a model might answer, round by round."""
    return FakeCompletion(
        tool_calls(
            ("stock", {"item": "apples"}),
            ("stock", {"item": "plums"}),
            ("stock", {"item": "kiwis"}),
        ),
        tool_calls(
            ("reorder", {"item": "plums", "quantity": 24}),
            usage=usage(1500, 30, cached_tokens=1024),
        ),
        text("Apples: 12 in stock. Plums were out, so I reordered 24. We do not sell kiwis."),
    )


async def run(save_file: Path) -> FakeCompletion:
    """Ask the agent once; returns the fake, which recorded every model call."""
    fake = scripted_model()
    agent = Session(
        "openai/gpt-4o-mini",
        save_file=save_file,
        tools=[stock, reorder],
        system="You manage a small shop's stock.",
        prompt_strategies="shorten_tools_epoch_increment",
        completion=fake,
    )
    reply = await agent.ask("Check apples, plums and kiwis; reorder what is out.")
    print(f"Agent: {reply.choices[0].message.content}")
    offered = [tool["function"]["name"] for tool in fake.calls[0]["tools"]]
    print(f"Model calls: {len(fake.calls)}; tools offered: {offered}")
    return fake


def main() -> None:
    """Run the agent, then print its transcript the way ``ctxmw show`` does."""
    with tempfile.TemporaryDirectory() as tmp:
        save_file = Path(tmp) / "shop-agent.jsonl"
        anyio.run(run, save_file)
        print("Transcript, as `ctxmw show` prints it:")
        ctxmw_cli(["show", str(save_file), "--width", "70"])


if __name__ == "__main__":
    main()
