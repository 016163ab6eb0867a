"""``python -m experiments.testbed.evaluate`` on the bundled demo model: a slice samples what the whole run does."""

from __future__ import annotations

import json

from mfs_core.bench.datasets import demo_heldout_path
from experiments.testbed.evaluate import evaluate


def test_a_slice_reproduces_the_whole_runs_questions(demo_backend):
    from mfs_core.prompts import render_question
    from mfs_core.settings import MFSSettings

    records = json.loads(demo_heldout_path().read_text(encoding="utf-8"))[:2]
    prompts = [render_question(r["input"], demo_backend, MFSSettings(device="cpu")) for r in records]
    targets = [float(r["target"]) for r in records]
    options = {"seed": 3, "samples": 2, "rollout_paths": 1, "max_tokens": 48, "chunk": 1, "progress": False}
    whole = evaluate(demo_backend, prompts, targets, **options)
    second = evaluate(demo_backend, prompts[1:], targets[1:], first_index=1, **options)
    assert second == whole[1:]
    shifted = evaluate(demo_backend, prompts[1:], targets[1:], **options)  # seeds of question 0
    assert len(whole[1].steps) > 0 and shifted[0].steps != whole[1].steps
