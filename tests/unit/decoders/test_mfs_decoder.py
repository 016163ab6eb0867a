"""The MFS decoder against a scripted backend, with hand-computed numbers.

Scenario (raw prompt "Q:", M = 2, N = 2, λ1 = 0.4, two steps):

t = 0, one request n = M·N = 4 from "Q:": step log-probs a -0.1, b -0.5, c -0.9, d -1.3.
    μ = -0.7, σ = sqrt(0.2) = 0.44721, threshold = -0.7 + 0.4·0.44721 = -0.52111
    -> a and b survive. Rollouts: F(a) = -0.2 (answer 1), F(b) = -0.4 (answer 2).
    Baseline at t = 0 is the mean F = -0.3 -> V(a) = +0.1, V(b) = -0.1. Both kept (M = 2).
t = 1, from "a\\n": a2 -0.2, a3 -0.6; from "b\\n": b2 -0.3, b3 -0.7.
    μ = -0.45, σ = sqrt(0.0425) = 0.20616, threshold = -0.36754 -> a2 and b2 survive.
    Rollouts: F(a2) = -0.1 (answer 1), F(b2) = -0.35 (answer 2).
    V(a2) = -0.1 - (-0.2) = +0.1, V(b2) = -0.35 - (-0.4) = +0.05   (parent_foresight)
    V(a2) = -0.1 - (-0.1) =  0.0, V(b2) = -0.35 - (-0.5) = +0.15   (parent_step)
"""

from __future__ import annotations

import math

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.decoders import PAPER_RULES
from mfs_core.decoders.mfs import decode_mfs
from tests.mfs_scenario import END, ROLLOUTS, STEP_STOP, STEPS, scripted_model
from tests.scripted import ScriptedBackend, continuation


def paper_settings(**fields: object) -> MFSSettings:
    """Settings under the paper's rules (MFS_SPEC.md steps 1-9): these tests pin its vote over the
    kept beams and its convergence stop; the added rules are tested in
    experiments/tests/test_mfs_rules.py."""
    return MFSSettings(**{**PAPER_RULES, **fields})


def drive(decoder, backend):
    """Run a decoder coroutine directly against a backend (no engine, no thread)."""
    outputs = None
    try:
        while True:
            requests = decoder.send(outputs)
            outputs = backend.generate(requests)
    except StopIteration as stop:
        return stop.value


def run(**overrides):
    base = dict(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2, seed=0)
    settings = paper_settings(**{**base, **overrides})
    backend = scripted_model()
    engine = MFSEngine(backend, settings)
    return engine.decode(["Q:"])[0], backend


def test_step_values_pruning_and_trace():
    result, _ = run()
    step0, step1 = result.steps
    assert step0.mean_score == pytest.approx(-0.7)
    assert step0.std_score == pytest.approx(math.sqrt(0.2))
    assert step0.prune_threshold == pytest.approx(-0.7 + 0.4 * math.sqrt(0.2))
    assert step0.c_prune == pytest.approx(-0.1 - step0.prune_threshold)
    assert [c.pruned for c in step0.candidates] == [False, False, True, True]
    assert [c.foresight_quality for c in step0.candidates[:2]] == pytest.approx([-0.2, -0.4])
    assert [c.step_value for c in step0.candidates[:2]] == pytest.approx([0.1, -0.1])
    assert [c.deficit for c in step0.candidates[:2]] == pytest.approx([0.0, 0.2])
    assert step0.candidates[2].foresight_quality is None and step0.candidates[2].step_value is None
    assert step1.prune_threshold == pytest.approx(-0.45 + 0.4 * math.sqrt(0.0425))
    assert [c.text for c in step1.candidates if not c.pruned] == ["a2", "b2"]
    assert [c.step_value for c in step1.candidates if not c.pruned] == pytest.approx([0.1, 0.05])
    assert step1.max_step_value == pytest.approx(0.1)
    assert result.stop_reason == "max_steps"


def test_the_best_candidate_always_survives_pruning():
    result, _ = run(prune_lambda=50.0)
    assert [c.pruned for c in result.steps[0].candidates] == [False, True, True, True]


def test_width_pruning_off_rolls_out_every_candidate():
    steps = {**STEPS}
    rollouts = {**ROLLOUTS, "Q:c\n": ("The answer is: \\boxed{3}.", -0.9), "Q:d\n": ("The answer is: \\boxed{4}.", -0.9)}
    backend = scripted_model(steps, rollouts)
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, width_pruning=False, max_steps=1)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    assert not any(c.pruned for c in result.steps[0].candidates)
    assert len(backend.calls[1]) == 4  # four rollout requests


