"""Scoring of the six benchmark sets (and the demo set) on real data.

Gold answers written the way a model writes them must score 100%, wrong ones 0%. The
fixture excerpts (tests/fixtures/data, see its README) always run; the full sets run too
when ``$MFS_DATA_DIR`` or /work/shared/data holds them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mfs_core.bench.datasets import DATASETS, Example, load_dataset
from mfs_core.bench.scoring import (
    KINDS,
    extract_prediction,
    is_correct,
    latex_to_number,
    normalize_latex,
    score_completions,
    score_text,
)
from experiments.testbed.problems import generate_problems

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "data"
FULL = Path(os.environ.get("MFS_DATA_DIR", "/work/shared/data"))
SOURCES = [pytest.param(FIXTURES, id="fixture")]
if (FULL / "gsm_test.json").is_file():
    SOURCES.append(pytest.param(FULL, id="full"))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def gold_response(example: Example) -> str:
    """The gold answer in the model's words, closed by the end marker as the prompts ask."""
    if example.kind in ("gsm", "math", "demo"):
        return f"Some reasoning.\nThe answer is: \\boxed{{{_number(example.target)}}}.<end_of_reasoning>"
    if example.kind in ("reclor", "logiqa"):
        return f"Option A ignores the passage.\nThe answer is: {'ABCD'[example.target]}.<end_of_reasoning>"
    return f"Option A is wrong.\nThe answer is {example.target}."


def wrong_response(example: Example) -> str:
    """A well-formed answer that is not the gold one."""
    if example.kind in ("gsm", "math", "demo"):
        return f"The answer is: \\boxed{{{_number(float(example.target) + 1)}}}."
    if example.kind in ("reclor", "logiqa"):
        return f"The answer is: {'ABCD'[(example.target + 1) % 4]}."
    options = "1234" if example.target in "1234" else "ABCD"
    return f"The answer is {options[(options.index(example.target) + 1) % 4]}."


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_gold_answers_score_all_and_wrong_answers_none(source: Path, name: str) -> None:
    dataset = load_dataset(name, data_dir=source)
    assert dataset.examples, name
    gold = [score_text(ex.kind, gold_response(ex), ex.target) for ex in dataset.examples]
    wrong = [score_text(ex.kind, wrong_response(ex), ex.target) for ex in dataset.examples]
    assert sum(v.correct for v in gold) == len(dataset.examples)
    assert sum(v.correct for v in wrong) == 0
    assert all(v.prediction is not None for v in wrong)


def test_full_sets_have_the_release_sizes() -> None:
    if not (FULL / "gsm_test.json").is_file():
        pytest.skip(f"the full sets are not in {FULL}")
    for name, spec in DATASETS.items():
        assert len(load_dataset(name, data_dir=FULL).examples) == spec.size


def test_demo_solutions_score_all() -> None:
    problems = generate_problems(50, seed=11)
    verdicts = [score_text("demo", p.solution, float(p.answer)) for p in problems]
    assert all(v.correct for v in verdicts)
    assert [v.prediction for v in verdicts] == [str(p.answer) for p in problems]


