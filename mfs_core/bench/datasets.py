"""Loaders of the benchmark sets: the six sets of the MFS paper and the demo model's held-out set.

The six files are those the φ-Decoding release ships in ``data/`` (see
``shared/data/README.md``); their user messages are built as that release's
``_prepare_chat_template`` builds them:

| kind | file | user message | gold |
| --- | --- | --- | --- |
| ``gsm`` | ``gsm_test.json`` | ``The question: {input}\\nPlease directly output the reasoning steps.\\n`` | number |
| ``math`` | ``math_500_test.json`` | as GSM8K | number (or LaTeX) |
| ``gpqa`` | ``gpqa_main_test.json`` | ``{input}`` (options inside) | letter |
| ``arc`` | ``arc-c_test.json`` | ``{input}`` (options inside) | letter (a few digits) |
| ``reclor`` | ``reclor_val.json`` | ``Passage: …\\nQuestion: …\\nA. …\\nB. …\\nC. …\\nD. …\\n`` | index 0-3 |
| ``logiqa`` | ``logiqa_test.json`` | as ReClor | index 0-3 |
| ``demo`` | ``mfs_core/demo/heldout.json`` | ``{input}`` (plain chat, no system prompt) | number |
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DATASETS", "Dataset", "DatasetSpec", "Example", "demo_heldout_path", "infer_kind", "load_dataset"]


@dataclass(frozen=True)
class DatasetSpec:
    """A named benchmark set.

    Attributes:
        name: the name ``mfs bench --dataset`` takes.
        file: its file name in the data directory.
        kind: answer format and prompt family (see :mod:`mfs_core.bench.scoring`).
        size: questions in the full set.
    """

    name: str
    file: str
    kind: str
    size: int


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("gsm8k", "gsm_test.json", "gsm", 1319),
        DatasetSpec("math500", "math_500_test.json", "math", 500),
        DatasetSpec("gpqa", "gpqa_main_test.json", "gpqa", 448),
        DatasetSpec("reclor", "reclor_val.json", "reclor", 500),
        DatasetSpec("logiqa", "logiqa_test.json", "logiqa", 651),
        DatasetSpec("arc-c", "arc-c_test.json", "arc", 1172),
    )
}
"""The six sets of the paper's Table 1, by name."""

_ALIASES = {"gsm": "gsm8k", "math": "math500", "math-500": "math500", "arc": "arc-c", "arc_c": "arc-c"}


@dataclass(frozen=True)
class Example:
    """One benchmark question.

    Attributes:
        index: position in the file (0-based); the key of a question in a run's records.
        id: the set's own id, or the index as text.
        kind: answer format and prompt family.
        question: the user message (options included for multiple choice).
        target: the gold answer as the file stores it (float, letter, or option index).
    """

    index: int
    id: str
    kind: str
    question: str
    target: Any


@dataclass(frozen=True)
class Dataset:
    """A loaded set.

    Attributes:
        name: dataset name (or the file stem of a path).
        kind: answer format and prompt family.
        path: the file read.
        examples: the questions, in file order (``limit`` of them from ``offset`` on).
        total: questions in the file.
    """

    name: str
    kind: str
    path: Path
    examples: list[Example] = field(default_factory=list)
    total: int = 0


def demo_heldout_path() -> Path:
    """The demo model's held-out set, ``mfs_core/demo/heldout.json``."""
    return Path(__file__).resolve().parent.parent / "demo" / "heldout.json"


def infer_kind(path: Path, rows: list[dict[str, Any]]) -> str:
    """The kind of a set file, from its name (``gsm``, ``math``, ...) or else its fields.

    Raises:
        ValueError: neither the name nor the fields say.
    """
    stem = path.name.lower()
    for key, kind in (("gsm", "gsm"), ("math", "math"), ("gpqa", "gpqa"), ("reclor", "reclor"),
                      ("logiqa", "logiqa"), ("arc", "arc"), ("heldout", "demo"), ("demo", "demo")):
        if key in stem:
            return kind
    first = rows[0] if rows else {}
    if {"context", "question", "answers", "label"} <= set(first):
        return "reclor"
    if {"input", "target"} <= set(first):
        return "gsm" if isinstance(first["target"], (int, float)) else "arc"
    msg = f"cannot tell the kind of {path}: name it (--kind gsm|math|gpqa|arc|reclor|logiqa|demo)"
    raise ValueError(msg)


