"""The independent trace checker (tests/trace_invariants.py) over real decodes of the demo model.

20 held-out questions (indices 100-119 of mfs_core/demo/heldout.json; nothing is tuned on
them), each setting decoded in one batch, every result checked from its JSON alone. Most
settings decode the first 6 to 12 of them (``QUESTIONS``), so the module's decodes stay near a
minute of CI's 30 on 2 cores.
"""

from __future__ import annotations

import copy
import json

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.bench.datasets import load_dataset
from tests.trace_invariants import assert_trace, trace_violations

pytestmark = pytest.mark.slow  # 48 decodes: a minute or two on 2 busy CPU cores

SETTINGS = {
    # The bench's CPU search (M = N = 4) with the library's defaults (one estimate per distinct path).
    "paper": {"step_beam_size": 4, "num_rollouts": 4},
    # The paper's rollout per survivor, and sharing with the parent's rollout reused.
    "per_survivor": {"step_beam_size": 3, "num_rollouts": 3, "share_foresight": False},
    "share_reuse": {"step_beam_size": 4, "num_rollouts": 4, "reuse_rollouts": True},
    # The release's variants, the old convergence finish, no finished candidates while open.
    "release": {"step_beam_size": 3, "num_rollouts": 3, "selection": "top_k", "baseline": "parent_step",
                "stop_epsilon": 1e-4, "max_finished_fraction": 0.0, "min_steps": 2,
                "convergence_finish": "converged_rollouts"},
    # Loose stop from t = 0 (convergence at the root), λ1 = 0.4, hotter rollouts.
    "loose": {"step_beam_size": 2, "num_rollouts": 3, "prune_lambda": 0.4, "min_steps": 0, "stop_epsilon": 0.05,
              "rollout_temperature": 1.0, "max_steps": 4},
    # The 'w/o stopping' ablation: searches run until every candidate has finished (the v3 demo
    # model's check lines are near-certain, V <= 0 after them, so with the stop on, the other
    # settings converge or run out of steps and none reaches the finished pool's end).
    "no_stop": {"step_beam_size": 2, "num_rollouts": 2, "early_stopping": False, "max_steps": 16},
    # The weighted vote over every rollout with the answer stop on its effective counts; the convergence
    # test needs two paths, so searches run long enough for the answer stop to decide some.
    "weighted": {"step_beam_size": 4, "num_rollouts": 4, "vote_rollouts": "weighted", "answer_stop_confidence": 0.9,
                 "convergence_min_paths": 2},
}
QUESTIONS = {"paper": 6, "per_survivor": 6, "share_reuse": 10, "release": 8, "loose": 12, "no_stop": 8, "weighted": 6}
"""Questions decoded per setting where fewer than all 20."""


@pytest.fixture(scope="module")
def questions():
    return [ex.question for ex in load_dataset("demo", offset=100, limit=20).examples]


@pytest.fixture(scope="module")
def decodes(demo_backend, questions):
    engine = MFSEngine.from_settings(MFSSettings(device="cpu"))
    return {name: [json.loads(r.to_json()) for r in engine.decode(questions[: QUESTIONS.get(name, 20)],
                                                                    settings=engine.settings.model_copy(update=overrides))]
            for name, overrides in SETTINGS.items()}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_decode_keeps_the_trace_invariants(decodes, name):
    results = decodes[name]
    assert len(results) == QUESTIONS.get(name, 20)
    for i, data in enumerate(results):
        problems = trace_violations(data)
        assert not problems, f"question {100 + i}: {problems}"


def test_the_settings_reach_every_stop_reason_and_finish(decodes):
    reasons = {name: {r["stop_reason"] for r in results} for name, results in decodes.items()}
    seen = set().union(*reasons.values())
    assert {"converged", "all_finished"} <= seen, reasons
    # The loose stop converges at the root for some question (M sampled completions).
    assert any(r["stop_reason"] == "converged" and len(r["steps"]) == 1 for r in decodes["loose"]), reasons


def _first(decodes, predicate):
    for results in decodes.values():
        for data in results:
            if predicate(data):
                return copy.deepcopy(data)
    pytest.fail("no decode to corrupt")


def _rolled(data):
    return next(c for s in data["steps"] for c in s["candidates"] if c["step_value"] is not None)


CORRUPTIONS = {
    "step value": lambda d: _rolled(d).update(step_value=_rolled(d)["step_value"] + 1e-3),
    "foresight F": lambda d: _rolled(d).update(foresight_quality=_rolled(d)["foresight_quality"] - 0.01),
    "σ": lambda d: next(s for s in d["steps"] if s["std_score"] is not None).update(
        std_score=next(s for s in d["steps"] if s["std_score"] is not None)["std_score"] + 1e-3),
    "pruned flag": lambda d: _rolled(d).update(pruned=True),
    "stop reason": lambda d: d.update(stop_reason="max_steps" if d["stop_reason"] != "max_steps" else "converged"),
    "ε_stop": lambda d: d["steps"][-1].update(stop_epsilon=-1.0),
    "output tokens": lambda d: d.update(output_tokens=d["output_tokens"] + 1),
    "FLOPs": lambda d: d.update(flops=d["flops"] * 1.001),
    "vote share": lambda d: d.update(vote_share=d["vote_share"] / 2 + 0.01),
    "completion": lambda d: d["completions"].__setitem__(-1, "tampered " + d["completions"][-1]),
    "shared estimate": lambda d: next(c for s in d["steps"] for c in s["candidates"] if c["foresight_shared"]).update(
        rollout_tokens=3),
}


@pytest.mark.parametrize("what", list(CORRUPTIONS))
def test_a_corrupted_trace_is_caught(decodes, what):
    data = _first(decodes, lambda d: d["stop_reason"] == "converged" and len(d["steps"]) > 1
                  and any(s["std_score"] for s in d["steps"]))
    assert_trace(data)
    CORRUPTIONS[what](data)
    with pytest.raises(AssertionError, match="trace invariants broken"):
        assert_trace(data)


def test_a_corrupted_vote_weight_is_caught(decodes):
    data = copy.deepcopy(decodes["weighted"][0])
    assert_trace(data)
    data["completion_weights"][-1] += 1.0
    with pytest.raises(AssertionError, match="trace invariants broken"):
        assert_trace(data)
