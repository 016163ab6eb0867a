"""Scoring of the six benchmark sets, as the MFS release's corrected eval scripts do it.

Rewritten from ``eval/eval_*.py`` of ``miraclehetech/EACL2026-Martingale-Foresight-Sampling``:

| kind | answer read from a response | correct when |
| --- | --- | --- |
| ``gsm``, ``demo`` | last ``\\boxed{}``, else ``<boxed></boxed>``, else the whole text; then its last number (``$``, ``,`` and ``%`` dropped; ``a/b`` and ``\\frac{a}{b}`` as fractions) | ``|pred - gold| < 1e-5`` |
| ``math`` | last ``\\boxed{}``, else ``<boxed>``, else after ``answer is:``, else the last 100 characters; LaTeX normalised (``\\frac``, ``\\dfrac``, ``\\left``, ``\\!``, ``\\text{}``, ``^\\circ``, ``\\%``) then read as a number | numeric: ``|pred - gold| < 1e-5``; a non-numeric gold: equal normalised strings |
| ``gpqa``, ``arc`` | the option letter of the last statement of a choice (:func:`mfs_core.answers.extract_option`: ``A-E`` for GPQA, ``A-D`` for ARC; ``1-4`` when the gold is a digit, a few ARC questions) | the letter equals the gold |
| ``reclor``, ``logiqa`` | the same, ``A-E`` (ReClor) / ``A-D`` (LogiQA), as an index | the index equals the gold label |

Differences from the release, all on purpose: ``\\boxed{}`` is read with balanced braces
(the release's non-greedy regex reads ``\\boxed{\\frac{1}{2}}`` as ``\\frac{1``, scoring a
right answer wrong); ``\\frac`` is understood in GSM8K answers too; a question without an
extractable answer counts as wrong (the release's letter-answer scripts drop it from the
denominator); votes break ties by path quality instead of first occurrence; an option letter
must stand alone in a statement of the choice ("The answer is: (C)", "Answer: option C",
"\\boxed{C}", "Option C is correct"): the release takes the first capital ``A-D`` anywhere after
the last "answer is" (``"The answer is: Because ..."`` reads ``B``) and, with no "answer is" at
all, anywhere in the response (a response that only lists the options reads ``A``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mfs_core.answers import OptionAnswer, extract_boxed, extract_option, majority_vote, parse_options

__all__ = [
    "KINDS",
    "Verdict",
    "answer_key",
    "extract_prediction",
    "is_correct",
    "latex_to_number",
    "normalize_latex",
    "score_completions",
    "score_text",
]

KINDS = ("gsm", "math", "gpqa", "arc", "reclor", "logiqa", "demo")
"""Answer formats: numeric (gsm, demo), LaTeX (math), option letter (gpqa, arc), option index (reclor, logiqa)."""

_TOLERANCE = 1e-5
_NUMBER = re.compile(r"[+-]?\s*\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s*%?")
_SIGNED = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")
_FRACTION = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_LATEX_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)(\d)")
_HTML_BOXED = re.compile(r"<boxed>(.*?)</boxed>", re.DOTALL | re.IGNORECASE)
_LETTERS = {"gpqa": "ABCDE", "arc": "ABCD", "reclor": "ABCDE", "logiqa": "ABCD"}


@dataclass(frozen=True)
class Verdict:
    """The score of one question.

    Attributes:
        prediction: the answer read from the response(s), canonical (a number as
            ``"18"`` / ``"0.5"``, a normalised LaTeX string, a letter, or an index as
            ``"2"``); None when none could be read.
        correct: the prediction matches the gold answer.
    """

    prediction: str | None
    correct: bool


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        msg = f"unknown answer kind {kind!r}; known: {list(KINDS)}"
        raise ValueError(msg)


def _format_number(value: float) -> str:
    """Canonical text of a number: ``18.0 -> "18"``, ``0.5 -> "0.5"`` (12 significant digits)."""
    if value == 0:
        value = 0.0  # no "-0"
    return f"{value:.12g}"


def _boxed_or_tagged(text: str) -> str | None:
    """Content of the last ``\\boxed{}`` (balanced braces), else of the last ``<boxed></boxed>``."""
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed
    tagged = _HTML_BOXED.findall(text)
    return tagged[-1] if tagged else None


def _numeric_answer(text: str) -> float | None:
    """GSM8K rule: a lone fraction, else the last number (``$``, ``,``, ``%`` dropped)."""
    text = _LATEX_FRAC.sub(r"\1/\2", text).strip()
    fraction = _FRACTION.search(text)
    if fraction and not re.search(r"\d", text.replace(fraction.group(0), "")):
        denominator = float(fraction.group(2))
        return float(fraction.group(1)) / denominator if denominator else None
    numbers = _NUMBER.findall(text)
    if not numbers:
        return None
    last = numbers[-1].replace(" ", "").replace("$", "").replace(",", "").rstrip("%")
    try:
        return float(last)
    except ValueError:  # a bare sign
        return None


def normalize_latex(answer: str) -> str:
    """LaTeX answer text in a canonical form for comparison.

    Drops ``$``, spaces, ``\\left``/``\\right``, ``\\!``/``\\,``/``\\;`` spacing, a trailing unit
    ``\\text{ cm}``, ``\\text{}`` wrappers, degrees, ``\\%``, thousands commas between digits and a trailing period;
    writes ``\\dfrac``/``\\tfrac`` as ``\\frac`` and ``\\frac12`` as ``\\frac{1}{2}``.
    """
    s = answer.strip().rstrip(".").strip().strip("$")
    s = s.replace("\\left", "").replace("\\right", "")
    for spacing in ("\\!", "\\,", "\\;", "\\:", "\\ ", "~"):
        s = s.replace(spacing, "")
    if "\\text{ " in s:  # a unit after the value, as Hendrycks et al.'s _remove_right_units
        s = s.split("\\text{ ")[0]
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\mbox\{([^{}]*)\}", r"\1", s)
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\%", "").replace("%", "").replace("\\$", "")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = _LATEX_FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
    s = re.sub(r"(\d),(?=\d{3}(?!\d))", r"\1", s)
    s = s.replace("{,}", "")
    s = re.sub(r"\s+", "", s)
    return s.rstrip(".")


def latex_to_number(answer: str) -> float | None:
    """The value of a LaTeX answer that is a number or a (signed) fraction, else None.

    ``"\\frac{1}{2}"``, ``"-\\dfrac{3}{4}"``, ``"0.5"``, ``"1/2"``, ``"18"`` give numbers;
    ``"\\sqrt{5}"`` and ``"(3, 4)"`` give None.
    """
    s = normalize_latex(answer)
    match = re.fullmatch(r"([+-]?)\\frac\{([+-]?\d*\.?\d+)\}\{([+-]?\d*\.?\d+)\}", s)
    if match:
        denominator = float(match.group(3))
        if denominator == 0:
            return None
        value = float(match.group(2)) / denominator
        return -value if match.group(1) == "-" else value
    match = re.fullmatch(r"([+-]?\d*\.?\d+)/(\d*\.?\d+)", s)
    if match:
        denominator = float(match.group(2))
        return float(match.group(1)) / denominator if denominator else None
    if _SIGNED.fullmatch(s):
        return float(s)
    return None


def _lenient_number(answer: str) -> float | None:
    """The release's reading of a MATH answer: a ``\\frac``, else ``a/b``, else the last number."""
    s = normalize_latex(answer).replace(",", "")
    frac = _LATEX_FRAC.search(s)
    if frac:
        numerators, denominators = _SIGNED.findall(frac.group(1)), _SIGNED.findall(frac.group(2))
        if numerators and denominators and float(denominators[0]) != 0:
            value = float(numerators[0]) / float(denominators[0])
            negative = re.search(r"(^|[^\d])-\\frac", s) is not None
            return -value if negative else value
    fraction = re.search(rf"({_SIGNED.pattern})\s*/\s*({_SIGNED.pattern})", s)
    if fraction and float(fraction.group(2)) != 0:
        return float(fraction.group(1)) / float(fraction.group(2))
    numbers = _SIGNED.findall(s)
    return float(numbers[-1]) if numbers else None


