"""``ctxmw demo``: a scripted agent through real litellm against a simulated provider, offline.

The provider (:mod:`ctxmw.demo._provider`) runs in-process on 127.0.0.1 and answers like OpenAI's
chat completions API, prompt-cache accounting included; ctxmw reaches it through the real
``litellm.acompletion`` (``openai/...`` with ``api_base``). The agent's tools are real: they list,
read and grep the files of the installed ctxmw package. The same scripted session runs once per
strategy list, so the table compares strategies on identical work.
"""

from __future__ import annotations

from ctxmw.demo._run import DEMO_STRATEGIES, DemoRow, run_demo

__all__ = ["DEMO_STRATEGIES", "DemoRow", "run_demo"]
