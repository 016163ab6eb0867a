"""Answer extraction and the majority vote (MFS_SPEC.md, "Aggregate").

Pure functions on strings; the benchmark's dataset-specific scoring (LaTeX equivalence,
numeric compare) builds on :func:`extract_answer`.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "AnswerExtractor", "OptionAnswer", "Vote", "arithmetic_value", "extract_answer", "extract_boxed", "extract_option",
    "first_seen_counts", "majority_vote", "normalize_answer", "parse_options", "quality_weights",
]

AnswerExtractor = Callable[[str], "str | None"]
"""What the vote groups a completed path by: its answer (or action) key, None for no vote."""

_ANSWER_IS = re.compile(r"answer is\s*:?\s*(.+)", re.IGNORECASE)
_STANDALONE_OPTION = re.compile(r"^\(?([A-J])\)?\s*[.:;!]?\s*$")
_LEADING_OPTION = re.compile(r"^\(?([A-J])\)?(?:[.:;,)\s]|$)")
_PROSE = re.compile(r"[A-Za-z]{2,}")
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")
_LABELLED_OPTION = re.compile(r"^(?:\(([A-J])\)|([A-J])[.)])(?:\s|$)")
_ARITHMETIC = re.compile(r"[\d\s+\-*/×÷().,$]+")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_OPTION_PHRASE = re.compile(
    r"\banswer\b\s*(?:is|would be|should be|=|:)\s*:?|\b(?:correct|right|best)\s+(?:option|choice|answer)\b\s*(?:is)?\s*:?"
    r"|\\boxed\s*\{",
    re.IGNORECASE,
)
_OPTION_IS_RIGHT = re.compile(
    r"(?:option|choice)?\s*\(?\b([A-J])\)?\s+is\s+(?:the\s+)?(?:correct|right|best|true)", re.IGNORECASE
)


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text`` (braces balanced), or None."""
    start = text.rfind("\\boxed")
    while start != -1:
        i = start + len("\\boxed")
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            depth = 0
            for j in range(i, len(text)):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[i + 1 : j].strip()
            return None
        start = text.rfind("\\boxed", 0, start)
    return None


def normalize_answer(answer: str) -> str:
    """Canonical form for voting: strip ``$``, spaces, a trailing period, and ``.0``-style zeros.

    ``"18.00"``, ``"$18$"`` and ``"18."`` all become ``"18"``; non-numeric text is only
    trimmed of surrounding whitespace, ``$`` and a final period.
    """
    text = answer.strip().strip("$").strip()
    text = text.rstrip(".").strip()
    text = text.replace(",", "") if re.fullmatch(r"-?[\d,]+(\.\d+)?", text) else text
    if re.fullmatch(r"-?\d+\.\d+", text):
        text = text.rstrip("0").rstrip(".")
    return text


