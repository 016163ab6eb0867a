"""The search rules aimed at the measured failures, in the decoders, against scripted backends with hand-computed numbers: F over a
fixed window of the rollout, the anytime-valid answer stop (beside or instead of eq. 12), the
quality-weighted vote, and the same stop and vote for `sc` and `esc`.

The MFS scenario is tests/mfs_scenario.py's, worked out in test_mfs_decoder.py (raw prompt "Q:",
M = N = 2, λ1 = 0.4, two steps): the survivors a, b (t = 0) and a2, b2 (t = 1) get rollouts with
F = -0.2, -0.4, -0.1, -0.35.
"""

from __future__ import annotations

import json
import math

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.decoders import PAPER_RULES
from mfs_core.decoders.mfs_foresight import joined_rollout
from tests.mfs_scenario import END, ROLLOUTS, STEP_STOP, STEPS, scripted_model
from tests.scripted import ScriptedBackend, continuation
from tests.trace_invariants import assert_trace

BASE = dict(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2, seed=0,
            **PAPER_RULES)
AGREEING = {prompt: ("The answer is: \\boxed{1}.", lp) for prompt, (_, lp) in ROLLOUTS.items()}
HEAD = "The answer"  # a rollout's first 2 tokens; its other 3 (" is: \\boxed{d}.") have log-prob -2 each
REST_LOGPROB = -2.0


def run(steps=STEPS, rollouts=ROLLOUTS, backend=None, **overrides):
    backend = backend if backend is not None else scripted_model(steps, rollouts)
    result = MFSEngine(backend, MFSSettings(**{**BASE, **overrides})).decode(["Q:"])[0]
    return result, backend


def windowed_model(window_tokens: int = 2):
    """tests/mfs_scenario.py's model, each rollout 5 tokens: ``HEAD`` at the scenario's F per token, then the
    rest at ``REST_LOGPROB``. A request for fewer than 5 tokens gets ``HEAD`` cut by the cap; a request
    from after ``HEAD`` gets the rest."""
    def script(request):
        if request.stop == STEP_STOP:
            return [continuation(text, logprobs=[lp, lp], stop_reason="\n") for text, lp in STEPS[request.prompt]]
        for prompt, (text, lp) in ROLLOUTS.items():
            rest = text[len(HEAD):]
            if request.prompt == prompt and request.max_tokens < 5:
                assert request.max_tokens == window_tokens
                return [continuation(HEAD, logprobs=[lp] * 2, finish_reason="length")] * request.n
            if request.prompt == prompt:
                return [continuation(text, logprobs=[lp] * 2 + [REST_LOGPROB] * 3, stop_reason=END)] * request.n
            if request.prompt == prompt + HEAD:
                assert (request.n, request.max_tokens) == (1, 512 - 2)
                return [continuation(rest, logprobs=[REST_LOGPROB] * 3, stop_reason=END)]
        raise AssertionError(request.prompt)

    return ScriptedBackend(script, num_parameters=1000)


# --- (a) foresight over a fixed window -------------------------------------------------------------

def test_foresight_window_scores_the_first_w_tokens_and_samples_the_rest():
    result, backend = run(backend=windowed_model(), foresight_window=2)
    step0, step1 = result.steps
    # F is the window's: the scenario's numbers, so the values are test_mfs_decoder's
    assert [c.foresight_quality for c in step0.candidates[:2]] == pytest.approx([-0.2, -0.4])
    assert [c.step_value for c in step0.candidates[:2]] == pytest.approx([0.1, -0.1])
    assert [c.step_value for c in step1.candidates if c.step_value is not None] == pytest.approx([0.1, 0.05])
    # each step: one round of windows (2 tokens), one round of rests (n = 1, 510 tokens) from after them
    rollout_rounds = [[r.max_tokens for r in call] for call in backend.calls if call[0].stop == (END,)]
    assert rollout_rounds == [[2, 2], [510, 510], [2, 2], [510, 510]]
    # the rollouts are whole again: the kept beams' completions and every token counted
    assert result.completions == ["a\na2\nThe answer is: \\boxed{1}.", "b\nb2\nThe answer is: \\boxed{2}."]
    assert result.completion_qualities == pytest.approx([-0.1, -0.35])
    assert step0.candidates[0].rollout_tokens == 5
    assert result.search_settings["foresight_window"] == 2
    assert_trace(json.loads(result.to_json()))


