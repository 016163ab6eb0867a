"""The tool-vote benchmark (experiments.benchmarks.tool_vote) on a scripted model: hand-computed accuracies."""

from __future__ import annotations

import re

import pytest

from experiments.benchmarks.tool_vote import action_correct, generate_questions, run, wilson_interval
from mfs_core.decoders import PAPER_RULES
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.tools import ToolsNotSupportedError
from mfs_core.tools.parsers import ToolCall
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation, hermes_template
from tests.tool_scripts import STEP_STOP

WRONG_LINE, RIGHT_LINE = "I use the subtraction tool.", "I use the tool the question needs."


def call(name: str, a: int, b: int) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'


def split_script(request: GenerationRequest) -> list[Continuation]:
    """One step candidate in three leads to a wrong call, with the best rollout log-prob (-0.1 vs -0.3)."""
    user = request.prompt.split("<|user|>\n")[-1].split("\n")[0]
    a, b = (int(x) for x in re.findall(r"\d+", user)[:2])
    tool = "add" if "buys" in user and "boxes" not in user else "multiply" if "boxes" in user else "subtract"
    wrong = call("add" if tool == "subtract" else "subtract", a, b)
    right = call(tool, a, b)
    if request.stop == STEP_STOP:
        return [continuation(WRONG_LINE, mean_logprob=-0.5)] + [continuation(RIGHT_LINE, mean_logprob=-0.5)] * (request.n - 1)
    if request.prompt.endswith(WRONG_LINE + "\n"):
        return [continuation(wrong, mean_logprob=-0.1, finish_reason="eos")] * request.n
    if request.prompt.endswith(RIGHT_LINE + "\n"):
        return [continuation(right, mean_logprob=-0.3, finish_reason="eos")] * request.n
    # a whole completion from the assistant prefix (the single sample): the first is the wrong one
    texts = [WRONG_LINE + "\n" + wrong] + [RIGHT_LINE + "\n" + right] * (request.n - 1)
    return [continuation(t, mean_logprob=-0.2, finish_reason="eos") for t in texts]


def test_the_vote_over_actions_fixes_what_the_best_path_and_a_single_sample_get_wrong() -> None:
    # The paper's vote over the kept beams, whose copies of one path are completed anew: the
    # right call's two copies outvote the wrong one. (With vote_rollouts on, the two
    # copies share one rollout and so one vote: 1 against 1, and the tie goes to the best F.)
    settings = MFSSettings(step_beam_size=3, num_rollouts=1, max_steps=1, min_steps=0, **PAPER_RULES)
    engine = MFSEngine(ScriptedBackend(split_script, chat_template=hermes_template), settings)
    questions = generate_questions(6, seed=1)
    records = run(engine, questions, settings)
    assert [sum(r["correct"] for r in records[m]) for m in ("mfs-action-vote", "mfs-answer-vote", "single-sample")] == [6, 0, 0]
    assert all(r["vote_share"] == pytest.approx(2 / 3) for r in records["mfs-action-vote"])
    assert records["mfs-action-vote"][0]["expected"] == f"{questions[0].tool}({questions[0].a}, {questions[0].b})"


OPENING = '<tool_call>\n{"name": "'


def required_script(request: GenerationRequest) -> list[Continuation]:
    """The prompt opens the call; one first step in three names the wrong tool, with the best
    rollout log-prob (-0.1 vs -0.3); a single sample's first completion is the wrong one."""
    assert request.prompt.endswith(OPENING) or OPENING in request.prompt  # every request continues the opened call
    user = request.prompt.split("<|user|>\n")[-1].split("\n")[0]
    a, b = (int(x) for x in re.findall(r"\d+", user)[:2])
    tool = "add" if "buys" in user and "boxes" not in user else "multiply" if "boxes" in user else "subtract"
    wrong = f'{"add" if tool == "subtract" else "subtract"}", "arguments": {{"a": {a}, "b": {b}}}}}'
    right = f'{tool}", "arguments": {{"a": {a}, "b": {b}}}}}'
    if request.stop == STEP_STOP and request.prompt.endswith(OPENING):
        return [continuation(wrong, mean_logprob=-0.5)] + [continuation(right, mean_logprob=-0.5)] * (request.n - 1)
    if request.prompt.endswith(wrong + "\n"):
        return [continuation("</tool_call>", mean_logprob=-0.1, finish_reason="eos")] * request.n
    if request.prompt.endswith(right + "\n"):
        return [continuation("</tool_call>", mean_logprob=-0.3, finish_reason="eos")] * request.n
    texts = [wrong + "\n</tool_call>"] + [right + "\n</tool_call>"] * (request.n - 1)
    return [continuation(t, mean_logprob=-0.2, finish_reason="eos") for t in texts]


def test_with_a_required_call_every_path_calls_and_the_vote_picks_the_common_call() -> None:
    settings = MFSSettings(step_beam_size=3, num_rollouts=1, max_steps=1, min_steps=0, **PAPER_RULES)
    engine = MFSEngine(ScriptedBackend(required_script, chat_template=hermes_template), settings)
    records = run(engine, generate_questions(6, seed=1), settings, tool_choice="required")
    assert [sum(r["correct"] for r in records[m]) for m in ("mfs-action-vote", "mfs-answer-vote", "single-sample")] == [6, 0, 0]
    assert all(len(r["calls"]) == 1 for rows in records.values() for r in rows)  # the opening is put back: every path parses


def test_the_benchmark_needs_a_template_that_renders_tools() -> None:
    settings = MFSSettings(step_beam_size=3, num_rollouts=1, max_steps=1, min_steps=0, **PAPER_RULES)
    with pytest.raises(ToolsNotSupportedError):
        run(MFSEngine(ScriptedBackend(split_script), settings), generate_questions(3), settings)


def test_questions_cycle_the_tools_and_are_seeded() -> None:
    questions = generate_questions(60, seed=0)
    assert [q.tool for q in questions[:3]] == ["add", "subtract", "multiply"] and len(questions) == 60
    assert questions == generate_questions(60, seed=0) != generate_questions(60, seed=1)
    assert all(str(q.a) in q.question and str(q.b) in q.question for q in questions)


def test_action_correct() -> None:
    add = generate_questions(1)[0]
    assert action_correct(add, [ToolCall("add", {"a": add.b, "b": add.a}, "c")])  # add commutes
    assert not action_correct(add, [ToolCall("multiply", {"a": add.a, "b": add.b}, "c")])
    assert not action_correct(add, [ToolCall("add", {"x": 1}, "c")]) and not action_correct(add, [])
    sub = generate_questions(2)[1]
    assert action_correct(sub, [ToolCall("subtract", {"a": sub.a, "b": sub.b}, "c")])
    assert not action_correct(sub, [ToolCall("subtract", {"a": sub.b, "b": sub.a}, "c")])


def test_wilson_interval() -> None:
    low, high = wilson_interval(30, 50)
    assert (round(low, 4), round(high, 4)) == (0.4618, 0.7239)