def test_finish_without_extra_tokens_and_token_totals():
    result, backend = run()
    # step, rollouts, step, rollouts: no generate call after the stop.
    assert backend.num_calls == 4
    assert result.completions == ["a\na2\nThe answer is: \\boxed{1}.", "b\nb2\nThe answer is: \\boxed{2}."]
    assert result.completion_qualities == pytest.approx([-0.1, -0.35])
    # Tie 1-1 broken by the higher F: answer 1 with half of the votes.
    assert (result.answer, result.vote_share) == ("1", 0.5)
    assert result.text == result.completions[0]
    # Output tokens: 4 + 2 step candidates of 2 tokens... t0: 4·2, rollouts 2·4, t1: 4·2, rollouts 2·4.
    assert result.output_tokens == 8 + 8 + 8 + 8
    assert result.flops == 6 * result.output_tokens * 1000
    # Prompt tokens counted once per request (whitespace tokens of the scripted tokenizer).
    assert result.prompt_tokens == sum(backend.count_tokens(r.prompt) for r in backend.requests)


def test_stop_rule_at_epsilon_and_min_steps():
    rollouts = {**ROLLOUTS, "Q:a\na2\n": ("The answer is: \\boxed{1}.", -0.3), "Q:b\nb2\n": ("The answer is: \\boxed{2}.", -0.5)}
    settings = dict(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2)
    # V(a2) = -0.1, V(b2) = -0.1: max V <= ε_stop at t = 1 -> converged.
    result = MFSEngine(scripted_model(STEPS, rollouts), paper_settings(**settings)).decode(["Q:"])[0]
    assert result.stop_reason == "converged" and result.steps[1].converged
    assert result.steps[1].max_step_value == pytest.approx(-0.1)
    # No check before min_steps: with min_steps = 2 the same run ends by max_steps.
    result = MFSEngine(scripted_model(STEPS, rollouts), paper_settings(**settings, min_steps=2)).decode(["Q:"])[0]
    assert result.stop_reason == "max_steps" and not result.steps[1].converged
    # max V = +0.1 exactly at ε_stop = 0.1 stops; ε_stop = 0.09 does not.
    assert run(stop_epsilon=0.1)[0].stop_reason == "converged"
    assert run(stop_epsilon=0.09)[0].stop_reason == "max_steps"
    # The paper's "w/o stopping" ablation ignores the test.
    result = MFSEngine(scripted_model(STEPS, rollouts), paper_settings(**settings, early_stopping=False)).decode(["Q:"])[0]
    assert result.stop_reason == "max_steps"


def test_selection_weights_drive_the_draw():
    # M = 1, N = 2, no pruning: V(a) = +0.1, V(b) = -0.1, T = 0.1 -> P(a) = e^2 / (1 + e^2) = 0.8808.
    steps = {"Q:": [("a", -0.1), ("b", -0.5)]}
    picks = 0
    trials = 400
    backend = scripted_model(steps, ROLLOUTS)
    base = paper_settings(prompt_format="raw", step_beam_size=1, num_rollouts=2, width_pruning=False, max_steps=1)
    for seed in range(trials):
        result = drive(decode_mfs("Q:", base.model_copy(update={"seed": seed})), backend)
        picks += result.answer == "1"
    assert picks / trials == pytest.approx(math.exp(2) / (1 + math.exp(2)), abs=0.05)


def test_release_variants():
    # top_k selection: deterministic, the larger V (a) wins for M = 1.
    steps = {"Q:": [("a", -0.1), ("b", -0.5)]}
    for seed in range(5):
        settings = paper_settings(prompt_format="raw", step_beam_size=1, num_rollouts=2, width_pruning=False, max_steps=1,
                               selection="top_k", seed=seed)
        assert MFSEngine(scripted_model(steps, ROLLOUTS), settings).decode(["Q:"])[0].answer == "1"
    # parent_step baseline: V(a2) = 0.0, V(b2) = +0.15.
    result, _ = run(baseline="parent_step")
    assert [c.step_value for c in result.steps[1].candidates if not c.pruned] == pytest.approx([0.0, 0.15])
    # best_quality aggregation: the path with the highest F (-0.1, answer 1), share 1/2.
    result, _ = run(aggregation="best_quality")
    assert (result.answer, result.vote_share, result.text) == ("1", 0.5, result.completions[0])