def test_without_a_window_f_is_the_whole_rollouts_and_a_long_window_changes_nothing():
    whole, backend = run(backend=windowed_model())
    # a: (2·(-0.2) + 3·(-2)) / 5 = -1.28; b: (2·(-0.4) - 6) / 5 = -1.36
    assert [c.foresight_quality for c in whole.steps[0].candidates[:2]] == pytest.approx([-1.28, -1.36])
    assert all(r.max_tokens == 512 for call in backend.calls for r in call if r.stop == (END,))
    long, long_backend = run(backend=windowed_model(window_tokens=10), foresight_window=10)
    # the rollouts end (5 tokens) before the window: scored over all their tokens, no second round
    assert [c.foresight_quality for c in long.steps[0].candidates[:2]] == pytest.approx([-1.28, -1.36])
    assert len(long_backend.calls) == len(backend.calls)


def test_joined_rollout_adds_the_parts_and_cuts_an_end_marker_split_across_them():
    window = continuation("x = 2 <end_of", logprobs=[-0.1, -0.2], finish_reason="length", prompt_tokens=7)
    rest = continuation("_reasoning> more", logprobs=[-1.0, -2.0, -3.0], finish_reason="length")
    joined = joined_rollout(window, rest, END)
    assert (joined.text, joined.finish_reason, joined.stop_reason) == ("x = 2 ", "stop", END)
    assert (joined.num_tokens, joined.logprob_sum, joined.prompt_tokens) == (5, pytest.approx(-6.3), 7)
    whole = joined_rollout(window, continuation("_x", logprobs=[-1.0], stop_reason=END), END)
    assert (whole.text, whole.finish_reason, whole.stop_reason) == ("x = 2 <end_of_x", "stop", END)


# --- (b) the anytime-valid answer stop, beside or instead of eq. 12 -------------------------------

def test_anytime_stop_certifies_four_agreeing_rollouts_at_alpha_0_6():
    # every rollout answers 1: t = 0 two draws, E(1, 0) = 3/2; t = 1 four, E(3, 0) = 15/4 >= 2/0.6 = 3.33
    result, _ = run(rollouts=AGREEING, max_steps=3, answer_stop_alpha=0.6, vote_rollouts=True)
    assert (result.stop_reason, len(result.steps)) == ("answer_certified", 2)  # t = 2 lacks a script: not reached
    assert (result.answer, result.vote_share, len(result.completions)) == ("1", 1.0, 4)
    assert result.search_settings["answer_stop_alpha"] == 0.6
    assert_trace(json.loads(result.to_json()))
    strict, _ = run(rollouts=AGREEING, answer_stop_alpha=0.5, vote_rollouts=True)  # 15/4 < 2/0.5 = 4
    assert strict.stop_reason == "max_steps"


# One distinct path per step: the root's 4 candidates are all "a"; from "Q:a\n" both "x".
UNANIMOUS_STEPS = {"Q:": [("a", -0.1)] * 4, "Q:a\n": [("x", -0.2)] * 2}
UNANIMOUS_ROLLOUTS = {"Q:a\n": ("The answer is: \\boxed{1}.", -0.2), "Q:a\nx\n": ("The answer is: \\boxed{1}.", -0.3)}


def test_convergence_stop_off_leaves_eq_12_out():
    # t = 1: the one path "a x" has V = -0.3 - (-0.2) = -0.1 <= ε_stop: eq. 12 fires, unless switched off
    paper, _ = run(UNANIMOUS_STEPS, UNANIMOUS_ROLLOUTS)
    assert (paper.stop_reason, paper.steps[1].converged) == ("converged", True)
    off, _ = run(UNANIMOUS_STEPS, UNANIMOUS_ROLLOUTS, convergence_stop=False)
    assert (off.stop_reason, off.steps[1].converged) == ("max_steps", False)
    assert off.search_settings["convergence_stop"] is False
    assert_trace(json.loads(off.to_json()))


def test_copies_that_share_one_rollout_are_one_draw():
    # t = 0: 4 copies of "a", one rollout; t = 1: 2 copies of "a x", one rollout: 2 draws, E(1, 0) = 3/2 < 3.33.
    # Counted per copy (4, then 6) the stop would fire at t = 0 (E(3, 0) = 15/4).
    result, _ = run(UNANIMOUS_STEPS, UNANIMOUS_ROLLOUTS, convergence_stop=False, answer_stop_alpha=0.6, min_steps=0,
                    vote_rollouts="weighted")
    assert result.stop_reason == "max_steps"
    assert result.completion_weights == [4.0, 4.0]  # the vote still weighs the copies