def arithmetic_value(expression: str) -> str | None:
    """The value of a plain arithmetic expression (numbers, ``+ - * / × ÷``, parentheses), or None.

    ``"64 + 4 * 8"`` gives ``"96"``, ``"$1,200 / 4"`` gives ``"300"``, ``"7"`` gives ``"7"``;
    text with anything else (``"x+1"``, ``"\\frac{1}{2}"``), a division by zero or no number gives
    None. Evaluated on Python's ``ast`` (numbers and the four operators only), never ``eval``.
    """
    if not _ARITHMETIC.fullmatch(expression) or not re.search(r"\d", expression):
        return None
    source = re.sub(r"(?<=\d),(?=\d{3})", "", expression).replace("$", "").replace("×", "*").replace("÷", "/")
    try:
        tree = ast.parse(source.strip(" ."), mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(node)

    try:
        result = value(tree.body)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return normalize_answer(f"{result:.10g}")


def _settled(answer: str) -> str:
    """An answer written as a calculation, reduced to its result.

    ``"64 + 4 * 8 = 128 + 32 = 264"`` gives ``"264"`` (what follows the last ``=``);
    an arithmetic expression gives its value (:func:`arithmetic_value`); other text is unchanged.
    """
    if "=" in answer and answer.rsplit("=", 1)[1].strip():
        answer = answer.rsplit("=", 1)[1].strip()
    value = arithmetic_value(answer)
    return value if value is not None else answer


_OPTION_LINE = re.compile(r"^\s*\(?([A-J1-9])[).:]\s+(\S.*)$")


def parse_options(question: str) -> dict[str, str]:
    """The labelled options of a multiple-choice question: ``{"A": "text", ...}``.

    Lines ``(A) text``, ``A. text``, ``A) text`` or ``A: text`` (labels ``A-J`` or ``1-9``),
    in order; a question with fewer than two such lines has none (``{}``).
    """
    options = {}
    for line in question.splitlines():
        found = _OPTION_LINE.match(line)
        if found:
            options[found.group(1)] = found.group(2).strip()
    return options if len(options) >= 2 else {}


def _words(text: str) -> str:
    """Lower-case words of ``text`` joined by single spaces (punctuation dropped) for matching."""
    return " ".join(re.findall(r"[a-z0-9°]+", text.lower()))


def _option_by_text(statement: str, options: Mapping[str, str], letters: str) -> str | None:
    """The option whose text the statement gives (the longest, if several), else the one option
    whose text contains the statement; None when that is not a single option."""
    said = _words(statement)
    if len(said) < 2:
        return None
    given, within = [], []  # the option's text in the statement / the statement in the option's text
    for letter, option in options.items():
        words = _words(option)
        if letter not in letters or not words:
            continue
        if f" {words} " in f" {said} ":
            given.append((len(words), letter))
        elif len(said) >= 4 and f" {said} " in f" {words} ":
            within.append(letter)
    given.sort(reverse=True)
    if given:
        return given[0][1] if len(given) == 1 or given[0][0] > given[1][0] else None
    return within[0] if len(within) == 1 else None


def extract_option(text: str, letters: str = "ABCD", options: Mapping[str, str] | None = None) -> str | None:
    """The option letter a multiple-choice response chooses, whatever wording surrounds it; or None.

    Read from the last statement of a choice that names a letter of ``letters`` standing
    alone (not inside a word; ``A`` followed by a lower-case word is the article):
    ``\\boxed{C}``, "The answer is: (C)", "answer: C. Planetary days ...", "The correct option
    is C", "Answer: option C", "Option C is correct", "(C) is the right choice". A response that
    names no letter in such a statement gives None (listing the options is no choice).

    With ``options`` (:func:`parse_options` of the question), a statement that gives an
    option's text instead of its letter ("The answer is: from the ice to the tea.") gives that
    option's letter, when exactly one option's text matches (the longest one wins).

    Args:
        text: a model response.
        letters: the allowed labels, e.g. ``"ABCD"``, ``"ABCDE"`` or ``"1234"``.
        options: the question's options by label; None: letters only.

    Returns:
        One character of ``letters``, or None.
    """
    alternatives = "".join(re.escape(letter) for letter in letters)
    standalone = re.compile(rf"(?<![A-Za-z0-9])\(?([{alternatives}])\)?(?![A-Za-z0-9])")
    choices: list[tuple[int, str]] = []
    for phrase in _OPTION_PHRASE.finditer(text):
        tail = text[phrase.end():].lstrip()
        lines = [line for line in tail.split("\n")[:3] if line.strip()]
        head = lines[0].split("<")[0] if lines else ""
        for found in standalone.finditer(head):
            following = head[found.end():]
            if found.group(1) == "A" and re.match(r" [a-z]", following) and "(" not in found.group(0):
                continue  # the article: "The answer is a planet that ..."
            choices.append((phrase.start(), found.group(1)))
            break
        else:
            by_text = _option_by_text(head, options, letters) if options else None
            if by_text is not None:
                choices.append((phrase.start(), by_text))
    for found in _OPTION_IS_RIGHT.finditer(text):
        if found.group(1).upper() in letters:
            choices.append((found.start(), found.group(1).upper()))
    return max(choices)[1] if choices else None


@dataclass(frozen=True)
class OptionAnswer:
    """The answer key of a multiple-choice question: a path's answer is the option it chooses.

    Called on a completed path, it gives the option label the path chooses
    (:func:`extract_option` with the question's labels and texts), or None. Passed as a
    decode's ``answer_key`` (``MFSEngine.decode_prompts(..., answer_key=...)``, and ``mfs
    bench`` on ARC-C, ReClor and LogiQA), the vote groups paths by option, and the answer
    trigger (``MFSSettings.answer_trigger``) asks every path that chooses none, then lets the
    model write only one of :attr:`answer_choices` after the trigger (a grammar, honoured by
    every backend), so each such path ends with a label.

    Attributes:
        options: the question's options by label, in order (``{"A": "text", ...}``, from
            :func:`parse_options`); at least two.

    Raises:
        ValueError: fewer than two options, or a label that is not one character of
            ``A-J`` or ``1-9``.
    """

    options: Mapping[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))
        bad = [label for label in self.options if not re.fullmatch(r"[A-J1-9]", label)]
        if len(self.options) < 2 or bad:
            msg = (f"options must have at least two labels, each one of A-J or 1-9, "
                   f"got {list(self.options)!r}")
            raise ValueError(msg)

    @classmethod
    def from_question(cls, question: str) -> OptionAnswer | None:
        """The answer key of ``question``'s options (:func:`parse_options`); None when it lists none."""
        options = parse_options(question)
        return cls(options) if options else None

    @property
    def answer_choices(self) -> tuple[str, ...]:
        """The option labels, in order (``("A", "B", "C", "D")``): what may follow the answer trigger."""
        return tuple(self.options)

    def __call__(self, text: str) -> str | None:
        """The label of the option ``text`` chooses, or None (:func:`extract_option`)."""
        return extract_option(text, "".join(self.options), self.options)


