"""One foresight estimate per distinct step, and the parent's rollout reused.

Scenario (raw prompt "Q:", M = 2, N = 2, no width pruning, top-k selection, two steps;
``reuse_rollouts=True`` where the test says so):

t = 0, one request n = 4 from "Q:": a, a, a (2 tokens at -0.1 each), b (2 tokens at -0.5).
    Shared: one rollout for "a" and one for "b" (2 requests, not 4).
    F(a) = (-0.2 - 0.2 - 0.1·4) / 6 = -0.8 / 6 = -0.13333 (rollout "a2\\nThe answer is: \\boxed{1}.", 6 tokens)
    F(b) = -0.4 (4 tokens at -0.4).
    Baseline at t = 0 is the mean F over the survivors, copies counted:
    (3·(-0.13333) - 0.4) / 4 = -0.2 -> V(a) = +0.06667 (each copy), V(b) = -0.2.
    Top-2: two copies of "a"; both beams hold the one shared rollout.
t = 1, from "Q:a\\n" (each beam n = 2): a2 (2 tokens at -0.2), a3 (2 tokens at -0.6), twice.
    "a2" is the first step of the beams' stored rollout: its rest ("The answer is: \\boxed{1}.",
    4 tokens, log-prob sum -0.8 - (-0.4) = -0.4) is a2's rollout, no request:
    F(a2) = -0.1, V(a2) = -0.1 + 0.13333 = +0.03333.
    "a3" is not: one new rollout, F(a3) = -0.5, V(a3) = -0.36667.
    Top-2: two copies of "a2", which share one rollout: the first beam is completed by it,
    the second by a fresh completion from "Q:a\na2\n" (4 tokens).
"""

from __future__ import annotations

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.decoders import PAPER_RULES
from mfs_core.decoders import get_decoder
from mfs_core.decoders.mfs import foresight_groups, rollout_remainder
from tests.scripted import ScriptedBackend, continuation, drive

END = "<end_of_reasoning>"
STEP_STOP = ("\n", END)
STEPS = {
    "Q:": [("a", -0.1), ("a", -0.1), ("a", -0.1), ("b", -0.5)],
    "Q:a\n": [("a2", -0.2), ("a3", -0.6)],
    "Q:b\n": [("b2", -0.3), ("b3", -0.7)],
}
ROLLOUTS = {
    "Q:a\n": ("a2\nThe answer is: \\boxed{1}.", [-0.2, -0.2, -0.1, -0.1, -0.1, -0.1]),
    "Q:b\n": ("The answer is: \\boxed{2}.", [-0.4] * 4),
    "Q:a\na2\n": ("The answer is: \\boxed{1}.", [-0.1] * 4),
    "Q:a\na3\n": ("The answer is: \\boxed{3}.", [-0.5] * 4),
}


def paper_settings(**fields: object) -> MFSSettings:
    """Settings under the paper's rules (MFS_SPEC.md steps 1-9): these tests pin its vote over the
    kept beams and its convergence stop; the added rules are tested in
    experiments/tests/test_mfs_rules.py."""
    return MFSSettings(**{**PAPER_RULES, **fields})


def _model():
    def script(request):
        if request.stop == STEP_STOP:
            return [continuation(text, logprobs=[lp, lp], stop_reason="\n") for text, lp in STEPS[request.prompt]]
        text, logprobs = ROLLOUTS[request.prompt]
        return [continuation(text, logprobs=logprobs, stop_reason=END)] * request.n

    return ScriptedBackend(script, num_parameters=1000)


def _run(**overrides):
    base = dict(prompt_format="raw", step_beam_size=2, num_rollouts=2, width_pruning=False, selection="top_k",
                max_steps=2, seed=0)
    backend = _model()
    result = MFSEngine(backend, paper_settings(**{**base, **overrides})).decode(["Q:"])[0]
    return result, backend


def _rollout_prompts(backend):
    return [r.prompt for r in backend.requests if r.stop == (END,)]


def test_groups_are_equal_paths_in_first_seen_order():
    assert foresight_groups(["a", "b", "a", "c", "b"], share=True) == [[0, 2], [1, 4], [3]]
    assert foresight_groups(["a", "b", "a"], share=False) == [[0], [1], [2]]
    assert foresight_groups([], share=True) == []


def test_the_rest_of_a_rollout_that_starts_with_the_step_is_its_future():
    step = continuation("x", logprobs=[-0.5, -0.1], stop_reason="\n")  # "x" and the "\n" token
    rollout = continuation("x\nThe answer is 1", logprobs=[-0.5, -0.1, -0.2, -0.3, -0.4], stop_reason=END)
    rest = rollout_remainder(rollout, step, "\n")
    assert rest is not None
    assert rest.text == "The answer is 1" and rest.token_ids == (2, 3, 4)
    assert rest.logprob_sum == pytest.approx(-0.9) and rest.stop_reason == END and rest.prompt_tokens == 0


