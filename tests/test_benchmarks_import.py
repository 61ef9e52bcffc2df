"""Every script in benchmarks/ still imports against this tree (the suite never times them).

The benchmarks reach into ctxmw's private modules; a rename there would otherwise break them
unnoticed until someone runs one. Each script is imported (not run: they run under
``if __name__ == "__main__"``) in one fresh interpreter. A script that needs a package of an
optional extra that is not installed is skipped with the package's name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

_IMPORT_ALL = """
import importlib.util, json, sys, traceback
from pathlib import Path
root = Path(sys.argv[1])
sys.path.insert(0, str(root))
results = {}
for path in sorted(root.glob("*.py")):
    spec = importlib.util.spec_from_file_location("benchmark_" + path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        results[path.name] = ["ok", ""]
    except ModuleNotFoundError as error:
        results[path.name] = ["missing", str(error.name), traceback.format_exc()]
    except BaseException:
        results[path.name] = ["failed", traceback.format_exc()]
print(json.dumps(results))
"""

_OURS = ("ctxmw", "_agent", "_tracked", "_trips", "bench_", "economic_schedules")


@pytest.fixture(scope="module")
def imported() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, str(BENCHMARKS)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        check=True,
    )
    results: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_the_benchmark_imports(imported: dict[str, list[str]], script: str) -> None:
    outcome, *detail = imported[script]
    if outcome == "missing" and not detail[0].startswith(_OURS):
        pytest.skip(f"{script} needs {detail[0]}, not installed (an optional extra)")
    assert outcome == "ok", "\n".join(detail)