def _math_answer(text: str) -> str | None:
    """MATH rule: boxed, else ``<boxed>``, else after ``answer is:``, else the last 100 characters.

    A boxed answer that is a number or a fraction becomes that number; other boxed LaTeX is
    kept normalised (``is_correct`` still reads a number from it for a numeric gold, as the
    release does). Unboxed answers are read as numbers.
    """
    content = _boxed_or_tagged(text)
    if content is not None:
        value = latex_to_number(content)
        if value is not None:
            return _format_number(value)
        return normalize_latex(content) or None
    content = text.split("answer is:")[-1] if "answer is:" in text else text[-100:]
    value = _lenient_number(content.split("<end_of_reasoning>")[0])
    return _format_number(value) if value is not None else None


def answer_key(kind: str, question: str) -> OptionAnswer | None:
    """The answer key a decode of ``question`` votes by: for a multiple-choice kind (GPQA,
    ARC, ReClor, LogiQA) the question's :class:`~mfs_core.answers.OptionAnswer` (paths
    grouped by the option they choose, the answer trigger kept to its labels); None (the
    engine's extracted answer) for the others or a question that lists no options.

    Raises:
        ValueError: unknown ``kind``.
    """
    _check_kind(kind)
    return OptionAnswer.from_question(question) if kind in _LETTERS else None


