"""The added search rules (``vote_rollouts``, ``answer_stop_confidence``, ``convergence_min_paths``) against a
scripted backend, with hand-computed numbers.

The scenario of ``tests/mfs_scenario.py``, worked out in ``test_mfs_decoder.py`` (raw prompt "Q:", M = 2,
N = 2, λ1 = 0.4): at t = 0 the survivors a and b get rollouts answering 1 (F = -0.2) and 2 (F = -0.4);
at t = 1 the survivors a2 and b2 get rollouts answering 1 (F = -0.1) and 2 (F = -0.35).
V(a2) = +0.1, V(b2) = +0.05.
"""

from __future__ import annotations

import json
import math

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.answers import majority_vote
from mfs_core.bench.runner import score_result
from mfs_core.decoders import PAPER_RULES
from mfs_core.martingale import effective_counts, lead_probability
import experiments.variants  # noqa: F401  (the variants by name)
from tests.mfs_scenario import END, ROLLOUTS, STEP_STOP, STEPS, scripted_model
from tests.scripted import ScriptedBackend, continuation
from tests.trace_invariants import assert_trace

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


def test_only_the_cooler_rollouts_are_on_by_default():
    settings = MFSSettings()
    assert (settings.vote_rollouts, settings.answer_stop_confidence, settings.convergence_min_paths) == (False, None, 1)
    assert (settings.temperature, settings.rollout_temperature) == (0.7, 0.5)
    assert PAPER_RULES == {"vote_rollouts": False, "answer_stop_confidence": None, "convergence_min_paths": 1,
                           "rollout_temperature": None}


@pytest.mark.parametrize(("method", "rollout_temperature"), [
    ("mfs", 0.5), ("mfs-same-temperature", 0.7), ("mfs-paper", 0.7), ("mfs-shared", 0.7), ("mfs-min-paths", 0.5)])
def test_candidates_sample_at_temperature_and_rollouts_at_rollout_temperature(method, rollout_temperature):
    steps = {"Q:": [("1 + 1 = 2", -0.1), ("1 + 1 = 3", -0.9)],
             "Q:1 + 1 = 2\n": [("The answer is 2.", -0.1, END)] * 2, "Q:1 + 1 = 3\n": [("The answer is 3.", -0.2, END)] * 2}
    rollouts = {"Q:1 + 1 = 2\n": ("The answer is 2.", -0.1), "Q:1 + 1 = 3\n": ("The answer is 3.", -0.4)}
    backend = scripted_steps(steps, rollouts)
    settings = MFSSettings(step_beam_size=1, num_rollouts=2, width_pruning=False, max_steps=2)
    result = MFSEngine(backend, settings).decode_prompts(["Q:"], method=method)[0]
    assert result.method == method
    candidates = {r.temperature for r in backend.requests if r.stop == STEP_STOP}
    rollouts_and_completions = {r.temperature for r in backend.requests if r.stop != STEP_STOP}
    assert candidates == {0.7} and rollouts_and_completions == {rollout_temperature}


def test_bad_rule_settings_name_the_value_and_range():
    with pytest.raises(ValueError, match="answer_stop_confidence"):
        MFSSettings(answer_stop_confidence=0.4)
    with pytest.raises(ValueError, match="convergence_min_paths"):
        MFSSettings(convergence_min_paths=0)


# --- the weighted rollout vote (vote_rollouts="weighted") ---------------------------------------

def scripted_steps(steps, rollouts):
    """A scripted model whose step options are (text, step log-prob[, stop string]): a step stopped
    by the end marker is a finished candidate."""
    def script(request):
        if request.stop == STEP_STOP:
            options = steps[request.prompt]
            assert request.n == len(options), (request.prompt, request.n)
            return [continuation(o[0], logprobs=[o[1]] * 2, stop_reason=o[2] if len(o) > 2 else "\n") for o in options]
        text, lp = rollouts[request.prompt]
        return [continuation(text, logprobs=[lp] * 4, stop_reason=END)] * request.n

    return ScriptedBackend(script, num_parameters=1000)


def run_steps(steps, rollouts, **overrides):
    engine = MFSEngine(scripted_steps(steps, rollouts), MFSSettings(**{**BASE, **overrides}))
    return engine.decode(["Q:"])[0]


