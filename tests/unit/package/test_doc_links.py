"""Every relative link of README.md and docs/*.md points to a file that exists, and every anchor to a heading."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import doc_links
from scripts.doc_links import broken_links, github_slug, headings, section


def test_every_relative_link_of_the_pages_resolves() -> None:
    assert broken_links() == []


def test_the_slugs_are_githubs() -> None:
    assert github_slug("ESC and DeepConf on `demo-fresh2` (200 questions, measured 2026-11-26)") == (
        "esc-and-deepconf-on-demo-fresh2-200-questions-measured-2026-11-26"
    )
    assert github_slug("Measured on a real model: Qwen2.5-Coder-0.5B-Instruct on ARC-Challenge (greedy)") == (
        "measured-on-a-real-model-qwen25-coder-05b-instruct-on-arc-challenge-greedy"
    )
    assert github_slug("On the v3 demo model: MFS that spends less than φ (on 2 cores)") == (
        "on-the-v3-demo-model-mfs-that-spends-less-than-φ-on-2-cores"
    )
    text = "# A\n\n```bash\n# not a heading\n```\n\n## B\n\n### A\n"
    assert [slug for _, slug, _ in headings(text)] == ["a", "b", "a-1"]
    assert section(text, "b") == "## B\n\n### A\n"


def test_a_broken_link_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doc_links, "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# There\n\n## A part\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/there.md#a-part) [gone](docs/gone.md) [bad anchor](docs/there.md#no-part) [undefined][ref]\n"
        "```python\nx = y[0](z)\n```\n[defined][def]\n\n[def]: docs/there.md#there\n"
    )
    assert broken_links([page]) == [
        "README.md:1 -> [ref]: no definition",
        "README.md:1 -> docs/gone.md: no such file",
        "README.md:1 -> docs/there.md#no-part: no heading with that anchor in docs/there.md",
    ]
