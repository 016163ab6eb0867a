"""The fresh held-out sets of the v3 demo model ship, load by name and overlap no earlier set.

``demo-fresh`` (``heldout_fresh.json``, seed 20261126) was measured once, after the first tuning;
``demo-fresh2`` (``heldout_fresh2.json``, seed 20261127) is kept for the measurement after the
second tuning. Each is what ``experiments/testbed/fresh_heldout.py`` regenerates from its seed, and none of
its questions is in the v1, v2 or v3 held-out sets or in the other fresh set.
"""

from __future__ import annotations

import json

import pytest

from mfs_core.bench.datasets import demo_heldout_path, load_dataset
from experiments.testbed.fresh_heldout import FRESH2_SEED, FRESH_SEED, FRESH_SIZE, earlier_heldout_questions, fresh_problems

SETS = {"demo-fresh": ("heldout_fresh.json", FRESH_SEED), "demo-fresh2": ("heldout_fresh2.json", FRESH2_SEED)}


@pytest.mark.parametrize("name", list(SETS))
def test_the_fresh_set_loads_by_name(name):
    data = load_dataset(name)
    assert (data.name, data.kind, data.total, len(data.examples)) == (name, "demo", FRESH_SIZE, FRESH_SIZE)
    assert data.path == demo_heldout_path().with_name(SETS[name][0])
    assert load_dataset(name, offset=100, limit=5).examples[0].index == 100


@pytest.mark.parametrize("name", list(SETS))
def test_the_fresh_set_is_its_seed_regenerated_and_overlaps_no_earlier_set(name):
    file, seed = SETS[name]
    path = demo_heldout_path().with_name(file)
    rows = json.loads(path.read_text(encoding="utf-8"))
    assert rows == [{"input": p.question, "target": float(p.answer)} for p in fresh_problems(FRESH_SIZE, seed, path)]
    questions = {row["input"] for row in rows}
    assert len(questions) == FRESH_SIZE
    assert not questions & earlier_heldout_questions(path)  # v1-v3 held-out sets and the other fresh set


def test_the_two_fresh_sets_are_disjoint():
    first, second = ({row["input"] for row in json.loads(demo_heldout_path().with_name(f).read_text(encoding="utf-8"))}
                     for f, _ in SETS.values())
    assert not first & second