# --- (c) the quality-weighted vote ------------------------------------------------------------------

def test_quality_weighted_vote_over_the_kept_beams():
    result, _ = run(vote_quality_beta=4.0)
    # answers 1 (F -0.1) and 2 (F -0.35): weights 1 and exp(4 · -0.25) = exp(-1)
    assert result.completion_weights == pytest.approx([1.0, math.exp(-1.0)])
    assert (result.answer, result.vote_share) == ("1", pytest.approx(1 / (1 + math.exp(-1.0))))
    assert_trace(json.loads(result.to_json()))


def test_quality_weighted_vote_over_every_rollout():
    result, _ = run(vote_quality_beta=4.0, vote_rollouts=True)
    # F -0.2 (1), -0.4 (2), -0.1 (1), -0.35 (2): weights exp(4 (F + 0.1)); plain, it is a 2-2 tie
    weights = [math.exp(-0.4), math.exp(-1.2), 1.0, math.exp(-1.0)]
    assert result.completion_weights == pytest.approx(weights)
    assert (result.answer, result.vote_share) == ("1", pytest.approx((weights[0] + 1.0) / sum(weights)))
    assert_trace(json.loads(result.to_json()))


# --- (d) sc and esc ---------------------------------------------------------------------------------

def answering(answers_by_call):
    """A backend whose i-th call returns, for its one request, the (answer, mean log-prob) pairs
    ``answers_by_call[i]`` (cycled to the request's n)."""
    calls = iter(answers_by_call)

    def script(request):
        pairs = next(calls)
        return [continuation(f"The answer is: \\boxed{{{a}}}.", mean_logprob=lp, stop_reason=END)
                for a, lp in (pairs * request.n)[: request.n]]

    return ScriptedBackend(script, num_parameters=1000)


def decode(method, backend, **fields):
    return MFSEngine(backend, MFSSettings(prompt_format="raw", **fields)).decode(["Q:"], method=method)[0]


def test_sc_in_rounds_stops_once_an_answer_is_certified():
    backend = answering([[("7", -0.2)]] * 3)
    result = decode("sc", backend, num_samples=6, sc_round_size=2, answer_stop_alpha=0.6)
    # 2 answers: E(1, 0) = 3/2; 4 answers: E(3, 0) = 15/4 >= 3.33: stop before the third round
    assert [r.n for call in backend.calls for r in call] == [2, 2]
    assert (result.stop_reason, len(result.completions), result.answer) == ("answer_certified", 4, "7")
    plain_backend = answering([[("7", -0.2)]])
    plain = decode("sc", plain_backend, num_samples=6)
    assert plain.stop_reason == "sampled" and [r.n for r in plain_backend.requests] == [6]
    assert backend.requests[0].seed == plain_backend.requests[0].seed  # the first round draws the one-request seed


def test_sc_quality_weighted_vote_can_elect_a_minority_answer():
    pairs = [[("7", -0.5), ("7", -0.5), ("8", -0.1)]]
    assert decode("sc", answering(pairs), num_samples=3).answer == "7"
    weighted = decode("sc", answering(pairs), num_samples=3, vote_quality_beta=10.0)
    # 7: 2 · exp(10 · -0.4) = 0.037; 8: 1
    assert weighted.completion_weights == pytest.approx([math.exp(-4.0), math.exp(-4.0), 1.0])
    assert (weighted.answer, weighted.vote_share) == ("8", pytest.approx(1 / (1 + 2 * math.exp(-4.0))))


def test_esc_with_alpha_replaces_the_unanimity_test():
    unanimous = decode("esc", answering([[("7", -0.2)]] * 4), esc_window=2, esc_max_samples=8)
    assert (unanimous.stop_reason, len(unanimous.steps)) == ("unanimous_window", 1)
    result = decode("esc", answering([[("7", -0.2)]] * 4), esc_window=2, esc_max_samples=8, answer_stop_alpha=0.6)
    # window 1: E(1, 0) = 3/2 < 3.33 although unanimous; window 2: E(3, 0) = 15/4: certified
    assert (result.stop_reason, len(result.steps), len(result.completions)) == ("answer_certified", 2, 4)
    assert [step.converged for step in result.steps] == [False, True]
    assert "not certified (e-value 1.5 < 3.33): sample 2 more" in result.steps[0].note
    assert result.search_settings["answer_stop_alpha"] == 0.6
