"""Answer extraction and the majority vote."""

import pytest

from mfs_core.answers import extract_answer, extract_boxed, majority_vote, normalize_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 + 4 = 7\nThe answer is: \\boxed{7}.", "7"),
        ("The answer is: \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("so \\boxed{3} then \\boxed{18.00}", "18"),
        ("The answer is C.", "C"),
        ("The answer is: (B)", "B"),
        ("The answer is 42.<end_of_reasoning>", "42"),
        ("The answer is $1,200.", "1200"),
        ("no answer here", None),
        ("\\boxed{unclosed", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_extract_boxed_balances_braces():
    assert extract_boxed("x \\boxed{\\sqrt{5}} y") == "\\sqrt{5}"


@pytest.mark.parametrize(("raw", "norm"), [("18.00", "18"), ("$18$", "18"), ("18.", "18"), ("0.50", "0.5"), ("x+1", "x+1")])
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_majority_vote_counts_and_breaks_ties_by_quality():
    vote = majority_vote(["7", "8", "7", None], [-0.5, -0.1, -0.3, -0.05])
    assert (vote.answer, vote.vote_share, vote.index) == ("7", 0.5, 2)
    # Tie 1-1: the answer whose best path has the higher F wins.
    tie = majority_vote(["7", "8"], [-0.5, -0.4])
    assert (tie.answer, tie.vote_share, tie.index) == ("8", 0.5, 1)


def test_majority_vote_without_answers_returns_the_best_path():
    vote = majority_vote([None, None], [-2.0, -1.0])
    assert (vote.answer, vote.vote_share, vote.index) == (None, 0.0, 1)


def test_majority_vote_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one path"):
        majority_vote([], [])
    with pytest.raises(ValueError, match="differ in length: 1 != 2"):
        majority_vote(["1"], [0.0, 1.0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is: A total of 12 apples.", "12"),
        ("answer is I think 42", "42"),
        ("The answer is (B)", "B"),
        ("The answer is: B.", "B"),
        ("The answer is 18 dollars.", "18"),
        ("The answer is: x+1", "x+1"),
        ("The answer is \\frac{1}{2}", "\\frac{1}{2}"),
    ],
)
def test_option_letters_only_stand_alone(text, expected):
    assert extract_answer(text) == expected


def test_option_letters_of_a_multiple_choice_task():
    # With the task's options a leading letter is the answer; without them it is not.
    assert extract_answer("The answer is B, because the passage says so.", options="ABCD") == "B"
    assert extract_answer("The answer is B, because the passage says so.") == "B, because the passage says so"
    # A letter outside the options is no option.
    assert extract_answer("The answer is F, surely 3.", options="ABCD") == "3"