def extract_prediction(kind: str, text: str, target: object = None, question: str | None = None) -> str | None:
    """The canonical answer ``text`` gives under the rules of ``kind`` (see the module table).

    Args:
        kind: one of :data:`KINDS`.
        text: a model response (the end marker may still be in it).
        target: the gold answer; only ARC reads it (digit golds take digit answers).
        question: the question; a multiple-choice kind reads its options
            (:func:`mfs_core.answers.parse_options`) so that a response giving an option's
            text instead of its letter is read as that letter.

    Returns:
        The canonical prediction, or None when the text states none.

    Raises:
        ValueError: unknown ``kind``.
    """
    _check_kind(kind)
    if kind in ("gsm", "demo"):
        content = _boxed_or_tagged(text)
        value = _numeric_answer(content if content is not None else text)
        return _format_number(value) if value is not None and math.isfinite(value) else None
    if kind == "math":
        return _math_answer(text)
    letters = _LETTERS[kind]
    if kind == "arc" and str(target) in ("1", "2", "3", "4"):
        letters = "1234"
    letter = extract_option(text, letters, parse_options(question) if question else None)
    if letter is None:
        return None
    return str(letters.index(letter)) if kind in ("reclor", "logiqa") else letter


def is_correct(kind: str, prediction: str | None, target: object) -> bool:
    """Whether canonical ``prediction`` matches the gold ``target`` of a ``kind`` question.

    Raises:
        ValueError: unknown ``kind``.
    """
    _check_kind(kind)
    if prediction is None:
        return False
    if kind in ("gsm", "demo", "math"):
        gold = float(target) if isinstance(target, (int, float)) else latex_to_number(str(target))
        if gold is None:  # a non-numeric MATH answer: compare the normalised LaTeX
            return prediction == normalize_latex(str(target))
        value = latex_to_number(prediction)
        if value is None and kind == "math":
            value = _lenient_number(prediction)
        return value is not None and abs(value - gold) < _TOLERANCE
    if kind in ("reclor", "logiqa"):
        return prediction == str(int(target))
    return prediction == str(target).strip()


def score_text(kind: str, text: str, target: object, question: str | None = None) -> Verdict:
    """Score one response against the gold ``target`` (``question``: see :func:`extract_prediction`)."""
    prediction = extract_prediction(kind, text, target, question)
    return Verdict(prediction=prediction, correct=is_correct(kind, prediction, target))


def score_completions(
    kind: str, texts: Sequence[str], target: object, qualities: Sequence[float] | None = None,
    question: str | None = None, weights: Sequence[float] | None = None,
) -> Verdict:
    """Score the majority answer of several responses (the corrected evals' vote).

    Each response's answer is read with :func:`extract_prediction`; the most common one
    wins (by summed ``weights`` when given: MFS's weighted rollout vote, the decode's
    ``completion_weights``), ties broken by the highest quality (mean log-prob per token,
    nats), then by order.

    Raises:
        ValueError: no texts, or ``qualities`` of another length.
    """
    if not texts:
        msg = "score_completions needs at least one response, got 0"
        raise ValueError(msg)
    qualities = list(qualities) if qualities is not None else [0.0] * len(texts)
    predictions = [extract_prediction(kind, text, target, question) for text in texts]
    vote = majority_vote(predictions, qualities, weights)
    return Verdict(prediction=vote.answer, correct=is_correct(kind, vote.answer, target))