# (kind, response, gold, expected prediction, expected verdict)
HARD_CASES = [
    ("gsm", r"The answer is: \boxed{18}.", 18.0, "18", True),
    ("gsm", r"The answer is: \boxed{18}.<end_of_reasoning>", 18.0, "18", True),
    ("gsm", "The answer is: $18.00", 18.0, "18", True),
    ("gsm", r"The answer is: \boxed{\$18.00}.", 18.0, "18", True),
    ("gsm", r"The answer is: \boxed{18.}", 18.0, "18", True),
    ("gsm", "The answer is: 18.", 18.0, "18", True),
    ("gsm", r"The answer is: \boxed{1,234}.", 1234.0, "1234", True),
    ("gsm", r"The answer is: \boxed{-10}.", -10.0, "-10", True),
    ("gsm", r"The answer is: \boxed{50\%}.", 50.0, "50", True),
    ("gsm", r"The answer is: \boxed{\frac{1}{2}}.", 0.5, "0.5", True),
    ("gsm", "She pays 3 + 4 = 7 dollars", 7.0, "7", True),  # no box: the last number
    ("gsm", r"The answer is: \boxed{17}.", 18.0, "17", False),
    ("gsm", "I do not know.", 18.0, None, False),
    ("math", r"The answer is: \boxed{\frac{1}{2}}", 0.5, "0.5", True),
    ("math", r"The answer is: \boxed{\dfrac{1}{2}}.<end_of_reasoning>", 0.5, "0.5", True),
    ("math", r"The answer is: \boxed{\frac12}", 0.5, "0.5", True),
    ("math", r"The answer is: \boxed{-\frac{3}{4}}", -0.75, "-0.75", True),
    ("math", r"The answer is: \boxed{0.5}", 0.5, "0.5", True),
    ("math", r"The answer is: \boxed{10,\!000}", 10000.0, "10000", True),
    ("math", r"The answer is: \boxed{90^\circ}", 90.0, "90", True),
    ("math", r"The answer is: \boxed{5 \text{ cm}}", 5.0, "5", True),
    ("math", r"The answer is: \boxed{\sqrt{5}}", 2.2360679775, r"\sqrt{5}", False),
    ("math", r"The answer is: \boxed{\frac{1}{3}}", 0.5, "0.333333333333", False),
    ("math", r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})", True),
    ("math", "The answer is: 4<end_of_reasoning>", 4.0, "4", True),
    ("gpqa", "The answer is C.", "C", "C", True),
    ("gpqa", "The answer is: (C)<end_of_reasoning>", "C", "C", True),
    ("gpqa", "The answer is: \\boxed{C}", "C", "C", True),
    ("gpqa", "The answer is: c", "C", None, False),
    ("arc", "The answer is: B.", "C", "B", False),
    ("arc", "The answer is 2.", "2", "2", True),
    ("reclor", "The answer is: C.<end_of_reasoning>", 2, "2", True),
    ("reclor", "The answer is D", 2, "3", False),
    ("logiqa", "The answer is B.", 1, "1", True),
    ("logiqa", "The answer is E.", 4, None, False),  # LogiQA has four options
    ("reclor", "The answer is E.", 4, "4", True),  # the release's ReClor reader accepts E
]


@pytest.mark.parametrize(("kind", "response", "gold", "prediction", "verdict"), HARD_CASES)
def test_hard_cases(kind: str, response: str, gold: object, prediction: str | None, verdict: bool) -> None:
    result = score_text(kind, response, gold)
    assert result.prediction == prediction
    assert result.correct is verdict


def test_boxed_is_read_with_balanced_braces_unlike_the_release_regex() -> None:
    # The release's r"\\boxed\{(.*?)\}" would read "\frac{1" here and score it wrong.
    assert extract_prediction("math", r"so \boxed{\frac{1}{2}} and then \boxed{\frac{3}{4}}") == "0.75"


def test_latex_helpers() -> None:
    assert normalize_latex(r"$\dfrac{1}{2}$.") == r"\frac{1}{2}"
    assert normalize_latex(r"\left( 1, 2 \right)") == "(1,2)"
    assert latex_to_number(r"\tfrac{3}{6}") == 0.5
    assert latex_to_number("-7/2") == -3.5
    assert latex_to_number(r"\frac{1}{0}") is None
    assert latex_to_number(r"x + 1") is None


def test_majority_vote_over_completions_groups_equal_numbers() -> None:
    texts = [r"\boxed{\frac{1}{2}}", r"\boxed{0.5}", r"\boxed{7}", r"\boxed{7}", r"\boxed{0.50}"]
    verdict = score_completions("math", texts, 0.5)
    assert verdict.prediction == "0.5"
    assert verdict.correct
    # A tie goes to the group holding the best-quality path.
    tie = score_completions("gsm", [r"\boxed{3}", r"\boxed{4}"], 4.0, qualities=[-1.0, -0.2])
    assert (tie.prediction, tie.correct) == ("4", True)
    none = score_completions("gpqa", ["no idea", "still none"], "A")
    assert (none.prediction, none.correct) == (None, False)


def test_errors_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match="unknown answer kind 'chess'"):
        score_text("chess", "The answer is: 1", 1)
    with pytest.raises(ValueError, match="at least one response"):
        score_completions("gsm", [], 1.0)
    assert is_correct("gsm", None, 18.0) is False
    assert set(KINDS) == {"gsm", "math", "gpqa", "arc", "reclor", "logiqa", "demo"}
