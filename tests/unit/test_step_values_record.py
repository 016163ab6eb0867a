"""docs/benchmarks.md's "Why `mfs` stops after about three steps" against the traces kept in
benchmarks/results/issue43-bed/ (``testbed/step_values.py``'s condensed MFS traces of the tuning questions).

The per-step table, the searches' counts and F's persistence are recomputed from
``step-values.traces.jsonl`` with the script's own functions (:func:`testbed.step_values.step_table`,
:func:`testbed.step_values.persistence`), so the section cannot drift from the traces behind it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from testbed.step_values import persistence, step_table

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "benchmarks" / "results" / "issue43-bed" / "step-values.traces.jsonl"
BED_ANSWERS = ROOT / "benchmarks" / "results" / "issue43-bed" / "bed-t05.answers.jsonl"
BENCHMARKS = " ".join((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").split())
SECTION = BENCHMARKS[BENCHMARKS.index("**Why `mfs` stops after about three steps**"):][:6000]


def _searches() -> list[dict]:
    """The kept traces of the questions the section reports (the first N of the tuning split)."""
    quoted = re.search(r"On the (\d+) searches \((\d+) answered right;", SECTION)
    assert quoted, "the section's count sentence changed shape"
    rows = {row["question"]: row for row in map(json.loads, TRACES.read_text(encoding="utf-8").splitlines())}
    count = int(quoted.group(1))
    assert set(range(count)) <= set(rows), "the traces lack a question the section reports"
    return [rows[q] for q in range(count)]


def _signed(value: float) -> str:
    """A value in nats as the table prints it: sign and 3 decimals ("+0.031", "-0.000")."""
    return f"{value:+.3f}"


def test_the_count_sentence_is_recomputed_from_the_traces():
    """Searches, right answers, output tokens and steps per question and convergence stops."""
    rows = _searches()
    quoted = re.search(r"On the (\d+) searches \((\d+) answered right;.*?\), ([\d,]+) output tokens and ([\d.]+) steps "
                       r"per question, (\d+) stopped by convergence", SECTION)
    assert quoted, "the section's count sentence changed shape"
    assert quoted.groups() == (
        str(len(rows)), str(sum(r["correct"] for r in rows)),
        f"{sum(r['output_tokens'] for r in rows) / len(rows):,.0f}",
        f"{sum(len(r['steps']) for r in rows) / len(rows):.1f}",
        str(sum(r["stop_reason"] == "converged" for r in rows)))


def test_the_bed_comparison_is_recomputed_from_the_bed_answers():
    """Greedy's right answers on the same questions and one sample's accuracy at T = 0.5 (the test bed's kept
    answers, 16 samples per question)."""
    count = len(_searches())
    quoted = re.search(r"greedy answers (\d+) of these (\d+), one sample at T = 0\.5 ([\d.]+)%\)", SECTION)
    assert quoted, "the bed comparison changed shape"
    bed = [row for row in map(json.loads, BED_ANSWERS.read_text(encoding="utf-8").splitlines())
           if row["question"] < count]
    greedy = [row["samples"][0]["right"] for row in bed if row["run"] == "greedy:none"]
    sampled = [sample["right"] for row in bed if row["run"] == "T=0.5" for sample in row["samples"]]
    assert len(greedy) == count and len(sampled) == 16 * count
    assert quoted.groups() == (str(sum(greedy)), str(count), f"{100 * sum(sampled) / len(sampled):.1f}")


def test_the_step_table_is_recomputed_from_the_traces():
    """Every row of the per-step table: searches and convergence at t, scored candidates, max V, share V > ε,
    the chosen beams' advantage and their children's V (nats)."""
    table = step_table([r["steps"] for r in _searches()])
    quoted = re.findall(r"\| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([+-][\d.]+) \| ([\d.]+) \| ([+-][\d.]+) \| "
                        r"([+-][\d.]+) \|", SECTION)
    assert quoted, "the step table changed shape"
    assert [int(row[0]) for row in quoted] == [row["t"] for row in table if row["reached"] >= 5]
    assert "(the steps that at least 5 searches reached)" in SECTION
    for row in quoted:
        expected = table[int(row[0])]
        assert row[1:] == (str(expected["reached"]), str(expected["converged"]), f"{expected['scored']:.2f}",
                           _signed(expected["max_value"]), f"{expected['positive_share']:.2f}",
                           _signed(expected["advantage"]), _signed(expected["children_value"])), row[0]
    fired = re.search(r"\((\d+) of (\d+) searches at t = 1, (\d+) of the (\d+) left at t = 2\)", SECTION)
    assert fired, "the convergence sentence changed shape"
    assert fired.groups() == tuple(str(n) for n in (table[1]["converged"], table[1]["reached"], table[2]["converged"],
                                                    table[2]["reached"]))


def test_the_persistence_is_recomputed_from_the_traces():
    """F's persistence from parent to child, its 95% bootstrap interval (2,000 resamples, seed 0) and pairs."""
    result = persistence([r["steps"] for r in _searches()], resamples=2000, seed=0)
    quoted = re.search(r"is ([\d.]+) with a 95% interval of (-?[\d.]+) to (-?[\d.]+) over (\d+) pairs", SECTION)
    assert quoted, "the persistence sentence changed shape"
    assert quoted.groups() == (f"{result['persistence']:.2f}", f"{result['low']:.2f}", f"{result['high']:.2f}",
                               str(result["pairs"]))
    assert "(the interval excludes 1)" in SECTION and "(it includes 0)" in SECTION
    assert result["low"] < 0 < result["high"] < 1
