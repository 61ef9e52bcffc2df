"""The test suite's tiers: the default run leaves the slow tier out, ``--slow`` and ``-m slow``
bring it back, and a run that selects nothing still fails (CI must never pass on zero tests).

Each case runs pytest in-process on a small module with this suite's own conftest and markers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
MODULE = """
import pytest

def test_fast():
    pass

@pytest.mark.slow
def test_slow():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(
        "[pytest]\naddopts = --strict-markers -p anyio\n"
        "markers =\n    slow: the slow tier\n    live: live\n    proxy: proxy\n"
    )
    return pytester


def test_the_default_run_deselects_the_slow_tier_and_says_how_to_run_it(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(test_mixed=MODULE)
    result = suite.runpytest_inprocess()
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*1 slow tests deselected: pytest --slow runs them too*"])


@pytest.mark.parametrize("option", [["--slow"], ["-m", "slow"]], ids=["--slow", "-m slow"])
def test_the_slow_tier_runs_when_asked(suite: pytest.Pytester, option: list[str]) -> None:
    suite.makepyfile(test_mixed=MODULE)
    result = suite.runpytest_inprocess(*option)
    result.assert_outcomes(passed=2 if option == ["--slow"] else 1)


def test_a_run_that_selects_no_test_still_fails(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_only_slow="import pytest\n\n@pytest.mark.slow\ndef test_x():\n    pass\n")
    result = suite.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