def _question(kind: str, row: dict[str, Any]) -> str:
    if kind in ("gsm", "math"):
        return f"The question: {row['input']}\nPlease directly output the reasoning steps.\n"
    if kind in ("reclor", "logiqa"):
        options = "".join(f"{letter}. {text}\n" for letter, text in zip("ABCD", row["answers"]))
        return f"Passage: {row['context']}\nQuestion: {row['question']}\n{options}"
    return str(row["input"])


def _example(kind: str, index: int, row: dict[str, Any], path: Path) -> Example:
    needed = ("context", "question", "answers", "label") if kind in ("reclor", "logiqa") else ("input", "target")
    missing = [name for name in needed if name not in row]
    if missing:
        msg = f"{path}: question {index} lacks the field(s) {missing} a {kind!r} set needs; it has {sorted(row)}"
        raise ValueError(msg)
    target = row["label"] if kind in ("reclor", "logiqa") else row["target"]
    return Example(index=index, id=str(row.get("id", index)), kind=kind, question=_question(kind, row), target=target)


def load_dataset(
    name_or_path: str,
    *,
    data_dir: str | os.PathLike | None = None,
    limit: int | None = None,
    kind: str | None = None,
    offset: int = 0,
) -> Dataset:
    """Load a benchmark set by name or path.

    Args:
        name_or_path: a name of :data:`DATASETS` (or ``gsm``, ``math``, ``arc``), ``"demo"``
            (the demo model's held-out set), ``"demo-fresh"`` and ``"demo-fresh2"`` (its fresh
            held-out sets, ``testbed/fresh_heldout.py``), or the path of a JSON file in one of their shapes.
        data_dir: directory holding the six files (default: ``$MFS_DATA_DIR``, else ``./data``).
        limit: keep ``limit`` questions from ``offset`` on (None: all of them).
        kind: the kind of a file given by path (default: inferred by :func:`infer_kind`).
        offset: skip the first ``offset`` questions (>= 0); the kept ones keep their file
            index (``Example.index``), so runs on different ranges never share a key.

    Returns:
        The :class:`Dataset`.

    Raises:
        FileNotFoundError: the file does not exist (the message says where it was looked for).
        ValueError: an unknown name, a file that is not a JSON list, a question lacking a
            field, ``limit`` < 1, ``offset`` < 0 or not below the number of questions.
    """
    if limit is not None and limit < 1:
        msg = f"limit must be >= 1, got {limit}"
        raise ValueError(msg)
    if offset < 0:
        msg = f"offset must be >= 0, got {offset}"
        raise ValueError(msg)
    key = _ALIASES.get(name_or_path.lower(), name_or_path.lower())
    if key == "demo":
        path, name, kind = demo_heldout_path(), "demo", "demo"
    elif key in ("demo-fresh", "demo-fresh2"):  # the fresh held-out sets of testbed/fresh_heldout.py
        path = demo_heldout_path().with_name(f"heldout_fresh{key.removeprefix('demo-fresh')}.json")
        name, kind = key, "demo"
    elif key in DATASETS:
        spec = DATASETS[key]
        directory = Path(data_dir if data_dir is not None else os.environ.get("MFS_DATA_DIR", "data"))
        path, name, kind = directory / spec.file, spec.name, spec.kind
    else:
        path = Path(name_or_path)
        if not path.suffix:
            msg = f"unknown dataset {name_or_path!r}; give one of {sorted(DATASETS)}, 'demo', or a JSON file path"
            raise ValueError(msg)
        name = path.stem
    if not path.is_file():
        msg = f"dataset file {str(path)!r} not found"
        if key in DATASETS:
            msg += " (pass --data-dir, or set MFS_DATA_DIR, to the directory holding the six sets)"
        raise FileNotFoundError(msg)
    rows = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        msg = f"{path} must hold a JSON list of objects, got {type(rows).__name__}"
        raise ValueError(msg)
    kind = kind or infer_kind(path, rows)
    if offset and offset >= len(rows):
        msg = f"offset must be below the {len(rows)} questions of {path}, got {offset}"
        raise ValueError(msg)
    chosen = rows[offset : offset + limit] if limit is not None else rows[offset:]
    examples = [_example(kind, i, row, path) for i, row in enumerate(chosen, start=offset)]
    return Dataset(name=name, kind=kind, path=path, examples=examples, total=len(rows))
