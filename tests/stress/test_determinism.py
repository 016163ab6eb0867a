"""Determinism on the demo model: the same seed and settings give the same result across
runs, batch compositions and torch thread counts (20 held-out questions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mfs_core import MFSEngine, MFSSettings

pytestmark = pytest.mark.slow

WAIT = 600.0
SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 3, "max_answer_tokens": 48, "max_step_tokens": 24, "seed": 11}
HELDOUT = Path(__file__).resolve().parents[2] / "mfs_core" / "demo" / "heldout.json"


def _comparable(result):
    data = result.to_dict()
    data.pop("wall_seconds")
    return data


@pytest.fixture(scope="module")
def setup(demo_backend):
    engine = MFSEngine(demo_backend, MFSSettings(device="cpu", **SEARCH))
    questions = [item["input"] for item in json.loads(HELDOUT.read_text())[100:120]]
    reference = [_comparable(r) for r in engine.decode(questions, timeout=WAIT)]
    return engine, questions, reference


def test_same_seed_same_results_run_after_run(setup):
    engine, questions, reference = setup
    assert [_comparable(r) for r in engine.decode(questions, timeout=WAIT)] == reference


def test_results_do_not_depend_on_the_batch_they_are_decoded_in(setup):
    engine, questions, reference = setup
    alone = [_comparable(engine.decode([q], timeout=WAIT)[0]) for q in questions]
    assert alone == reference
    # reversed order, in two batches of ten, submitted together with the other half
    first = engine.submit_prompts([engine.render(q) for q in reversed(questions[:10])])
    second = engine.submit_prompts([engine.render(q) for q in reversed(questions[10:])])
    mixed = [_comparable(f.result(timeout=WAIT)) for f in first[::-1] + second[::-1]]
    assert mixed == reference


@pytest.mark.parametrize("threads", [1, 2])
def test_results_do_not_depend_on_the_torch_thread_count(setup, threads):
    engine, questions, reference = setup
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert [_comparable(r) for r in engine.decode(questions, timeout=WAIT)] == reference
    finally:
        torch.set_num_threads(before)