def test_finished_candidates_go_to_the_pool_without_rollouts():
    steps = {"Q:": [("The answer is: \\boxed{5}.", -0.3), ("The answer is: \\boxed{6}.", -0.2), ("a", -0.1), ("b", -0.5)]}
    rollouts = {"Q:a\n": ("The answer is: \\boxed{1}.", -0.25)}

    def script(request):
        if request.stop == STEP_STOP:
            return [
                continuation(text, logprobs=[lp, lp], stop_reason=END if "boxed" in text else "\n")
                for text, lp in steps[request.prompt]
            ]
        text, lp = rollouts[request.prompt]
        return [continuation(text, logprobs=[lp] * 4, stop_reason=END)]

    backend = ScriptedBackend(script)
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=1)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    cands = result.steps[0].candidates
    # ⌊0.6·2⌋ = 1 finished kept: the better one (step log-prob -0.2).
    assert [c.finished for c in cands] == [True, True, False, False]
    assert [c.selected for c in cands] == [False, True, True, False]
    assert cands[0].foresight_quality is None and cands[1].foresight_quality == pytest.approx(-0.2)
    # Unfinished a (-0.1) and b (-0.5): μ = -0.3, σ = 0.2, threshold -0.22 -> only a is rolled out.
    assert [r.prompt for r in backend.calls[1]] == ["Q:a\n"]
    assert result.completions == ["The answer is: \\boxed{6}.", "a\nThe answer is: \\boxed{1}."]
    # 1-1 tie, broken by F: -0.2 (answer 6) beats -0.25 (answer 1).
    assert (result.answer, result.vote_share) == ("6", 0.5)


def test_all_finished_stops_the_search():
    steps = {"Q:": [("The answer is: \\boxed{5}.", -0.3)] * 4}

    def script(request):
        return [continuation(t, logprobs=[lp], stop_reason=END) for t, lp in steps[request.prompt]]

    backend = ScriptedBackend(script)
    result = MFSEngine(backend, paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2)).decode(["Q:"])[0]
    assert result.stop_reason == "all_finished" and backend.num_calls == 1
    assert (result.answer, result.vote_share) == ("5", 1.0)


def test_without_any_answer_the_best_nonblank_path_is_returned():
    from mfs_core.decoders.common import TokenTally, finish_result

    settings = paper_settings()
    result = finish_result(["", "3 + 4 = 7", "x"], [-0.1, -0.5, -0.9], settings, TokenTally(), stop_reason="max_steps",
                           steps=[], method="mfs")
    assert (result.answer, result.vote_share, result.text) == (None, 0.0, "3 + 4 = 7")


# --- convergence finish (MFS_SPEC.md steps 7-8) --------------------------------------------------
WORSE_ROLLOUTS = {**ROLLOUTS, "Q:a\na2\n": ("The answer is: \\boxed{3}.", -0.3), "Q:b\nb2\n": ("The answer is: \\boxed{3}.", -0.5)}


def test_convergence_keeps_the_parent_beams_and_their_earlier_rollouts():
    # t = 1: V(a2) = -0.3 - (-0.2) = -0.1, V(b2) = -0.5 - (-0.4) = -0.1 <= ε_stop: converged.
    # The step's candidates are discarded: the parents a and b are completed by their t = 0
    # rollouts (answers 1 and 2, F -0.2 and -0.4), not by a2's and b2's (answer 3, twice).
    backend = scripted_model(STEPS, WORSE_ROLLOUTS)
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    assert result.stop_reason == "converged" and result.steps[1].converged
    assert backend.num_calls == 4  # no generate call after the stop
    assert result.completions == ["a\nThe answer is: \\boxed{1}.", "b\nThe answer is: \\boxed{2}."]
    assert result.completion_qualities == pytest.approx([-0.2, -0.4])
    assert (result.answer, result.vote_share) == ("1", 0.5)
    assert not any(c.selected for c in result.steps[1].candidates)
    assert result.completion_tokens == 0


def test_the_old_convergence_finish_is_a_setting():
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2)
    old = MFSEngine(scripted_model(STEPS, WORSE_ROLLOUTS), settings.model_copy(update={"convergence_finish": "converged_rollouts"}))
    result = old.decode(["Q:"])[0]
    assert result.stop_reason == "converged"
    assert result.completions == ["a\na2\nThe answer is: \\boxed{3}.", "b\nb2\nThe answer is: \\boxed{3}."]
    assert (result.answer, result.vote_share) == ("3", 1.0)
    assert result.search_settings["convergence_finish"] == "converged_rollouts"


