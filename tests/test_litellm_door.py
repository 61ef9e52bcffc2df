"""One door to litellm: no module of the package but ``ctxmw/_litellm.py`` imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ctxmw
from ctxmw import _litellm
from ctxmw.replay.caching import Split, model_prices

PACKAGE = Path(ctxmw.__file__).parent
DOOR = PACKAGE / "_litellm.py"
# The LiteLLM Proxy hook is a plugin of litellm's proxy server: it subclasses litellm's
# CustomLogger and mounts a route behind the proxy's own auth, inside litellm's process. It asks
# litellm nothing the door answers (model info, provider, tokens, prices) and may import it.
PLUGINS = PACKAGE / "proxy"


def _imports_litellm(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "litellm" or name.startswith("litellm.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_the_door_imports_litellm() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != DOOR
        and PLUGINS not in path.parents
        and (lines := _imports_litellm(ast.parse(path.read_text())))
    }
    assert offenders == {}, f"import litellm through ctxmw._litellm, not in {offenders}"
    assert _imports_litellm(ast.parse(DOOR.read_text()))


def test_the_scan_sees_every_form_of_import() -> None:
    code = "import litellm\nfrom litellm.types.utils import Message\nfrom litellmx import y\n"
    assert _imports_litellm(ast.parse(code)) == [1, 2]


def test_replay_prices_tiered_models_as_litellm_bills_them() -> None:
    # Gemini 2.5 Pro bills every prompt token at a higher rate above 200k prompt tokens.
    prices = model_prices("gemini/gemini-2.5-pro")
    for tokens, reads in ((100_000, 0), (300_000, 0), (300_000, 250_000)):
        billed, _ = _litellm.cost_per_token(
            "gemini/gemini-2.5-pro", prompt_tokens=tokens, cache_read_tokens=reads
        )
        assert prices.cost(tokens, Split(reads=reads)) == pytest.approx(billed)
    assert prices.cost(300_000, Split()) > 3 * prices.cost(100_000, Split())


def test_a_model_without_a_write_price_still_pays_the_write_premium() -> None:
    prices = model_prices("gpt-4o")
    assert prices.source["cache_write"] != "litellm"
    plain = prices.cost(10_000, Split())
    written = prices.cost(10_000, Split(writes=10_000))
    assert written == pytest.approx(plain * 1.25)
