"""φ-Decoding against a scripted backend, with numbers checked by hand.

Hand calculations are in the comments: μ and σ are the mean and population standard
deviation of the step scores, weights are softmax values computed from e^x.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mfs_core.decoders.phi import (
    PhiConfig,
    _choose_final,
    _draw,
    cluster_labels,
    decode_phi,
    phi_selection_weights,
    phi_width_prune,
)
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest
from tests.scripted import ScriptedBackend, continuation, drive

pytest.importorskip("sklearn")

END = "<end_of_reasoning>"


def _settings(**overrides: object) -> MFSSettings:
    return MFSSettings(**{"step_beam_size": 2, "num_rollouts": 2, "max_steps": 1, "seed": 0, **overrides})


def _run(backend: ScriptedBackend, settings: MFSSettings, prompt: str = "Q: ") -> object:
    return MFSEngine(backend, settings).decode_prompts([prompt], method="phi")[0]


def _is_step(request: GenerationRequest) -> bool:
    return "\n" in request.stop


# --- width pruning and top-up -------------------------------------------------------------
def test_width_pruning_keeps_scores_above_mean_minus_sigma() -> None:
    # μ = (-0.1 - 0.2 - 0.3 - 3.0) / 4 = -0.9; deviations 0.8, 0.7, 0.6, -2.1;
    # σ² = (0.64 + 0.49 + 0.36 + 4.41) / 4 = 1.475, σ = 1.21450; threshold = -2.11450.
    kept, mean, std = phi_width_prune([-0.1, -0.2, -0.3, -3.0], 2, 1.0, 0.1, np.random.default_rng(0))
    assert kept == [0, 1, 2]
    assert mean == pytest.approx(-0.9)
    assert std == pytest.approx(math.sqrt(1.475))


def test_equal_scores_are_all_pruned_then_topped_up_to_m() -> None:
    # σ = 0, so no score is strictly above μ - σ; the release then tops up to M by sampling.
    kept, _, std = phi_width_prune([-0.5] * 6, 3, 1.0, 0.1, np.random.default_rng(1))
    assert std == 0.0
    assert len(kept) == 3
    assert kept == sorted(set(kept))


def test_top_up_draws_by_softmax_of_score_over_0_1() -> None:
    # μ = -2.1 / 8 = -0.2625, σ = 0.45535, threshold -0.71785: the six zeros survive.
    # One slot of M = 7 is left for {-1.0, -1.1}: P(-1.0) = e^-10 / (e^-10 + e^-11) = 1 / (1 + e^-1) = 0.73106.
    scores = [0.0] * 6 + [-1.0, -1.1]
    picks = []
    for seed in range(4000):
        kept, _, _ = phi_width_prune(scores, 7, 1.0, 0.1, np.random.default_rng(seed))
        assert kept[:6] == [0, 1, 2, 3, 4, 5] and len(kept) == 7
        picks.append(kept[6])
    share = picks.count(6) / len(picks)
    assert share == pytest.approx(0.73106, abs=0.03)  # 4 standard errors


# --- cluster-weighted selection -----------------------------------------------------------
def test_selection_weights_combine_cluster_share_and_advantage() -> None:
    # Cluster shares [2/3, 2/3, 1/3]: softmax = [e^(2/3), e^(2/3), e^(1/3)] / 5.29108 = [0.36812, 0.36812, 0.26377].
    # Advantages / 0.1 = [-5, -4, -10]: softmax = [0.26845, 0.72974, 0.00181].
    weights = phi_selection_weights(np.array([0, 0, 1]), [-0.5, -0.4, -1.0], 0.1)
    assert weights == pytest.approx([0.318286, 0.548926, 0.132788], abs=1e-6)
    assert weights.sum() == pytest.approx(1.0)
    # Without clusters the weights are softmax(advantage / 0.1) alone.
    assert phi_selection_weights(None, [-0.5, -0.4, -1.0], 0.1) == pytest.approx([0.268455, 0.729736, 0.001809], abs=1e-6)


def test_tfidf_kmeans_puts_equal_texts_together() -> None:
    labels = cluster_labels(["the answer is seven", "the answer is seven", "banana split dessert recipe"], 3, seed=0)
    assert labels is not None
    assert labels[0] == labels[1] != labels[2]
    assert cluster_labels(["only two", "texts here"], 3, seed=0) is None  # fewer texts than clusters
    assert cluster_labels(["", " ", "  "], 3, seed=0) is None  # no words to vectorise


def _scenario_backend() -> ScriptedBackend:
    """M = N = 2, one step: candidates a1, a2 (beam 0), b1, b2 (beam 1); call 3 is the final one."""
    steps = [
        [continuation("a1", mean_logprob=-0.1, stop_reason="\n"), continuation("a2", mean_logprob=-0.2, stop_reason="\n")],
        [continuation("b1", mean_logprob=-0.3, stop_reason="\n"), continuation("b2", mean_logprob=-3.0, stop_reason="\n")],
    ]
    rollouts = {"a1": ("x y z The answer is 7", -0.5), "a2": ("x y z The answer is 7", -0.4),
                "b1": ("completely different words here", -1.0)}

    def script(request: GenerationRequest) -> list:
        if _is_step(request):
            return steps.pop(0)
        if backend.num_calls == 2:  # rollouts: prompt + candidate + delimiter
            text, quality = rollouts[request.prompt.removeprefix("Q: ").removesuffix("\n")]
            return [continuation(text, mean_logprob=quality, stop_reason=END)]
        return [continuation("The answer is: \\boxed{7}.", mean_logprob=-0.3, num_tokens=5, stop_reason=END)]

    backend = ScriptedBackend(script)
    return backend


def test_one_step_prunes_rolls_out_and_selects_with_hand_checked_values() -> None:
    backend = _scenario_backend()
    result = _run(backend, _settings())
    # Calls: candidates, rollouts, final completions.
    assert backend.num_calls == 3
    step_calls, rollout_calls, final_calls = backend.calls
    assert [(r.prompt, r.n, r.stop) for r in step_calls] == [("Q: ", 2, ("\n", END))] * 2
    assert [r.prompt for r in rollout_calls] == ["Q: a1\n", "Q: a2\n", "Q: b1\n"]  # b2 pruned: no rollout
    step = result.steps[0]
    assert step.mean_score == pytest.approx(-0.9)
    assert step.std_score == pytest.approx(math.sqrt(1.475))
    assert step.prune_threshold == pytest.approx(-0.9 - math.sqrt(1.475))
    assert [c.pruned for c in step.candidates] == [False, False, False, True]
    assert [c.foresight_quality for c in step.candidates] == [-0.5, -0.4, -1.0, None]
    assert [c.step_value for c in step.candidates] == [-0.5, -0.4, -1.0, None]  # root value is 0
    assert step.max_step_value == pytest.approx(-0.4)
    selected = [c.text for c in step.candidates if c.selected]
    assert len(selected) == 2 and len(set(selected)) == 2
    assert sorted(r.prompt for r in final_calls) == sorted(f"Q: {t}\n" for t in selected)
    # Tokens: 4 one-token steps, rollouts of 7 + 7 + 4 words, 2 finals of 5 tokens.
    assert result.output_tokens == 4 + 18 + 10
    assert result.prompt_tokens == 2 * 1 + 3 * 2 + 2 * 2
    assert result.flops == 6.0 * 32 * backend.num_parameters
    assert result.stop_reason == "max_steps"
    assert result.answer == "7"
    assert result.method == "phi"
    assert result.completions == [f"{r.prompt[len('Q: '):]}The answer is: \\boxed{{7}}." for r in final_calls]
    assert result.completion_qualities == [-0.3, -0.3]


def test_beams_are_drawn_without_replacement_by_the_combined_weights() -> None:
    # The first of M = 2 draws follows the weights [0.31829, 0.54893, 0.13279] (see above);
    # the second is another candidate. 4000 draws: 4 standard errors are 0.029, 0.031, 0.021.
    weights = phi_selection_weights(np.array([0, 0, 1]), [-0.5, -0.4, -1.0], 0.1)
    draws = [_draw(weights, 2, np.random.default_rng(seed)) for seed in range(4000)]
    assert all(len(set(d)) == 2 for d in draws)
    firsts = np.bincount([d[0] for d in draws], minlength=3) / len(draws)
    assert firsts == pytest.approx([0.31829, 0.54893, 0.13279], abs=0.031)


def test_top_up_gives_every_candidate_a_rollout_when_n_is_1() -> None:
    # M = 3, N = 1, scores [0, -0.1, -2.0]: μ = -0.7, σ = 0.92014, threshold -1.62014 prunes -2.0,
    # leaving 2 < M, so the top-up brings it back.
    scores = iter([0.0, -0.1, -2.0])

    def step_script(request: GenerationRequest) -> list:
        if _is_step(request):
            value = next(scores)
            return [continuation(f"s{value}", mean_logprob=value, stop_reason="\n")]
        return [continuation("The answer is: \\boxed{1}.", mean_logprob=-0.5, stop_reason=END)]

    backend = ScriptedBackend(step_script)
    result = _run(backend, _settings(step_beam_size=3, num_rollouts=1))
    step = result.steps[0]
    assert step.prune_threshold == pytest.approx(-0.7 - 0.9201449161)
    assert [c.pruned for c in step.candidates] == [False, False, False]
    assert len(backend.calls[1]) == 3


# --- depth pruning ------------------------------------------------------------------------
def _deep_script(rollout_texts: list[str], step_scores: tuple[float, ...] = (-0.1, -0.2, -0.3)) -> ScriptedBackend:
    """Step j of each beam ``s{depth}-{j}`` scores ``step_scores[j]``; the r-th rollout of a call
    reads ``rollout_texts[r]`` (cycled) with quality -1 + 0.1·depth."""

    def script(request: GenerationRequest) -> list:
        depth = request.prompt.count("\n")
        if _is_step(request):
            return [continuation(f"s{depth}-{j}", mean_logprob=step_scores[j], stop_reason="\n") for j in range(request.n)]
        position = next(i for i, r in enumerate(backend.calls[-1]) if r is request)
        return [continuation(rollout_texts[position % len(rollout_texts)], mean_logprob=-1.0 + 0.1 * depth, stop_reason=END)]

    backend = ScriptedBackend(script)
    return backend


def test_identical_rollouts_stop_after_min_depth_and_the_last_step_is_discarded() -> None:
    backend = _deep_script(["The answer is: \\boxed{4}."])
    result = _run(backend, _settings(max_steps=8), prompt="Q:")
    assert PhiConfig().min_depth == 4
    assert len(result.steps) == 5  # steps 0-3 cannot stop; step 4 does
    assert [s.converged for s in result.steps] == [False, False, False, False, True]
    assert result.stop_reason == "identical_rollouts"
    assert backend.num_calls == 5 * 2 + 1
    assert not any(c.selected for c in result.steps[-1].candidates)
    # The final completions continue the beams chosen at step 3: four steps each.
    assert [r.prompt.count("\n") for r in backend.calls[-1]] == [4, 4]
    # Advantage = rollout quality - parent's rollout quality: -0.9 at step 0 (root 0), then 0.1.
    values = [sorted({round(c.step_value, 9) for c in s.candidates if c.step_value is not None}) for s in result.steps]
    assert values[0] == [-0.9]
    assert all(v == [0.1] for v in values[1:])


@pytest.mark.parametrize(("threshold", "stops"), [(0.69, True), (0.75, True), (0.76, False)])
def test_largest_cluster_share_against_the_threshold(threshold: float, stops: bool) -> None:
    # M = 2, N = 3, step scores [-0.1, -0.1, -0.4] per beam: μ = -0.2, σ = 0.14142, threshold
    # -0.34142 keeps the four -0.1 steps. Their rollouts: three alike, one not: share 3/4 = 0.75.
    backend = _deep_script(["the answer is four"] * 3 + ["a banana split recipe"], step_scores=(-0.1, -0.1, -0.4))
    settings = _settings(step_beam_size=2, num_rollouts=3, max_steps=6)
    result = drive(decode_phi("Q:", settings, PhiConfig(depth_threshold=threshold)), backend)
    assert all(sum(not c.pruned for c in s.candidates) == 4 for s in result.steps)
    if stops:
        assert result.stop_reason == "cluster_converged"
        assert len(result.steps) == 5
        assert [r.prompt.count("\n") for r in backend.calls[-1]] == [4, 4]
    else:
        assert result.stop_reason == "max_steps"
        assert len(result.steps) == 6
        assert [r.prompt.count("\n") for r in backend.calls[-1]] == [6, 6]


def test_min_depth_is_configurable() -> None:
    backend = _deep_script(["The answer is: \\boxed{4}."])
    result = drive(decode_phi("Q:", _settings(max_steps=8), PhiConfig(min_depth=1)), backend)
    assert len(result.steps) == 2
    assert result.stop_reason == "identical_rollouts"


def test_dissimilar_rollouts_run_to_max_steps() -> None:
    texts = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta", "iota kappa", "lambda mu"]
    backend = _deep_script(texts)
    result = _run(backend, _settings(step_beam_size=3, num_rollouts=2, max_steps=6), prompt="Q:")
    assert result.stop_reason == "max_steps"
    assert len(result.steps) == 6
    assert backend.num_calls == 6 * 2 + 1


# --- final choice -------------------------------------------------------------------------
def test_final_choice_takes_the_larger_cluster_over_a_higher_advantage() -> None:
    settings = _settings(step_beam_size=3)
    responses = ["The answer is 7", "The answer is 7", "A totally unrelated banana sentence"]
    picks = {_choose_final(responses, [-1.0, -1.0, 5.0], settings, PhiConfig(), np.random.default_rng(s)) for s in range(20)}
    assert picks <= {0, 1}
    # Fewer non-empty completions than M: softmax(advantage / 0.1) over all of them.
    assert _choose_final(["", "x", "y"], [5.0, 0.0, 0.0], settings, PhiConfig(), np.random.default_rng(0)) == 0
    # All empty: softmax(-advantage / 0.1).
    assert _choose_final(["", "", ""], [5.0, 0.0, 5.0], settings, PhiConfig(), np.random.default_rng(0)) == 1


def test_same_seed_same_result_and_requests() -> None:
    runs = []
    for _ in range(2):
        backend = _deep_script(["alpha beta", "gamma delta", "epsilon zeta"])
        result = _run(backend, _settings(step_beam_size=3, num_rollouts=2, max_steps=3, seed=7), prompt="Q:")
        runs.append((result.text, [[(r.prompt, r.seed) for r in call] for call in backend.calls]))
    assert runs[0] == runs[1]


def test_decoder_is_registered_and_yields_without_a_model() -> None:
    from mfs_core.decoders import get_decoder

    assert get_decoder("phi") is decode_phi
    coroutine = decode_phi("Q:", _settings())
    requests = next(coroutine)
    assert [r.n for r in requests] == [2, 2]
    assert all(r.temperature == 0.7 and r.max_tokens == 64 for r in requests)


# --- finished steps -----------------------------------------------------------------------
ANSWER = "The answer is: \\boxed{7}."


def test_a_finished_step_closes_its_beam_without_further_tokens() -> None:
    # M = 1, N = 2: scores [-0.1 (finished), -0.2]: μ = -0.15, σ = 0.05, keep > -0.2 → the answer only.
    backend = ScriptedBackend([[continuation(ANSWER, mean_logprob=-0.1, stop_reason=END),
                                continuation("3 + 4 = 7", mean_logprob=-0.2, stop_reason="\n")]])
    result = _run(backend, _settings(step_beam_size=1, num_rollouts=2, max_steps=4), prompt="Q:")
    assert backend.num_calls == 1  # no rollout for a finished step, no completion for a closed beam
    (cand, other) = result.steps[0].candidates
    assert (cand.finished, cand.selected, cand.rollout, cand.foresight_quality) == (True, True, "", -0.1)
    assert cand.step_value == pytest.approx(-0.1)  # F - 0 at the root
    assert other.pruned
    assert result.completions == [ANSWER] and result.completion_qualities == [-0.1]
    assert (result.answer, result.stop_reason, result.output_tokens) == ("7", "all_finished", 4 + 5)


def test_a_closed_beam_is_carried_until_every_beam_is_closed() -> None:
    # M = 2, N = 1. Step 0: beam 0 finishes (-0.1), beam 1 steps on (-0.2); σ-pruning keeps only
    # -0.1, the top-up brings -0.2 back; both are chosen (2 of 2). Step 1 samples beam 1 only.
    def script(request: GenerationRequest) -> list:
        if backend.num_calls == 1:
            return [continuation(ANSWER, mean_logprob=-0.1, stop_reason=END)] if request is backend.calls[0][0] else \
                [continuation("3 + 4 = 7", mean_logprob=-0.2, stop_reason="\n")]
        if backend.num_calls == 2:
            return [continuation(f"3 + 4 = 7\n{ANSWER}", mean_logprob=-0.3, stop_reason=END)]
        return [continuation(ANSWER, mean_logprob=-0.05, stop_reason=END)]

    backend = ScriptedBackend(script)
    result = _run(backend, _settings(step_beam_size=2, num_rollouts=1, max_steps=6), prompt="Q:")
    assert backend.num_calls == 3  # step 0, its one rollout, step 1 (beam 1 only)
    assert [r.prompt for r in backend.calls[1]] == ["Q:3 + 4 = 7\n"]
    assert [r.prompt for r in backend.calls[2]] == ["Q:3 + 4 = 7\n"]
    carried = [c for c in result.steps[1].candidates if c.step_tokens == 0]
    assert len(carried) == 1 and carried[0].finished and carried[0].step_value == 0.0
    assert result.stop_reason == "all_finished"
    assert sorted(result.completions) == sorted([ANSWER, f"3 + 4 = 7\n{ANSWER}"])
    assert result.answer == "7" and result.vote_share == 1.0


def test_phi_release_keeps_sampling_after_the_end_marker() -> None:

    def script(request: GenerationRequest) -> list:
        if _is_step(request):
            return [continuation(ANSWER, mean_logprob=-0.1, stop_reason=END),
                    continuation("3 + 4 = 7", mean_logprob=-0.2, stop_reason="\n")]
        return [continuation("The answer is: \\boxed{8}.", mean_logprob=-0.4, stop_reason=END)]

    backend = ScriptedBackend(script)
    result = drive(decode_phi("Q:", _settings(step_beam_size=1, num_rollouts=2), PhiConfig(close_finished=False)), backend)
    assert [r.prompt for r in backend.calls[1]] == [f"Q:{ANSWER}\n"]  # the finished step is rolled out
    assert [r.prompt for r in backend.calls[2]] == [f"Q:{ANSWER}\n"]  # and completed again
    assert result.text == f"{ANSWER}\nThe answer is: \\boxed{{8}}."
    assert (result.answer, result.method) == ("8", "phi")
