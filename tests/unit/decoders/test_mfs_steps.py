"""The steps of one MFS decoding run, each alone, with hand-computed numbers.

``decode_mfs`` (mfs_core/decoders/mfs.py) is the loop over these functions; its behaviour as a
whole is pinned by test_mfs_decoder.py, test_foresight_sharing.py and test_mfs_rules.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mfs_core import MFSSettings
from mfs_core.decoders.common import request_seed
from mfs_core.decoders.mfs_foresight import Estimate, estimates_by_survivor, foresight_requests, reused_remainders
from mfs_core.decoders import mfs_steps as steps
from mfs_core.types import Continuation
from tests.scripted import continuation

END = "<end_of_reasoning>"
ROOT = steps.Beam(text="", copies=2)
PARENT = steps.Beam(text="x\n", quality=-0.5, step_logprob=-0.1)


def settings(**fields: object) -> MFSSettings:
    return MFSSettings(end_marker=END, step_delimiter="\n", **fields)


def draft(
    index: int, text: str, logprob: float, *, finished: bool = False, beam: steps.Beam = PARENT, tokens: int = 2
) -> steps.Draft:
    """A candidate of ``tokens`` tokens at ``logprob`` nats each."""
    step = continuation(text, logprobs=[logprob] * tokens, stop_reason=END if finished else "\n")
    return steps.Draft(index=index, beam_index=0, beam=beam, step=step, finished=finished)


def rollout(text: str, logprob_sum: float, tokens: int) -> Continuation:
    return Continuation(text=text, token_ids=tuple(range(tokens)), logprob_sum=logprob_sum, finish_reason="stop",
                        stop_reason=END)


def test_sample_requests_one_per_beam_n_copies_times_n_with_seeds_in_order() -> None:
    s = settings(num_rollouts=3, max_step_tokens=64, temperature=0.7, seed=5)
    rng, twin = np.random.default_rng(1), np.random.default_rng(1)
    requests = steps.sample_requests("Q:", [ROOT, PARENT], s, rng)
    assert [(r.prompt, r.n, r.max_tokens, r.stop, r.temperature) for r in requests] == [
        ("Q:", 6, 64, ("\n", END), 0.7), ("Q:x\n", 3, 64, ("\n", END), 0.7)]
    assert [r.seed for r in requests] == [request_seed(twin), request_seed(twin)]


def test_sampled_drafts_numbered_in_order_finished_by_eos_or_end_marker() -> None:
    outputs = [[continuation("a", stop_reason="\n")],
               [continuation("b", finish_reason="eos"), continuation("c", stop_reason=END), continuation(" ", stop_reason="\n")]]
    drafts = steps.sampled_drafts([ROOT, PARENT], outputs, END)
    assert [(d.index, d.beam_index, d.path, d.finished, d.blank) for d in drafts] == [
        (0, 0, "a", False, False), (1, 1, "x\nb", True, False), (2, 1, "x\nc", True, False), (3, 1, "x\n ", False, True)]
    assert drafts[1].beam is PARENT


def test_admit_finished_caps_the_pool_per_step_while_candidates_are_open() -> None:
    # M = 4, f = 0.5: at most floor(0.5·4) = 2 finished per step while candidates are open.
    s = settings(step_beam_size=4, max_finished_fraction=0.5)
    drafts = [draft(0, "f1", -0.5, finished=True), draft(1, "o", -0.2), draft(2, "f2", -0.1, finished=True),
              draft(3, "  ", -0.1), draft(4, "f3", -0.3, finished=True)]
    one = steps.admit_finished(drafts, 1, s)  # 3 free places, 2 admitted, 1 left: go on
    assert [d.index for d in one.finished] == [2, 4, 0]  # step log-prob -0.1, -0.3, -0.5
    assert [d.index for d in one.pooled] == [2, 4]
    assert [d.index for d in one.open] == [1]  # the blank one (3) is no candidate
    assert one.stop_reason is None
    full = steps.admit_finished(drafts, 2, s)  # 2 free places, 2 admitted: the pool holds M
    assert [d.index for d in full.pooled] == [2, 4] and full.stop_reason == "finished_pool_full"


def test_admit_finished_when_nothing_is_open() -> None:
    s = settings(step_beam_size=4, max_finished_fraction=0.5)
    done = steps.admit_finished([draft(0, "f1", -0.5, finished=True), draft(1, "f2", -0.1, finished=True),
                           draft(2, "f3", -0.3, finished=True), draft(3, " ", -0.2)], 2, s)
    assert [d.index for d in done.pooled] == [1, 2]  # the best 2 fill the 2 free places
    assert done.stop_reason == "all_finished"
    blank = steps.admit_finished([draft(0, " ", -0.5), draft(1, "\t", -0.1)], 0, s)
    assert (blank.pooled, blank.open, blank.stop_reason) == ((), (), "blank_steps")


def test_prune_width_keeps_scores_at_or_above_mean_plus_lambda_std() -> None:
    # scores -0.1, -0.2, -0.6: μ = -0.3, σ = sqrt((0.04 + 0.01 + 0.09) / 3) = 0.216025,
    # threshold = -0.3 + 0.8·0.216025 = -0.127180; c_prune = -0.1 - threshold = 0.027180.
    keep, pruning = steps.prune_width([-0.1, -0.2, -0.6], settings(prune_lambda=0.8))
    assert keep == [True, False, False]
    assert pruning.mean == pytest.approx(-0.3)
    assert pruning.std == pytest.approx(0.216025, abs=1e-6)
    assert pruning.threshold == pytest.approx(-0.127180, abs=1e-6)
    assert pruning.c_prune == pytest.approx(0.027180, abs=1e-6)
    assert steps.prune_width([-0.1, -0.6], settings(width_pruning=False)) == ([True, True], None)


def test_reused_remainders_one_survivor_per_stored_rollout() -> None:
    # The parent's rollout "a2\nrest" (4 tokens, sum -1.0) starts with the step "a2" (2 tokens, sum -0.4).
    stored = Continuation(text="a2\nrest", token_ids=(5, 6, 7, 8), logprob_sum=-1.0, finish_reason="stop",
                          stop_reason=END)
    parent = steps.Beam(text="x\n", quality=-0.25, rollout=stored, rollout_key=(0, 0))
    step = Continuation(text="a2", token_ids=(5, 6), logprob_sum=-0.4, finish_reason="stop", stop_reason="\n")
    survivors = [steps.Draft(0, 0, parent, step, False), steps.Draft(1, 1, parent, step, False)]
    (first, second) = reused_remainders([[0], [1]], survivors, settings(reuse_rollouts=True))
    assert [(r.text, r.token_ids, r.logprob_sum) for r in first] == [("rest", (7, 8), pytest.approx(-0.6))]
    assert second == []  # the same stored rollout served survivor 0 already
    assert reused_remainders([[0], [1]], survivors, settings(reuse_rollouts=False)) == [[], []]


def test_foresight_requests_only_for_missing_rollouts_seeds_in_group_order() -> None:
    s = settings(max_answer_tokens=100, rollout_temperature=0.9)
    rng, twin = np.random.default_rng(3), np.random.default_rng(3)
    requests = foresight_requests("Q:", ["a", "b", "c"], [1, 0, 2], s, rng)
    assert [(r.prompt, r.n, r.max_tokens, r.stop, r.temperature) for r in requests] == [
        ("Q:a\n", 1, 100, (END,), 0.9), ("Q:c\n", 2, 100, (END,), 0.9)]
    assert [r.seed for r in requests] == [request_seed(twin), request_seed(twin)]


def test_estimate_quality_is_the_mean_rollout_quality_new_tokens_exclude_reused() -> None:
    # F = mean(-0.6 / 2, -1.2 / 3) = mean(-0.3, -0.4) = -0.35; the reused one costs no token.
    est = Estimate(members=(0,), rollouts=(rollout("r", -0.6, 2), rollout("s", -1.2, 3)), reused=1, key=(2, 0))
    assert est.quality == pytest.approx(-0.35)
    assert est.new_tokens == 3


def test_estimates_by_survivor_inverts_the_groups() -> None:
    a = Estimate(members=(0, 2), rollouts=(rollout("r", -0.6, 2),), reused=0, key=(1, 0))
    b = Estimate(members=(1,), rollouts=(rollout("s", -0.6, 2),), reused=0, key=(1, 1))
    assert estimates_by_survivor([a, b], 3) == [a, b, a]
    with pytest.raises(ValueError, match=r"partition range\(4\)"):
        estimates_by_survivor([a, b], 4)


def test_step_values_baselines() -> None:
    survivors = [draft(0, "a", -0.1), draft(1, "b", -0.2)]  # parent F = -0.5, parent step log-prob -0.1
    values, deficits = steps.step_values(0, [-0.2, -0.4], survivors, "parent_foresight")
    assert values.tolist() == pytest.approx([0.1, -0.1])  # baseline: mean F_0 = -0.3
    assert deficits.tolist() == pytest.approx([0.0, 0.2])
    values, _ = steps.step_values(1, [-0.2, -0.4], survivors, "parent_foresight")
    assert values.tolist() == pytest.approx([0.3, 0.1])  # minus F_{t-1} = -0.5
    values, _ = steps.step_values(1, [-0.2, -0.4], survivors, "parent_step")
    assert values.tolist() == pytest.approx([-0.1, -0.3])  # minus the parent's step log-prob -0.1


def test_is_converged_after_min_steps_over_enough_paths() -> None:
    s = settings(min_steps=1, stop_epsilon=1e-6, convergence_min_paths=2)
    assert steps.is_converged(1, 0.0, 2, s)
    assert not steps.is_converged(0, 0.0, 2, s)  # before min_steps
    assert not steps.is_converged(1, 0.01, 2, s)  # max V > ε_stop
    assert not steps.is_converged(1, 0.0, 1, s)  # one path: max V compares nothing
    assert not steps.is_converged(1, 0.0, 2, settings(early_stopping=False))


def test_answer_decided_by_the_lead_probability() -> None:
    # 3 votes, no rival: P(Bin(4, 1/2) <= 3) = 15/16 = 0.9375.
    assert steps.answer_decided(1, {"1": 3}, settings(answer_stop_confidence=0.9))
    assert not steps.answer_decided(1, {"1": 3}, settings(answer_stop_confidence=0.95))
    assert not steps.answer_decided(0, {"1": 3}, settings(answer_stop_confidence=0.9, min_steps=1))
    assert not steps.answer_decided(1, {"1": 3}, settings(answer_stop_confidence=None))


def test_select_survivors_top_k_all_and_softmax_draw() -> None:
    rng = np.random.default_rng(0)
    assert steps.select_survivors([0.1, 0.3, 0.2], 2, settings(selection="top_k"), rng) == [1, 2]
    assert steps.select_survivors([0.1, 0.3, 0.2], 5, settings(), rng) == [1, 2, 0]  # all kept, best first
    # softmax(V / 0.1) of (0, -10): weights 1 : e^-100, so the draw takes index 0.
    assert steps.select_survivors([0.0, -10.0], 1, settings(selection_temperature=0.1), rng) == [0]
    # the draw is rng.choice over the softmax weights: (0.1, 0) / 0.1 -> e / (e + 1) = 0.731059.
    twin, again = np.random.default_rng(7), np.random.default_rng(7)
    p0 = math.e / (math.e + 1)
    assert steps.select_survivors([0.1, 0.0], 1, settings(selection_temperature=0.1), twin) == [
        int(again.choice(2, size=1, replace=False, p=[p0, 1 - p0])[0])]


def test_next_beams_extend_the_chosen_survivors_with_their_estimates() -> None:
    survivors = [draft(0, "a", -0.1), draft(1, "b", -0.3)]
    est = Estimate(members=(0, 1), rollouts=(rollout("r", -0.6, 2),), reused=0, key=(1, 0))
    (beam,) = steps.next_beams(survivors, [1], [est, est], "\n")
    assert beam == steps.Beam(text="x\nb\n", quality=pytest.approx(-0.3), step_logprob=pytest.approx(-0.3),
                        rollout=est.rollouts[0], rollout_key=(1, 0))


def _scored_step(**kw: object):
    """A step: a pooled finished candidate (0), two copies of "a" sharing one estimate (1, 3) of
    two rollouts (the first reused), a width-pruned one (2), a blank one (4)."""
    drafts = [draft(0, "f", -0.2, finished=True), draft(1, "a", -0.1), draft(2, "c", -0.9), draft(3, "a", -0.1),
              draft(4, " ", -0.1)]
    survivors = [drafts[1], drafts[3]]
    est = Estimate(members=(0, 1), rollouts=(rollout("r1", -0.6, 3), rollout("r2", -0.8, 2)), reused=1, key=(1, 0))
    _, pruning = steps.prune_width([-0.1, -0.9, -0.1], settings(prune_lambda=0.8))
    return steps.step_trace(1, drafts, settings(stop_epsilon=1e-4), pooled=[drafts[0]], width_pruned={2}, pruning=pruning,
                      survivors=survivors, estimate_of=[est, est], values=[0.2, 0.2], deficits=[0.0, 0.0], **kw)


def test_step_trace_builds_each_candidate_from_the_steps_values() -> None:
    step = _scored_step(chosen=[1])
    # F(a) = mean(-0.6 / 3, -0.8 / 2) = mean(-0.2, -0.4) = -0.3; the second copy shares it.
    f, a, c, a2, blank = step.candidates
    assert (f.selected, f.foresight_quality, f.pruned, f.step_value) == (True, pytest.approx(-0.2), False, None)
    assert (a.foresight_quality, a.rollout, a.foresight_shared, a.reused_rollouts, a.rollout_tokens) == (
        pytest.approx(-0.3), "r1", False, 1, 2)
    assert (a2.foresight_quality, a2.foresight_shared, a2.reused_rollouts, a2.rollout_tokens) == (
        pytest.approx(-0.3), True, 0, 0)
    assert (a.step_value, a.deficit, a.selected, a2.selected) == (0.2, 0.0, False, True)
    assert (c.pruned, c.foresight_quality, c.rollout_tokens, blank.pruned) == (True, None, None, True)
    assert (a.parent_quality, a.parent_step_logprob, a.step_tokens) == (-0.5, -0.1, 2)
    # scores -0.1, -0.9, -0.1: μ = -0.36667, σ = 0.37712, threshold = μ + 0.8σ = -0.06497.
    assert (step.mean_score, step.std_score) == (pytest.approx(-0.366667, abs=1e-6), pytest.approx(0.377124, abs=1e-6))
    assert step.prune_threshold == pytest.approx(-0.0649675, abs=1e-6)
    assert (step.step, step.stop_epsilon, step.max_step_value, step.converged, step.beam_sources) == (
        1, 1e-4, 0.2, False, [3])
    assert step.num_pruned == 2


def test_step_trace_of_a_discarded_converged_step() -> None:
    step = _scored_step(pool_kept=False, converged=True)
    assert [c.selected for c in step.candidates] == [False] * 5
    assert step.candidates[0].foresight_quality == pytest.approx(-0.2)  # recorded, not kept
    assert (step.converged, step.beam_sources) == (True, [])


def test_finish_own_rollouts_and_joined_completions() -> None:
    shared = rollout("R", -0.4, 2)
    beams = [steps.Beam("p\n", quality=-0.2, rollout=shared, rollout_key=(1, 0)),
             steps.Beam("q\n", quality=-0.2, rollout=shared, rollout_key=(1, 0)),  # a copy: no rollout of its own
             steps.Beam("", copies=2),  # the root: none
             steps.Beam("s\n", quality=-0.7, rollout=rollout("S", -0.3, 1), rollout_key=(1, 1))]
    own = steps.own_rollouts(beams)
    assert own == [True, False, False, True]
    rng, twin = np.random.default_rng(4), np.random.default_rng(4)
    requests = steps.completion_requests("Q:", [beams[1], beams[2]], settings(temperature=0.5, max_answer_tokens=50), rng)
    assert [(r.prompt, r.n, r.max_tokens, r.stop, r.temperature, r.seed) for r in requests] == [
        ("Q:q\n", 1, 50, (END,), 0.5, request_seed(twin)), ("Q:", 2, 50, (END,), 0.5, request_seed(twin))]
    filled = [[continuation("Q", logprobs=[-0.1, -0.3])], [continuation("U", logprobs=[-1.0]),
                                                           continuation("V", logprobs=[-0.5])]]
    completions, qualities = steps.join_completions([("done", -0.05)], beams, own, filled)
    assert completions == ["done", "p\nR", "q\nQ", "U", "V", "s\nS"]
    assert qualities == pytest.approx([-0.05, -0.2, -0.2, -1.0, -0.5, -0.7])
