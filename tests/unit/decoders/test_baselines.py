"""Greedy CoT, self-consistency and the MFS ablations against a scripted backend."""

from __future__ import annotations

import pytest

from mfs_core.decoders import DECODERS, get_decoder
from mfs_core.decoders.baselines import decode_cot, decode_self_consistency, with_overrides
from mfs_core.decoders.mfs import decode_mfs
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest
from tests.scripted import ScriptedBackend, continuation

END = "<end_of_reasoning>"


def test_registry_holds_every_benchmark_method() -> None:
    assert {"mfs", "cot", "sc", "phi", "esc", "deepconf", "mfs-paper"} <= set(DECODERS)
    assert get_decoder("cot") is decode_cot
    assert get_decoder("sc") is decode_self_consistency
    with pytest.raises(ValueError, match="unknown decoding method 'beam'"):
        get_decoder("beam")


def test_cot_is_one_greedy_request_per_question_batched_by_the_engine() -> None:
    backend = ScriptedBackend(lambda r: [continuation("3 + 4 = 7\nThe answer is: \\boxed{7}.", logprobs=[-0.5, -0.25, -0.75],
                                                      stop_reason=END)])
    settings = MFSSettings(max_answer_tokens=99, seed=3)
    results = MFSEngine(backend, settings).decode_prompts(["Q1 ", "Q2 two ", "Q3 "], method="cot")
    assert backend.num_calls == 1  # three questions, one generate call
    assert [(r.prompt, r.n, r.greedy, r.max_tokens, r.stop) for r in backend.requests] == [
        ("Q1 ", 1, True, 99, (END,)), ("Q2 two ", 1, True, 99, (END,)), ("Q3 ", 1, True, 99, (END,))]
    first = results[0]
    assert first.method == "cot" and first.stop_reason == "greedy"
    assert first.answer == "7" and first.vote_share == 1.0
    assert first.completions == ["3 + 4 = 7\nThe answer is: \\boxed{7}."]
    assert first.completion_qualities == [pytest.approx(-0.5)]
    assert first.output_tokens == 3
    assert [r.prompt_tokens for r in results] == [1, 2, 1]
    assert first.flops == 6.0 * 3 * backend.num_parameters
    assert first.steps == []


def test_self_consistency_votes_over_k_samples() -> None:
    texts = [("The answer is: \\boxed{7}.", -0.9), ("The answer is: \\boxed{8}.", -0.1), ("The answer is: \\boxed{7}.", -0.5),
             ("no answer here", -0.2), ("The answer is: \\boxed{9}.", -0.3)]
    backend = ScriptedBackend([[continuation(t, mean_logprob=q, stop_reason=END) for t, q in texts]])
    result = MFSEngine(backend, MFSSettings(num_samples=5, temperature=0.6, top_p=0.9)).decode_prompts(["Q"], method="sc")[0]
    (request,) = backend.requests
    assert (request.n, request.temperature, request.top_p, request.greedy) == (5, 0.6, 0.9, False)
    assert request.seed is not None
    assert result.answer == "7" and result.vote_share == pytest.approx(2 / 5)
    assert result.text == "The answer is: \\boxed{7}."
    assert result.completion_answers == ["7", "8", "7", None, "9"]
    assert result.completion_qualities == pytest.approx([-0.9, -0.1, -0.5, -0.2, -0.3])
    assert result.method == "sc" and result.stop_reason == "sampled"
    assert result.output_tokens == 4 + 4 + 4 + 3 + 4


def test_self_consistency_breaks_ties_by_quality_and_seeds_from_settings() -> None:
    def script(request: GenerationRequest) -> list:
        return [continuation("The answer is: \\boxed{3}.", mean_logprob=-1.0),
                continuation("The answer is: \\boxed{4}.", mean_logprob=-0.2)]

    seeds = []
    for seed in (5, 5, 6):
        backend = ScriptedBackend(script)
        result = MFSEngine(backend, MFSSettings(num_samples=2, seed=seed)).decode_prompts(["Q"], method="sc")[0]
        assert result.answer == "4"
        seeds.append(backend.requests[0].seed)
    assert seeds[0] == seeds[1] != seeds[2]


def _mfs_script(request: GenerationRequest) -> list:
    """Steps ``s{i}`` scoring -0.1·(i+1); every rollout the same answer at quality -0.5."""
    if "\n" in request.stop:
        return [continuation(f"s{i}", mean_logprob=-0.1 * (i + 1), stop_reason="\n") for i in range(request.n)]
    return [continuation("The answer is: \\boxed{7}.", mean_logprob=-0.5, stop_reason=END)] * request.n


def test_without_early_stopping_mfs_runs_to_max_steps() -> None:
    settings = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=4)
    full_backend, ablated_backend = ScriptedBackend(_mfs_script), ScriptedBackend(_mfs_script)
    full = MFSEngine(full_backend, settings).decode_prompts(["Q:"], method="mfs")[0]
    ablated = MFSEngine(ablated_backend, settings.changed(early_stopping=False)).decode_prompts(["Q:"])[0]
    # Constant foresight quality: V = F_t - F_{t-1} = 0 <= ε_stop at t = 1 stops MFS there.
    assert full.stop_reason == "converged" and len(full.steps) == 2
    assert ablated.stop_reason == "max_steps" and len(ablated.steps) == 4
    assert ablated.method == "mfs" and full.method == "mfs" and ablated.search_settings["early_stopping"] is False
    assert ablated_backend.num_calls == 2 * 4 and full_backend.num_calls == 2 * 2


def test_without_width_pruning_mfs_rolls_out_every_unfinished_candidate() -> None:
    settings = MFSSettings(step_beam_size=2, num_rollouts=3, max_steps=1)
    pruned_backend, ablated_backend = ScriptedBackend(_mfs_script), ScriptedBackend(_mfs_script)
    full = MFSEngine(pruned_backend, settings).decode_prompts(["Q:"], method="mfs")[0]
    ablated = MFSEngine(ablated_backend, settings.changed(width_pruning=False)).decode_prompts(["Q:"])[0]
    # t = 0 samples M·N = 6 steps scoring -0.1 .. -0.6: μ = -0.35, σ = 0.17078, μ + 0.8σ = -0.21338
    # keeps -0.1 and -0.2; without pruning all 6 get a foresight rollout.
    assert len(pruned_backend.calls[1]) == 2
    assert len(ablated_backend.calls[1]) == 6
    assert full.steps[0].num_pruned == 4 and ablated.steps[0].num_pruned == 0
    assert ablated.output_tokens - full.output_tokens == 4 * 4  # four more 4-token rollouts
    assert ablated.search_settings["width_pruning"] is False


def test_with_overrides_rejects_unknown_fields_and_keeps_the_caller_settings() -> None:
    with pytest.raises(ValueError, match="unknown MFSSettings fields.*'early_stop'"):
        with_overrides(decode_mfs, "bad", early_stop=False)
    settings = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)
    MFSEngine(ScriptedBackend(_mfs_script), settings).decode_prompts(["Q:"], method="mfs-paper")
    assert settings.share_foresight is True and settings.rollout_temperature == 0.5
