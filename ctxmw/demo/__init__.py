"""``ctxmw demo``: a scripted agent through real litellm against a simulated provider, offline.

The provider (:mod:`ctxmw.demo._provider`) runs in-process on 127.0.0.1 and answers like OpenAI's
chat completions API, prompt-cache accounting included; ctxmw reaches it through the real
``litellm.acompletion`` (``openai/...`` with ``api_base``). The agent's tools work on the files of
the installed ctxmw package: they list, read and grep them, run simulated tests and edit them in
memory. The same plan runs once per strategy list; the agent decides each move from the prompt
it is sent, so what a strategy hides costs it calls (:mod:`ctxmw.demo._agent`).
"""

from __future__ import annotations

from ctxmw.demo._run import DEMO_STRATEGIES, DemoRow, run_demo

__all__ = ["DEMO_STRATEGIES", "DemoRow", "run_demo"]
