"""``ctxmw replay --synthetic N`` on a baseline tree and on this one, back to back, as a ratio.

Run: ``nice -n 10 .venv/bin/python benchmarks/bench_replay.py`` (``--calls 1000`` by default;
``--rounds 2`` alternates the two trees twice). The baseline is a ``git archive`` of ``--ref``
(default ``main``) unpacked into a temporary folder, or an existing tree given by
``--baseline``. Both run in a fresh process with this venv's interpreter, the same flags and the
tree first on ``PYTHONPATH``; the figure that counts is the ratio of the two, measured in one
sitting, in CPU seconds of each process (user + system: wall time on a shared machine is mostly
waiting for a core). The two outputs must be identical: a
faster replay that printed other figures would be a bug, not a speed-up.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="--synthetic N (default 1000)")
    parser.add_argument("--ref", default="main", help="git ref of the baseline (default main)")
    parser.add_argument("--baseline", type=Path, help="an existing baseline tree instead")
    parser.add_argument("--rounds", type=int, default=1, help="alternations (default 1)")
    parser.add_argument("--fast", action="store_true", help="pass --fast (approximate tokens)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxmw-bench-replay-") as tmp:
        baseline = args.baseline or _export(args.ref, Path(tmp))
        flags = ["replay", "--synthetic", str(args.calls), "--json"]
        flags += ["--fast"] if args.fast else []
        times: dict[str, list[float]] = {"baseline": [], "this tree": []}
        outputs: dict[str, str] = {}
        for _ in range(args.rounds):
            for label, tree in (("baseline", baseline), ("this tree", HERE)):
                seconds, out = _time(tree, flags)
                times[label].append(seconds)
                outputs[label] = out
    base, ours = min(times["baseline"]), min(times["this tree"])
    print(f"ctxmw {' '.join(flags)}")
    print(
        f"  baseline ({args.baseline or args.ref}): {base:8.1f} CPU s  (runs: {times['baseline']})"
    )
    print(f"  this tree ({HERE}): {ours:8.1f} CPU s  (runs: {times['this tree']})")
    print(f"  speed-up: {base / ours:.2f}x")
    same = outputs["baseline"] == outputs["this tree"]
    print(f"  identical output: {same}")
    return 0 if same else 1


def _export(ref: str, into: Path) -> Path:
    tree = into / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(HERE), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _time(tree: Path, flags: list[str]) -> tuple[float, str]:
    """CPU seconds (user + system) of one run: on a shared machine wall time is mostly waiting."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = "import sys, ctxmw.cli; sys.exit(ctxmw.cli.main(sys.argv[1:]))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", code, *flags], env=env, cwd=tree, capture_output=True, text=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr}")
    return seconds, done.stdout


if __name__ == "__main__":
    raise SystemExit(main())