def test_a_rollout_is_not_reused_unless_it_is_the_same_step_followed_by_more():
    step = continuation("x", logprobs=[-0.5, -0.1], stop_reason="\n")
    tail = [-0.5, -0.1, -0.2]
    assert rollout_remainder(None, step, "\n") is None
    assert rollout_remainder(continuation("y\nz", logprobs=tail, stop_reason=END), step, "\n") is None  # other text
    assert rollout_remainder(continuation("x\nz", logprobs=tail, finish_reason="length"), step, "\n") is None  # cut
    assert rollout_remainder(continuation("x\n", logprobs=[-0.5, -0.1], stop_reason=END), step, "\n") is None  # no rest
    unstopped = continuation("x", logprobs=[-0.5, -0.1], finish_reason="length")  # the step did not end at "\n"
    assert rollout_remainder(continuation("x\nz", logprobs=tail, stop_reason=END), unstopped, "\n") is None
    # Float noise never makes the rest's log-prob positive.
    noisy = continuation("x\nz", logprobs=[-0.5, -0.1 + 1e-12, 0.0], stop_reason=END)
    assert rollout_remainder(noisy, step, "\n").logprob_sum == 0.0


def test_copies_share_one_estimate_and_the_parent_rollout_is_reused():
    result, backend = _run(reuse_rollouts=True)
    step0, step1 = result.steps
    # t = 0: one rollout per distinct step (a, b), not per copy.
    assert _rollout_prompts(backend)[:2] == ["Q:a\n", "Q:b\n"]
    assert [c.foresight_quality for c in step0.candidates] == pytest.approx([-0.8 / 6] * 3 + [-0.4])
    assert [c.step_value for c in step0.candidates] == pytest.approx([0.2 - 0.8 / 6] * 3 + [-0.2])
    assert [c.foresight_shared for c in step0.candidates] == [False, True, True, False]
    assert [c.rollout_tokens for c in step0.candidates] == [6, 0, 0, 4]
    assert step0.beam_sources == [0, 1]
    # t = 1: a2 reuses the stored rollout's rest (no request); a3 gets one new rollout. At the
    # finish the two beams are copies of a2 sharing that rest: the second is completed anew.
    assert _rollout_prompts(backend)[2:] == ["Q:a\na3\n", "Q:a\na2\n"]
    assert [c.text for c in step1.candidates] == ["a2", "a3", "a2", "a3"]
    assert [c.foresight_quality for c in step1.candidates] == pytest.approx([-0.1, -0.5, -0.1, -0.5])
    assert [c.step_value for c in step1.candidates] == pytest.approx([-0.1 + 0.8 / 6, -0.5 + 0.8 / 6] * 2)
    assert [c.reused_rollouts for c in step1.candidates] == [1, 0, 0, 0]
    assert [c.foresight_shared for c in step1.candidates] == [False, False, True, True]
    assert [c.rollout_tokens for c in step1.candidates] == [0, 4, 0, 0]
    # Tokens: steps 4·2 + 4·2, rollouts 6 + 4 (t = 0) + 4 (a3), the fresh completion 4; the
    # reused rest costs nothing.
    assert result.output_tokens == 8 + 10 + 8 + 4 + 4
    assert result.completion_qualities == pytest.approx([-0.1, -0.1])
    assert result.stop_reason == "max_steps"
    assert result.completions == ["a\na2\nThe answer is: \\boxed{1}."] * 2 and result.answer == "1"


def test_the_papers_rollout_per_survivor_is_a_setting_and_a_method():
    result, backend = _run(share_foresight=False, reuse_rollouts=False)
    assert _rollout_prompts(backend) == ["Q:a\n"] * 3 + ["Q:b\n"] + ["Q:a\na2\n", "Q:a\na3\n"] * 2
    assert not any(c.foresight_shared or c.reused_rollouts for step in result.steps for c in step.candidates)
    assert result.output_tokens == 8 + (3 * 6 + 4) + 8 + 4 * 4
    assert result.search_settings["share_foresight"] is False and result.search_settings["reuse_rollouts"] is False
    # The bench's method "mfs-paper" is MFS with both switched off, whatever the defaults.
    settings = paper_settings(prompt_format="raw", step_beam_size=2, num_rollouts=2, width_pruning=False,
                           selection="top_k", max_steps=2, seed=0)
    backend = _model()
    paper = drive(get_decoder("mfs-paper")("Q:", settings), backend)
    assert paper.method == "mfs-paper" and paper.output_tokens == result.output_tokens


def test_each_item_alone():
    # Sharing only (the defaults): the reusable a2 is sampled anew (one request for the pair of
    # copies), and the second a2 beam is completed anew at the finish.
    _, backend = _run()
    assert _rollout_prompts(backend) == ["Q:a\n", "Q:b\n", "Q:a\na2\n", "Q:a\na3\n", "Q:a\na2\n"]
    # Reuse only: each survivor has its own estimate and each beam its own stored rollout:
    # each beam's a2 reuses its beam's rollout; both a3 are sampled.
    result, backend = _run(share_foresight=False, reuse_rollouts=True)
    assert _rollout_prompts(backend) == ["Q:a\n"] * 3 + ["Q:b\n"] + ["Q:a\na3\n"] * 2
    assert [c.reused_rollouts for c in result.steps[1].candidates] == [1, 0, 1, 0]
