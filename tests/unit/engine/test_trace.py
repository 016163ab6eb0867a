"""The trace ``mfs ask`` prints, on hand-built decode results (no model)."""

from __future__ import annotations

from mfs_core.settings import MFSSettings
from mfs_core.trace import LEGEND, format_reasoning, format_trace, format_vote, show, stop_check
from mfs_core.types import Candidate, DecodeResult, StepTrace

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, min_steps=1)
FINAL = "The answer is: \\boxed{7}."


def cand(text: str, logp: float, **fields: object) -> Candidate:
    return Candidate(beam_index=0, text=text, step_logprob=logp, step_tokens=len(text.split()), **fields)


def two_step_result() -> DecodeResult:
    step0 = StepTrace(
        step=0,
        candidates=[
            cand("3 + 4 = 7", -0.1, selected=True, step_value=0.0, foresight_quality=-0.2),
            cand("3 + 4 = 7", -0.1, selected=True, step_value=0.0, foresight_quality=-0.2),
            cand("3 * 4 = 12", -0.5, pruned=True),
            cand("3 - 4 = -1", -0.6, pruned=True),
        ],
        mean_score=-0.325, std_score=0.2278, prune_threshold=-0.143, max_step_value=0.0, stop_epsilon=1e-6,
    )
    step1 = StepTrace(
        step=1,
        candidates=[
            cand(FINAL, -0.05, finished=True, selected=True),
            cand(FINAL, -0.05, finished=True, selected=True),
            cand(FINAL, -0.05, finished=True),
            cand("7 + 1 = 8", -0.9),
        ],
        stop_epsilon=1e-6,
    )
    return DecodeResult(
        text=f"3 + 4 = 7\n{FINAL}", answer="7", vote_share=1.0, stop_reason="all_finished", prompt_tokens=100,
        output_tokens=40, flops=4.8e8, steps=[step0, step1], completions=[f"3 + 4 = 7\n{FINAL}"] * 2,
        completion_answers=["7", "7"], completion_qualities=[-0.05, -0.05], wall_seconds=0.25,
    )


def test_the_trace_has_a_legend_collapsed_duplicates_and_counts_that_match_the_vote() -> None:
    assert format_trace(two_step_result(), SETTINGS).splitlines() == [
        LEGEND,
        "step 0: 4 candidates sampled, 0 finished, 2 pruned, 2 rolled out; μ = -0.325, σ = 0.228, "
        "threshold μ + λ1·σ = -0.143",
        '   *  ×2 "3 + 4 = 7"                                    logp/tok = -0.100  V = +0.0000',
        "   stop check: max V = +0.0000 <= ε_stop = 1e-06 but t = 0 < min_steps = 1: go on",
        "step 1: 4 candidates sampled, 3 finished (2 kept as completed paths), 0 pruned, 0 rolled out",
        '   *  ×2 "The answer is: \\boxed{7}."                    logp/tok = -0.050  finished, kept as a completed path',
        '         "The answer is: \\boxed{7}."                    logp/tok = -0.050  finished, not kept',
        "stop reason: all_finished",
        "tokens: 100 prompt, 40 output; FLOPs ≈ 4.800e+08 (6·n·P); wall time 0.25 s",
    ]
    assert format_vote(two_step_result()) == "vote: 7 ×2 (2 completed paths)"
    for symbol in ("μ", "σ", "V =", "ε_stop", "λ1", "logp/tok", "*"):
        assert symbol in LEGEND


def test_the_stop_check_says_why_the_search_went_on() -> None:
    step = StepTrace(step=2, max_step_value=-0.01, stop_epsilon=1e-6)
    assert stop_check(step, SETTINGS) == "max V = -0.0100 <= ε_stop = 1e-06: the decoder went on"
    step.converged = True
    assert stop_check(step, SETTINGS) == "max V = -0.0100 <= ε_stop = 1e-06: converged, stop"
    off = MFSSettings(early_stopping=False)
    assert stop_check(StepTrace(step=3, max_step_value=0.0, stop_epsilon=1e-6), off).endswith(
        "but early_stopping is off: go on"
    )
    assert stop_check(StepTrace(step=0, max_step_value=0.5, stop_epsilon=1e-6), SETTINGS) == (
        "max V = +0.5000 > ε_stop = 1e-06: go on"
    )
    assert stop_check(StepTrace(step=0), SETTINGS) == ""
    assert stop_check(StepTrace(step=0, max_step_value=-1e-9, stop_epsilon=1e-6), SETTINGS).startswith(
        "max V = +0.0000 <= ε_stop"
    )  # no "-0.0000"


def test_rollout_lines_are_marked_and_escaping_matches_the_trace() -> None:
    result = two_step_result()
    assert format_reasoning(result, SETTINGS) == f"   3 + 4 = 7\n   {FINAL}"  # both chosen by the search
    result.steps = result.steps[:1]  # converged after step 0: the rollout wrote the rest
    result.text = f"3 + 4 = 7\n7 - 0 = 7\n{FINAL}"
    assert format_reasoning(result, SETTINGS).splitlines() == ["   3 + 4 = 7", " ↳ 7 - 0 = 7", f" ↳ {FINAL}"]
    assert show(FINAL) == FINAL  # a backslash prints as itself, as in the reasoning
    assert show("a\nb\tc", 4) == "a⏎b…" and show("") == "(empty)"


def test_a_vote_with_several_answers_lists_them_by_count() -> None:
    result = two_step_result()
    result.completion_answers = ["7", None, "12", "7"]
    assert format_vote(result) == "vote: 7 ×2, (no answer) ×1, 12 ×1 (4 completed paths)"