# t = 0 (one request, n = M·N = 4): "a" twice, "b" once (all three at step log-prob -0.2, so σ = 0
# and all survive) and one finished candidate answering 2 at -0.9. One rollout per distinct path:
# a -> 1 (F -0.2), b -> 2 (F -0.4). The path a was sampled twice.
COPIES_STEPS = {"Q:": [("a", -0.2), ("a", -0.2), ("The answer is: \\boxed{2}.", -0.9, END), ("b", -0.2)]}
COPIES_ROLLOUTS = {"Q:a\n": ("The answer is: \\boxed{1}.", -0.2), "Q:b\n": ("The answer is: \\boxed{2}.", -0.4)}
COPIES_COMPLETIONS = ["The answer is: \\boxed{2}.", "a\nThe answer is: \\boxed{1}.", "b\nThe answer is: \\boxed{2}."]


def test_weighted_vote_counts_a_shared_rollout_once_per_copy():
    once = run_steps(COPIES_STEPS, COPIES_ROLLOUTS, max_steps=1, vote_rollouts=True)
    weighted = run_steps(COPIES_STEPS, COPIES_ROLLOUTS, max_steps=1, vote_rollouts="weighted")
    assert once.completions == weighted.completions == COPIES_COMPLETIONS
    # once: 1 has 1 vote, 2 has 2 (the finished candidate and b's rollout) -> 2 with 2/3
    assert (once.answer, once.vote_share, once.completion_weights) == ("2", pytest.approx(2 / 3), [])
    # weighted: 1 has 2 votes (a's two copies), 2 has 1 + 1; the tie goes to the higher F (-0.2 > -0.4)
    assert weighted.completion_weights == [1.0, 2.0, 1.0]
    assert (weighted.answer, weighted.vote_share) == ("1", 0.5)
    assert weighted.output_tokens == once.output_tokens and weighted.completion_tokens == 0
    assert weighted.search_settings["vote_rollouts"] == "weighted"
    assert_trace(json.loads(weighted.to_json()))
    assert_trace(json.loads(once.to_json()))


def test_weighted_vote_splits_a_copy_over_its_rollouts():
    # foresight_rollouts = 2: each of a's two rollouts stands for one of its 2 copies, b's for half of 1
    result = run_steps(COPIES_STEPS, COPIES_ROLLOUTS, max_steps=1, vote_rollouts="weighted", foresight_rollouts=2)
    assert result.completion_weights == [1.0, 1.0, 1.0, 0.5, 0.5]
    assert (result.answer, result.vote_share) == ("1", 0.5)  # 1: 2 votes, 2: 1 + 0.5 + 0.5, tie by F


def test_the_bench_scores_a_weighted_vote_by_its_weights():
    weighted = run_steps(COPIES_STEPS, COPIES_ROLLOUTS, max_steps=1, vote_rollouts="weighted")
    settings = MFSSettings(**{**BASE, "vote_rollouts": "weighted"})
    assert score_result("demo", weighted, "1", settings, "mfs-weighted-vote") == ("1", True)
    assert score_result("demo", weighted, "2", settings, "mfs-weighted-vote") == ("1", False)


def test_weighted_answer_stop_reads_the_effective_sample_size_not_the_copies():
    # Every candidate is a copy of one path: t = 0 has one rollout for 4 copies (weight 4), t = 1
    # another for 4 (the two beams are copies of "a"). Kish: n_eff = W^2 / sum(w^2) = 16/16 = 1 at
    # t = 0 (P = 3/4) and 64/32 = 2 at t = 1 (P = 7/8): what two rollouts tell, as with the once-vote.
    # Read as 4 and 8 draws (P = 31/32 already at t = 0) the stop would fire on the copies alone.
    kw = dict(rollouts=UNANIMOUS_ROLLOUTS, answer_stop_confidence=0.85, min_steps=0, convergence_min_paths=2,
              max_steps=3)
    weighted, _ = run(UNANIMOUS_STEPS, vote_rollouts="weighted", **kw)
    once, _ = run(UNANIMOUS_STEPS, vote_rollouts=True, **kw)
    for result in (weighted, once):
        assert (result.stop_reason, len(result.steps)) == ("answer_decided", 2)
    assert weighted.completion_weights == [4.0, 4.0]
    assert (weighted.answer, weighted.vote_share) == ("1", 1.0)
    assert_trace(json.loads(weighted.to_json()))


@pytest.mark.parametrize(("counts", "expected"), [
    ([1.5, 0], 1 - 2 ** -2.5),  # Beta(2.5, 1): P(p > 1/2) = 1 - 0.5^2.5
    ([0.5, 0.5], 0.5),  # Beta(1.5, 1.5) is symmetric
    ([0, 2.5], 1 - 2 ** -3.5),  # order does not matter
    ([3 + 1e-9, 1], 26 / 32),  # the continued fraction agrees with the exact integer sum
    ([10 + 1e-9, 4, 1], sum(math.comb(15, j) for j in range(11)) / 2 ** 15),
    ([40 + 1e-9, 35], sum(math.comb(76, j) for j in range(41)) / 2 ** 76),  # 1e-9 moves P by < 1e-9
])
def test_lead_probability_of_real_counts(counts, expected):
    assert lead_probability(counts) == pytest.approx(expected, rel=1e-8)