def extract_answer(text: str, options: str | None = None) -> str | None:
    """Extract the answer a completed path states, normalised, or None.

    Order: the last ``\\boxed{}``; else the first line of what follows the last "answer is":

    * an option letter standing alone there (``"The answer is C."``, ``"The answer is (B)"``,
      ``"The answer is: B."``) gives the letter; with ``options`` (a multiple-choice task,
      e.g. ``"ABCD"``) a leading option letter does too (``"The answer is B, because ..."``);
    * else, when the line is prose (a word of two letters or more, no LaTeX), its last number
      (``"The answer is: A total of 12 apples."`` gives ``"12"``, ``"answer is I think 42"``
      gives ``"42"``);
    * an option label opening the line (``"(C) Planetary days ..."``, ``"C. Planetary days"``)
      gives the letter;
    * else the whole line, normalised (``"42."`` gives ``"42"``, ``"x+1"`` stays); a
      calculation gives its result, never the expression (``"64 + 4 * 8 = 128 + 32 = 264"``
      gives ``"264"``, ``"128 + 32"`` gives ``"160"``; also inside ``\\boxed{}``); a ``\\boxed{``
      left open by the token cap gives what it holds (``"The answer is: \\boxed{2"`` gives ``"2"``).

    Args:
        text: a completed reasoning path (the end marker may still be in it).
        options: the option letters of a multiple-choice task (None: not multiple choice,
            a letter counts only when it stands alone).

    Returns:
        The normalised answer string, or None when the text states none.
    """
    boxed = extract_boxed(text)
    if boxed is not None:
        return normalize_answer(_settled(boxed)) or None
    matches = _ANSWER_IS.findall(text)
    if not matches:
        return None
    line = matches[-1].split("<")[0].strip().split("\n")[0].strip()
    unclosed = re.match(r"\\boxed\s*\{([^{}]*)$", line)  # cut off by the token cap: "\boxed{2"
    if unclosed:
        line = unclosed.group(1).strip()
    option = _STANDALONE_OPTION.match(line) or _LABELLED_OPTION.match(line)
    if option is None and options:
        option = _LEADING_OPTION.match(line)
        if option is not None and option.group(1) not in options.upper():
            option = None
    if option:
        return next(group for group in option.groups() if group)
    numbers = _NUMBER.findall(line)
    if numbers and _PROSE.search(line) and "\\" not in line:
        return normalize_answer(numbers[-1].replace("$", "")) or None
    return normalize_answer(_settled(line)) or None