def test_convergence_at_the_root_completes_the_empty_paths():
    # min_steps = 0 and ε_stop = 1: t = 0 converges; the root has no rollout, so its M = 2
    # paths are sampled to the end (the only case with tokens after the stop).
    backend = scripted_model(STEPS, {**ROLLOUTS, "Q:": ("The answer is: \\boxed{9}.", -0.6)})
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=2,
                           min_steps=0, stop_epsilon=1.0)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    assert result.stop_reason == "converged" and len(result.steps) == 1
    assert [(r.prompt, r.n) for r in backend.calls[2]] == [("Q:", 2)]
    assert result.completions == ["The answer is: \\boxed{9}."] * 2
    assert result.completion_tokens == 2 * 4
    assert (result.answer, result.vote_share) == ("9", 1.0)


# --- finished pool (MFS_SPEC.md step 6) -----------------------------------------------------------
def _pool_script(steps, rollouts):
    def script(request):
        if request.stop == STEP_STOP:
            return [continuation(text, logprobs=[lp, lp], stop_reason=END if "boxed" in text else "\n")
                    for text, lp in steps[request.prompt]]
        text, lp = rollouts[request.prompt]
        return [continuation(text, logprobs=[lp] * 4, stop_reason=END)] * request.n

    return ScriptedBackend(script)


def test_a_full_pool_with_open_candidates_is_not_all_finished():
    # M = 2, f = 0.6: at most ⌊1.2⌋ = 1 finished per step while candidates are open.
    # t = 0: boxed 5 (-0.3) to the pool; a, b, c open: μ = -0.5, σ = sqrt(0.32/3) = 0.32660,
    #   threshold -0.5 + 0.4·0.32660 = -0.36936 -> only a survives and is the one beam.
    # t = 1 from a: boxed 6 (-0.2) fills the pool (2 = M) while a2 is open -> finished_pool_full.
    steps = {
        "Q:": [("The answer is: \\boxed{5}.", -0.3), ("a", -0.1), ("b", -0.5), ("c", -0.9)],
        "Q:a\n": [("The answer is: \\boxed{6}.", -0.2), ("a2", -0.3)],
    }
    backend = _pool_script(steps, {"Q:a\n": ("The answer is: \\boxed{1}.", -0.25)})
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=4)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    assert result.stop_reason == "finished_pool_full"
    assert result.completions == ["The answer is: \\boxed{5}.", "a\nThe answer is: \\boxed{6}."]
    assert (result.answer, result.vote_share) == ("6", 0.5)  # 1-1, F -0.2 beats -0.3
    assert backend.num_calls == 3  # step, rollout, step


@pytest.mark.parametrize("fraction", [0.0, 0.6])
def test_when_every_candidate_finished_the_best_m_are_kept(fraction):
    # All M·N = 4 candidates finish at t = 0: the best M = 2 by step log-prob are kept,
    # whatever max_finished_fraction (0 used to leave no path and crash the vote).
    steps = {"Q:": [("The answer is: \\boxed{5}.", -0.3), ("The answer is: \\boxed{6}.", -0.1),
                    ("The answer is: \\boxed{5}.", -0.2), ("The answer is: \\boxed{7}.", -0.4)]}
    backend = _pool_script(steps, {})
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, max_finished_fraction=fraction)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    assert result.stop_reason == "all_finished" and backend.num_calls == 1
    assert result.completion_qualities == pytest.approx([-0.1, -0.2])
    assert result.completion_answers == ["6", "5"]
    assert (result.answer, result.vote_share) == ("6", 0.5)
    assert [c.selected for c in result.steps[0].candidates] == [False, True, True, False]


# --- seeds and temperatures -----------------------------------------------------------------------
def test_each_prompt_draws_its_own_stream_alone_or_in_a_batch():
    backend = scripted_model({**STEPS, **{k.replace("Q:", "R:"): v for k, v in STEPS.items()}},
                             {**ROLLOUTS, **{k.replace("Q:", "R:"): v for k, v in ROLLOUTS.items()}})
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, prune_lambda=0.4, max_steps=1)
    MFSEngine(backend, settings).decode_prompts(["Q:", "R:"])
    q_seed, r_seed = (r.seed for r in backend.calls[0])
    assert q_seed != r_seed  # two questions of a batch no longer share a stream
    MFSEngine(backend, settings).decode_prompts(["Q:"])
    assert backend.calls[-2][0].seed == q_seed  # the same question alone: the same stream
    MFSEngine(backend, settings.model_copy(update={"seed": 1})).decode_prompts(["Q:"])
    assert backend.calls[-2][0].seed != q_seed


