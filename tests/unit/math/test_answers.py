"""Answer extraction and the majority vote."""

import pytest

from mfs_core.answers import (
    arithmetic_value,
    extract_answer,
    extract_boxed,
    extract_option,
    majority_vote,
    normalize_answer,
    parse_options,
)


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 64 + 4 * 8 = 128 + 32 = 264", "264"),  # SmolLM2 on GSM8K: never the expression
        ("The answer is: 128 + 32.", "160"),
        ("The answer is: \\boxed{3 + 4 = 7}", "7"),
        ("The answer is: $1,200 / 4", "300"),
        ("The answer is: (C) Planetary days will become shorter.", "C"),
        ("The answer is: C. Planetary days", "C"),
        ("The answer is: x = y + 1", "y + 1"),
        ("The answer is: \\boxed{2", "2"),  # cut off by the token cap
        ("The answer is: \\boxed{\\frac{1}{2}", "\\boxed{\\frac{1}{2}"),  # nested braces: left as written
    ],
)
def test_a_calculation_gives_its_result_and_a_labelled_option_its_letter(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("expression", "value"),
    [("64 + 4 * 8", "96"), ("(3 + 4) * 2", "14"), ("7", "7"), ("10 / 4", "2.5"), ("1/0", None), ("x+1", None),
     ("2 ** 10", None), ("", None)],
)
def test_arithmetic_value(expression, value):
    assert arithmetic_value(expression) == value


@pytest.mark.parametrize(
    ("text", "letters", "expected"),
    [
        ("The answer is: (C)", "ABCD", "C"),
        ("The answer is: C. Planetary days will become shorter.", "ABCD", "C"),
        ("The correct answer is (B) buildings will be made safer", "ABCD", "B"),
        ("Answer: option D", "ABCD", "D"),
        ("Option B is correct.", "ABCD", "B"),
        ("The best choice is D", "ABCD", "D"),
        ("The answer is:\n\n(B) buildings will be made safer", "ABCD", "B"),
        ("so \\boxed{A}", "ABCD", "A"),
        ("The answer is a planet that spins. (B)", "ABCD", "B"),  # "a" is the article
        ("The answer is: Because light is absorbed", "ABCD", None),  # the release read "B"
        ("(A) fast\n(B) safe\n(C) nice\n(D) cheap", "ABCD", None),  # listing the options is no choice
        ("To answer this, compare (A) and (B).", "ABCD", None),
        ("The answer is C. No wait, the answer is D.", "ABCD", "D"),  # the last statement
        ("The answer is E.", "ABCD", None),
        ("The answer is E.", "ABCDE", "E"),
        ("The answer is 2.", "1234", "2"),
    ],
)
def test_extract_option_reads_the_chosen_letter(text, letters, expected):
    assert extract_option(text, letters) == expected


QUESTION = (
    "Which best describes the disease?\n(A) a non-infectious, cell-cycle disease\n(B) an infectious, cell-cycle disease\n"
    "(C) a 78°F day\n(D) from the ice to the tea"
)


def test_parse_options_reads_labelled_lines():
    assert parse_options(QUESTION) == {"A": "a non-infectious, cell-cycle disease",
                                       "B": "an infectious, cell-cycle disease", "C": "a 78°F day",
                                       "D": "from the ice to the tea"}
    assert parse_options("Passage: x\nA. red\nB. blue") == {"A": "red", "B": "blue"}
    assert parse_options("No options here.\nA. just one") == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3. The answer is: A non-infectious, cell-cycle disease.", "A"),  # SmolLM2 on ARC-C: the text, no letter
        ("The correct answer is from the ice to the tea.", "D"),
        ("The answer is: an infectious, cell-cycle disease", "B"),
        ("The answer is: 78°F day", "C"),  # the statement is part of one option's text
        ("The answer is: cell-cycle disease", None),  # part of two options' texts: no choice
        ("The answer is: the sun", None),
        ("The answer is (B), not a non-infectious, cell-cycle disease", "B"),  # a letter comes first
    ],
)
def test_an_option_given_by_its_text_reads_as_its_letter(text, expected):
    assert extract_option(text, "ABCD", parse_options(QUESTION)) == expected
    assert extract_option(text, "ABCD") == ("B" if expected == "B" and "(B)" in text else None)