@dataclass(frozen=True)
class Vote:
    """Outcome of :func:`majority_vote`.

    Attributes:
        answer: the winning answer, or None when no path had one.
        vote_share: votes for ``answer`` / number of paths (0-1; weighted: their weights / all the
            weights); 0 when ``answer`` is None.
        index: index of the chosen path (the highest-quality path of the winning answer,
            or the highest-quality path overall when no answer was extracted).
    """

    answer: str | None
    vote_share: float
    index: int


def majority_vote(
    answers: Sequence[str | None], qualities: Sequence[float], weights: Sequence[float] | None = None
) -> Vote:
    """Majority vote over extracted answers; ties broken by the highest quality ``F``.

    Args:
        answers: the answer of each completed path (None: not extractable).
        qualities: each path's quality F (nats per token); same length.
        weights: each path's vote, >= 0 (None: 1 each). MFS's weighted rollout vote gives a
            shared rollout the number of sampled candidates whose path it completes
            (``MFSSettings.vote_rollouts="weighted"``); e.g. answers ``["1", "2", "2"]`` with
            weights ``[3, 1, 1]`` elect ``"1"`` with share 3/5.

    Returns:
        The :class:`Vote`.

    Raises:
        ValueError: empty input, lengths differ, or a negative weight.
    """
    if not answers:
        msg = "majority_vote needs at least one path, got 0"
        raise ValueError(msg)
    if len(answers) != len(qualities):
        msg = f"answers and qualities differ in length: {len(answers)} != {len(qualities)}"
        raise ValueError(msg)
    if weights is not None and (len(weights) != len(answers) or any(w < 0 for w in weights)):
        msg = f"vote weights must be {len(answers)} numbers >= 0, got {list(weights)}"
        raise ValueError(msg)
    best_overall = max(range(len(answers)), key=lambda i: qualities[i])
    groups: dict[str, list[int]] = {}
    for i, answer in enumerate(answers):
        if answer is not None:
            groups.setdefault(answer, []).append(i)
    if not groups:
        return Vote(answer=None, vote_share=0.0, index=best_overall)

    def votes(members: Sequence[int]) -> float:
        return len(members) if weights is None else sum(weights[i] for i in members)

    def rank(answer: str) -> tuple[float, float]:
        members = groups[answer]
        return (votes(members), max(qualities[i] for i in members))

    winner = max(groups, key=rank)
    index = max(groups[winner], key=lambda i: qualities[i])
    total = votes(range(len(answers)))
    return Vote(answer=winner, vote_share=votes(groups[winner]) / total if total else 0.0, index=index)


def quality_weights(qualities: Sequence[float], beta: float) -> list[float]:
    """Each path's vote weighted by its quality: ``exp(β · (F_i - max F))``, the largest 1.

    A confidence-weighted vote (CISC, Taubenfeld et al., 2025, arXiv 2502.06233; DeepConf's
    weighted vote, arXiv 2508.15260) with the path's ``F`` (mean raw log-prob per token, nats) as its
    confidence; subtracting ``max F`` changes no share (:func:`majority_vote` divides by the total)
    and keeps every weight in (0, 1]. ``β = 0`` gives 1 each, the plain vote; a large ``β`` approaches
    the best-``F`` path alone.

    Example: ``quality_weights([-0.2, -0.4], 5.0) == [1.0, exp(-1.0)]``.

    Args:
        qualities: each path's ``F``, shape (K,), nats per token.
        beta: ``β >= 0``, per nat per token.

    Returns:
        The weights, shape (K,); empty for no paths.

    Raises:
        ValueError: ``beta`` < 0 or not finite.
    """
    if not (math.isfinite(beta) and beta >= 0):
        msg = f"vote_quality_beta must be a finite number >= 0, got {beta}"
        raise ValueError(msg)
    if not qualities:
        return []
    top = max(qualities)
    return [math.exp(beta * (q - top)) for q in qualities]


def first_seen_counts(answers: Sequence[str | None]) -> dict[str, int]:
    """How many times each answer was drawn, in the order the answers first appeared; None left out.

    What :func:`mfs_core.martingale.anytime_lead` reads: ``first_seen_counts(["7", None, "8", "7"])``
    is ``{"7": 2, "8": 1}``.
    """
    counts: dict[str, int] = {}
    for answer in answers:
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
    return counts