def test_rollout_temperature_applies_to_rollouts_only():
    _, backend = run(temperature=0.7, rollout_temperature=1.0)
    steps = [r for r in backend.requests if r.stop == STEP_STOP]
    rollouts = [r for r in backend.requests if r.stop == (END,)]
    assert {r.temperature for r in steps} == {0.7} and {r.temperature for r in rollouts} == {1.0}
    _, backend = run(temperature=0.7)
    assert {r.temperature for r in backend.requests} == {0.7}


# --- blank lines between steps (a real model's layout: "1. ...\n\n2. ...") -------------------------
def _blank_line_model(blank_prompts, rollouts):
    """Steps from ``Q:``: one candidate writes a blank line first (stopped at "\\n" with no text)."""

    def script(request):
        if request.stop == STEP_STOP:
            if request.prompt in blank_prompts:  # the blank line's continuation: one sample
                assert request.n == 1
                return [continuation(blank_prompts[request.prompt], logprobs=[-0.2, -0.2], stop_reason="\n")]
            return [continuation("", logprobs=[-0.1], stop_reason="\n"),
                    continuation("b", logprobs=[-0.3, -0.3], stop_reason="\n")]
        text, lp = rollouts[request.prompt]
        return [continuation(text, logprobs=[lp] * 4, stop_reason=END)] * request.n

    return ScriptedBackend(script, num_parameters=1000)


def test_a_blank_line_is_continued_into_the_step_after_it():
    rollouts = {"Q:\na\n": ("The answer is: \\boxed{1}.", -0.2), "Q:b\n": ("The answer is: \\boxed{2}.", -0.4)}
    backend = _blank_line_model({"Q:\n": "a"}, rollouts)
    settings = paper_settings(prompt_format="raw", step_beam_size=1, num_rollouts=2, width_pruning=False, max_steps=1)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    cands = result.steps[0].candidates
    # The blank candidate is re-sampled from after its blank line and joined to what follows:
    # text "\na", 3 tokens, mean log-prob (-0.1 - 0.2 - 0.2) / 3; not finished, not a step of its own.
    assert [c.text for c in cands] == ["\na", "b"] and [c.finished for c in cands] == [False, False]
    assert cands[0].step_tokens == 3 and cands[0].step_logprob == pytest.approx(-0.5 / 3)
    assert [[r.prompt for r in call] for call in backend.calls[:2]] == [["Q:"], ["Q:\n"]]
    assert backend.calls[1][0].max_tokens == settings.max_step_tokens - 1
    # Foresight from the joined step keeps the model's layout (the blank line stays in the path).
    assert sorted(r.prompt for r in backend.calls[2]) == ["Q:\na\n", "Q:b\n"]
    assert result.prompt_tokens > 0 and result.output_tokens == 1 + 2 + 2 + 2 * 4
    assert "\na\nThe answer is: \\boxed{1}." in result.completions


def test_a_step_that_stays_blank_is_neither_a_step_nor_a_finished_path():
    from mfs_core.decoders.common import MAX_BLANK_LINES

    def script(request):
        if request.stop == STEP_STOP:
            return [continuation("", logprobs=[-0.1], stop_reason="\n")] * request.n
        return [continuation("The answer is: \\boxed{3}.", logprobs=[-0.1] * 3, stop_reason=END)] * request.n

    backend = ScriptedBackend(script)
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, max_steps=3)
    result = MFSEngine(backend, settings).decode(["Q:"])[0]
    cands = result.steps[0].candidates
    assert len(result.steps) == 1 and result.stop_reason == "blank_steps"
    assert all(c.pruned and not c.finished and c.text == "\n" * MAX_BLANK_LINES for c in cands)
    # 1 step call, MAX_BLANK_LINES continuations, then the root's M paths are sampled to the end.
    assert backend.num_calls == 1 + MAX_BLANK_LINES + 1
    assert result.completions == ["The answer is: \\boxed{3}."] * 2 and result.answer == "3"


def test_an_empty_step_ended_by_eos_finishes_its_path():
    def script(request):
        if request.stop == STEP_STOP:
            return [continuation("", logprobs=[-0.1], finish_reason="eos")] * request.n
        raise AssertionError("no rollout: every candidate finished")

    backend = ScriptedBackend(script)
    result = MFSEngine(backend, paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2)).decode(["Q:"])[0]
    assert result.stop_reason == "all_finished" and backend.num_calls == 1
    assert all(c.finished for c in result.steps[0].candidates)
