"""The search rules of issue 35 against a scripted backend, with hand-computed numbers.

The scenario of ``test_mfs_decoder.py`` (raw prompt "Q:", M = 2, N = 2, λ1 = 0.4): at t = 0 the
survivors a and b get rollouts answering 1 (F = -0.2) and 2 (F = -0.4); at t = 1 the survivors a2
and b2 get rollouts answering 1 (F = -0.1) and 2 (F = -0.35). V(a2) = +0.1, V(b2) = +0.05.
"""

from __future__ import annotations

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.decoders import PAPER_RULES
from mfs_core.martingale import lead_probability
from tests.unit.test_mfs_decoder import ROLLOUTS, STEPS, scripted_model

AGREEING = {prompt: ("The answer is: \\boxed{1}.", lp) for prompt, (_, lp) in ROLLOUTS.items()}
BASE = dict(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2, seed=0,
            **PAPER_RULES)  # each test switches on the rules it is about


def run(steps=STEPS, rollouts=ROLLOUTS, **overrides):
    backend = scripted_model(steps, rollouts)
    engine = MFSEngine(backend, MFSSettings(**{**BASE, **overrides}))
    return engine.decode(["Q:"])[0], backend


@pytest.mark.parametrize(("counts", "expected"), [
    ([], 0.5), ([0], 0.5), ([1, 1], 0.5), ([1], 3 / 4), ([2], 7 / 8), ([4, 0], 31 / 32), ([5], 63 / 64),
    # v1 = 3, v2 = 1: P(Bin(5, 1/2) <= 3) = (1 + 5 + 10 + 10) / 32; a third answer does not count
    ([1, 3, 1], 26 / 32),
])
def test_lead_probability_is_the_beta_posterior_of_the_top_two(counts, expected):
    assert lead_probability(counts) == pytest.approx(expected)


def test_lead_probability_refuses_negative_counts():
    with pytest.raises(ValueError, match="vote counts must be >= 0, got \\[2, -1\\]"):
        lead_probability([2, -1])


def test_vote_rollouts_puts_every_rollout_to_the_vote_at_no_extra_tokens():
    paper, paper_backend = run()
    result, backend = run(vote_rollouts=True)
    assert result.completions == [
        "a\nThe answer is: \\boxed{1}.", "b\nThe answer is: \\boxed{2}.",
        "a\na2\nThe answer is: \\boxed{1}.", "b\nb2\nThe answer is: \\boxed{2}.",
    ]
    assert result.completion_qualities == pytest.approx([-0.2, -0.4, -0.1, -0.35])
    # 2 votes each; the tie goes to the answer with the highest F (-0.1)
    assert (result.answer, result.vote_share) == ("1", 0.5)
    assert paper.completions == ["a\na2\nThe answer is: \\boxed{1}.", "b\nb2\nThe answer is: \\boxed{2}."]
    assert result.output_tokens == paper.output_tokens
    assert len(backend.calls) == len(paper_backend.calls)
    assert result.search_settings["vote_rollouts"] is True


def test_answer_stop_ends_the_search_once_the_vote_is_decided():
    # All rollouts answer 1: after t = 0 two votes (P = 7/8), after t = 1 four (P = 31/32).
    result, _ = run(rollouts=AGREEING, max_steps=3, answer_stop_confidence=0.95, vote_rollouts=True)
    assert result.stop_reason == "answer_decided"
    assert len(result.steps) == 2  # t = 2 would ask for steps from "Q:a\na2\n", which the script lacks
    assert (result.answer, result.vote_share, len(result.completions)) == ("1", 1.0, 4)


def test_answer_stop_waits_for_min_steps_and_its_confidence():
    early, _ = run(rollouts=AGREEING, answer_stop_confidence=0.85, min_steps=0)
    assert (early.stop_reason, len(early.steps)) == ("answer_decided", 1)  # 7/8 >= 0.85 at t = 0
    late, _ = run(rollouts=AGREEING, answer_stop_confidence=0.85, min_steps=1)
    assert (late.stop_reason, len(late.steps)) == ("answer_decided", 2)
    never, _ = run(rollouts=AGREEING, answer_stop_confidence=0.99)
    assert never.stop_reason == "max_steps"
    # without vote_rollouts the kept beams are completed by their own rollouts, as before
    assert late.completions == ["a\na2\nThe answer is: \\boxed{1}.", "b\nb2\nThe answer is: \\boxed{1}."]


# One distinct path per step: the root's 4 candidates are all "a"; from "Q:a\n" both "x".
UNANIMOUS_STEPS = {"Q:": [("a", -0.1)] * 4, "Q:a\n": [("x", -0.2)] * 2}
UNANIMOUS_ROLLOUTS = {"Q:a\n": ("The answer is: \\boxed{1}.", -0.2), "Q:a\nx\n": ("The answer is: \\boxed{1}.", -0.3)}


def test_convergence_needs_two_distinct_paths_with_convergence_min_paths():
    # t = 1: the one distinct path "a x" has V = -0.3 - (-0.2) = -0.1 <= ε_stop.
    paper, _ = run(UNANIMOUS_STEPS, UNANIMOUS_ROLLOUTS, convergence_min_paths=1)
    assert (paper.stop_reason, paper.steps[1].converged) == ("converged", True)
    assert paper.steps[1].max_step_value == pytest.approx(-0.1)
    compared, _ = run(UNANIMOUS_STEPS, UNANIMOUS_ROLLOUTS, convergence_min_paths=2)
    assert (compared.stop_reason, compared.steps[1].converged) == ("max_steps", False)
    assert compared.text.startswith("a\nx\n")


def test_the_rules_are_off_by_default_and_on_in_their_variants():
    settings = MFSSettings()
    assert (settings.vote_rollouts, settings.answer_stop_confidence, settings.convergence_min_paths) == (False, None, 1)
    assert PAPER_RULES == {"vote_rollouts": False, "answer_stop_confidence": None, "convergence_min_paths": 1}


def test_bad_rule_settings_name_the_value_and_range():
    with pytest.raises(ValueError, match="answer_stop_confidence"):
        MFSSettings(answer_stop_confidence=0.4)
    with pytest.raises(ValueError, match="convergence_min_paths"):
        MFSSettings(convergence_min_paths=0)
