"""The fold plan shared by compact and summarize: stepped, never splitting a tool group."""

from __future__ import annotations

from hypothesis import given, settings

from ctxmw import Settings, validate
from ctxmw.strategies._fold import plan_fold, splice
from ctxmw.types import Messages
from tests.transcripts import call_points, transcripts

SMALL = Settings(compact_keep_recent=2, summary_step=4)


def test_nothing_to_fold_when_only_recent_turns_exist() -> None:
    msgs: Messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    msgs += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]
    assert plan_fold(msgs, SMALL) is None


@settings(max_examples=80, deadline=None)
@given(messages=transcripts(max_turns=30))
def test_fold_keeps_the_task_and_never_splits_a_tool_group(messages: Messages) -> None:
    fold = plan_fold(messages, SMALL)
    if fold is None:
        return
    assert [m["role"] for m in messages[: fold.start]] == ["system", "user"]
    assert messages[fold.end]["role"] != "tool"
    # What stays visible still pairs every call with its result.
    validate(splice(messages, fold, "summary"))


@settings(max_examples=40, deadline=None)
@given(messages=transcripts(max_turns=40))
def test_the_fold_end_moves_only_in_steps(messages: Messages) -> None:
    ends = [f.end for p in call_points(messages) if (f := plan_fold(messages[:p], SMALL))]
    assert ends == sorted(ends)
    # Between steps the fold (so the summary, so the prompt prefix) does not move.
    assert len(set(ends)) <= len(messages) // SMALL.summary_step + 1
