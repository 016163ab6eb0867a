"""``python -m experiments.testbed.slip_probe``: the prefixes it builds and what it counts."""

from __future__ import annotations

import random
import re

import pytest

from experiments.testbed.evaluate import step_is_right
from experiments.testbed.problems_v2 import generate_problems
from experiments.testbed.slip_probe import flagged, format_probe, probe, slip_prefixes


def test_a_check_line_flags_a_step_when_it_says_wrong_or_not():
    assert flagged("Check: 90 + 2 = 92, 94 - 92 = 2: wrong. Redo the step.\n94 - 2 = 92")
    assert flagged("Check: 152 - 57 = 95, not 92\n92 + 57 = 149")
    assert not flagged("Check: 149 - 57 = 92\nThe answer is: \\boxed{149}.")
    assert not flagged("Check: 149 - 57 = 92, 92 - 92 = 0\nnot on the first line")


def test_each_problem_gives_a_right_and_a_wrong_prefix_ending_at_the_same_operation():
    problems = generate_problems(20, seed=5)
    prefixes = slip_prefixes(problems, random.Random(1), checks="difference")
    assert len(prefixes) == 40
    for (right_text, right, kind), (wrong_text, wrong, kind2) in zip(prefixes[::2], prefixes[1::2]):
        assert (right, wrong, kind) == (True, False, kind2)
        right_lines, wrong_lines = right_text.rstrip("\n").split("\n"), wrong_text.rstrip("\n").split("\n")
        assert right_lines[:-1] == wrong_lines[:-1]  # the same reference lines before the step
        assert step_is_right(right_lines[-1]) is True and step_is_right(wrong_lines[-1]) is False
        assert all(re.search(r", (\d+) - \1 = 0$", line) for line in right_lines[:-1] if line.startswith("Check"))


def test_probe_counts_every_continuation_on_the_demo_model(demo_backend):
    from mfs_core.settings import MFSSettings

    settings = MFSSettings(device="cpu")
    summary = probe(demo_backend, settings, generate_problems(3, seed=2), seed=4, samples=2, max_tokens=60)
    assert summary["flagged_right"][1] == summary["flagged_wrong"][1] == 6
    assert sum(n for _, n in summary["flagged_wrong_by_kind"].values()) == 6
    assert all(0 <= k <= n for k, n in [summary["flagged_right"], summary["flagged_wrong"]])
    assert 0.0 <= summary["auroc_f"] <= 1.0 and summary["mean_f_right"] < 0 and summary["mean_f_wrong"] < 0
    table = format_probe(summary, "demo")
    assert "flagged after a wrong step" in table and "AUROC of F" in table
    with pytest.raises(ValueError, match="probe needs at least one problem, got 0"):
        probe(demo_backend, settings, [])
