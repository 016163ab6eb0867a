"""README for a newcomer (issue 45, item 8): short, its examples checked, its results those of docs/benchmarks.md.

The examples' outputs are compared by tests/integration/test_doc_outputs.py, the two commands by
tests/unit/test_install_commands.py and the links by tests/unit/test_doc_links.py; here: the page's
length and sections, the `mfs serve` command it shows (the one the examples run against), and
every number of its results table and the sentence below it, found in the docs/benchmarks.md
section the row links to.
"""

from __future__ import annotations

import re
from pathlib import Path

from scripts.doc_links import section
from scripts.doc_outputs import SERVE_ARGS, SERVE_ENV

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BENCHMARKS = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _definitions() -> dict[str, str]:
    return dict(re.findall(r"^\[([^\]]+)\]: docs/benchmarks\.md#(\S+)$", README, re.MULTILINE))


def test_readme_is_a_two_minute_read() -> None:
    assert len(README.splitlines()) <= 120
    titles = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert titles == ["Two commands", "LangChain", "LlamaIndex", "`mfs serve`", "Results", "More"]


def test_readme_shows_the_serve_command_its_example_runs_against() -> None:
    command = " ".join([*(f"{key}={value}" for key, value in SERVE_ENV.items()), "mfs serve", *SERVE_ARGS])
    assert f"`{command}`" in _section("`mfs serve`")
    assert f"{command}\n" in (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")


def test_every_number_of_the_results_table_is_in_the_section_it_links_to() -> None:
    definitions = _definitions()
    rows = [line for line in _section("Results").splitlines() if line.startswith("| ") and "][" in line]
    assert len(rows) >= 5
    for row in rows:
        accuracy, tokens = re.search(r"\| \**(\d+\.\d)%\** \| ([\d,]+) \|", row).groups()
        anchor = definitions[re.search(r"\]\[([^\]]+)\] \|$", row).group(1)]
        lines = section(BENCHMARKS, anchor).splitlines()
        # the accuracy and the tokens per question stand on one line of the table there (the row it came from)
        assert any(f"{accuracy}" in line and f"{tokens}" in line for line in lines), row


def test_the_sentence_under_the_table_quotes_the_same_section() -> None:
    prose = " ".join(_section("Results").split())
    fresh2 = section(BENCHMARKS, _definitions()["fresh2"])
    assert "answered 72, the paper's rollout per survivor (`mfs-paper`) 77 at 13,799 tokens per question" in prose
    assert "φ-Decoding 60 at 13,121" in prose
    assert "`mfs` 72/100 there" in fresh2
    assert any("`mfs-paper` (first 100) | 77.0 |" in line and "13,799" in line for line in fresh2.splitlines())
    assert any("`phi` (first 100) | 60.0 |" in line and "13,121" in line for line in fresh2.splitlines())
    assert "is *on* SC's curve" in fresh2 and "`mfs` sits on self-consistency's curve, not above it" in prose
    smollm2, qwen = section(BENCHMARKS, _definitions()["smollm2"]), section(BENCHMARKS, _definitions()["qwen"])
    assert "Accuracy does not rank the decoders here" in smollm2 and "nothing separates the decoders" in qwen