def test_effective_counts_scale_to_kish_effective_sample_size():
    # answers 1, 2, 2 with weights 3, 1, 1: W = 5, sum(w^2) = 11, n_eff = 25/11; counts [3, 2] -> [15/11, 10/11]
    assert effective_counts([3, 2], [3, 1, 1]) == pytest.approx([15 / 11, 10 / 11])
    assert effective_counts([2, 1], [1, 1, 1]) == [2.0, 1.0]  # equal weights: the counts
    assert effective_counts([], []) == []


def test_weighted_majority_vote():
    vote = majority_vote(["1", "2", "2", None], [-0.5, -0.1, -0.2, 0.0], [3, 1, 1, 1])
    assert (vote.answer, vote.vote_share, vote.index) == ("1", 0.5, 0)  # 3 of the 6 votes
    tie = majority_vote(["1", "2"], [-0.5, -0.1], [2.0, 2.0])
    assert (tie.answer, tie.index) == ("2", 1)  # equal votes: the higher F
    with pytest.raises(ValueError, match=r"vote weights must be 2 numbers >= 0, got \[1, -1\]"):
        majority_vote(["1", "2"], [0.0, 0.0], [1, -1])
    with pytest.raises(ValueError, match=r"vote weights must be 2 numbers >= 0, got \[1\]"):
        majority_vote(["1", "2"], [0.0, 0.0], [1])


def test_vote_rollouts_takes_false_true_or_weighted():
    assert MFSSettings(vote_rollouts="weighted").vote_rollouts == "weighted"
    assert MFSSettings(vote_rollouts=True).vote_rollouts is True
    with pytest.raises(ValueError, match="vote_rollouts"):
        MFSSettings(vote_rollouts="once")


def test_vote_rollouts_from_the_environment(monkeypatch):
    monkeypatch.setenv("MFS_VOTE_ROLLOUTS", "weighted")
    assert MFSSettings().vote_rollouts == "weighted"
    monkeypatch.setenv("MFS_VOTE_ROLLOUTS", "true")
    assert MFSSettings().vote_rollouts is True


def test_the_weighted_variants_set_the_weighted_vote():
    engine = MFSEngine(scripted_steps(COPIES_STEPS, COPIES_ROLLOUTS), MFSSettings(**{**BASE, "max_steps": 1}))
    vote = engine.decode(["Q:"], method="mfs-weighted-vote")[0]
    assert (vote.completion_weights, vote.search_settings["answer_stop_confidence"]) == ([1.0, 2.0, 1.0], None)
    stop = engine.decode(["Q:"], method="mfs-weighted-answer-stop")[0]
    assert (stop.search_settings["vote_rollouts"], stop.search_settings["answer_stop_confidence"]) == ("weighted", 0.95)


def _tuning_rule():
    from experiments.benchmarks.mfs_rules import tuning_verdict

    return tuning_verdict


def test_the_pre_registered_tuning_rule():
    verdict = _tuning_rule()
    sc = [(908.0, 0.63), (1815.0, 0.73)]
    # SC at 1,300 tokens: 0.63 + 0.10 * ln(1300/908) / ln(1815/908) = 0.68182
    kept, margins = verdict((145, 1856.0), {"v": (146, 1300.0)}, 200, sc)
    assert kept == "v"
    assert margins["mfs"] == pytest.approx(0.725 - 0.73) and margins["v"] == pytest.approx(0.73 - 0.681815, abs=1e-5)
    # fewer right answers than the default: not kept, whatever the margin
    assert verdict((145, 1856.0), {"v": (144, 300.0)}, 200, sc)[0] == "mfs"
    # as many right at more tokens: the margin is not larger (SC is flat past 1,815), the default stays
    assert verdict((145, 1856.0), {"v": (145, 3000.0)}, 200, sc)[0] == "mfs"
    # two pass: the larger margin (w: 0.80 - 0.7288 = +0.071 against v's +0.048)
    assert verdict((145, 1856.0), {"v": (146, 1300.0), "w": (160, 1800.0)}, 200, sc)[0] == "w"
    assert verdict((145, 1856.0), {"v": (146, 1300.0), "w": (150, 1800.0)}, 200, sc)[0] == "v"  # w: +0.021
