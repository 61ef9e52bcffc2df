"""Cache telemetry with no configuration: three drop-in calls, then ``ctxmw stats``.

``ctxmw.acompletion`` is called where ``litellm.acompletion`` was, with no save_file and no
session id. The three calls of one growing conversation are still compared with each other
(they share their opening messages), each logs one INFO line on the ``ctxmw`` logger (reported
against expected cache reads, the hit rate so far), and their records go to the default ledger,
which ``ctxmw stats`` reads with no argument.

The default ledger lives in ``$XDG_STATE_HOME/ctxmw`` (else ``~/.local/state/ctxmw``); this
example points ``CTXMW_STATE_DIR`` at a temporary folder so it leaves nothing behind. Run with
``python examples/drop_in_telemetry.py``: no network, no key (a scripted fake answers).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from typing import Any

import anyio

import ctxmw
from ctxmw.cli import main as ctxmw_cli
from ctxmw.testing import FakeCompletion, text, usage

SYSTEM = "You review Python modules and answer in three bullet points. " * 120  # ~1,300 tokens


async def main() -> None:
    # What the (fake) provider reports: nothing cached on the first call, then the prefix.
    fake = FakeCompletion(
        text("1. ...", usage=usage(1347, 40, cached_tokens=0)),
        text("2. ...", usage=usage(1362, 40, cached_tokens=1280)),
        text("3. ...", usage=usage(1379, 40, cached_tokens=1280)),
    )
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for question in ("Review wrapper.py.", "And session.py?", "Which one is riskier?"):
        history.append({"role": "user", "content": question})
        # completion=fake stands in for the provider; leave it out to call the real one.
        reply = await ctxmw.acompletion("openai/gpt-4o", history, completion=fake)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})


with tempfile.TemporaryDirectory() as state:
    os.environ["CTXMW_STATE_DIR"] = state  # without it: ~/.local/state/ctxmw
    logging.basicConfig(format="%(message)s", stream=sys.stdout)
    logging.getLogger("ctxmw").setLevel(logging.INFO)  # the INFO lines below
    anyio.run(main)
    print()
    ctxmw_cli(["stats"])  # no argument: the default ledger
