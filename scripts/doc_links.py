"""Check the relative links of README.md and docs/*.md: every target file exists, every anchor is a heading.

Usage (from the repository root)::

    python -m scripts.doc_links          # prints each broken link; exit 1 if there is one

Links are Markdown's inline links and images (``[text](path#anchor)``, ``![alt](path)``) and reference
definitions (``[name]: path#anchor``; every ``[text][name]`` must have one), outside fenced code
blocks; ``http(s)://`` and ``mailto:`` targets are not followed. An anchor is checked against the
target page's headings as GitHub names them (:func:`github_slug`). ``tests/unit/package/test_doc_links.py``
runs the check.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from scripts.doc_outputs import DOCS, ROOT

__all__ = ["Link", "broken_links", "github_slug", "headings", "links", "section", "undefined_references"]

_FENCED = re.compile(r"^```.*?^```[ \t]*$", re.DOTALL | re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
_REFERENCE = re.compile(r"\]\[([^\]]+)\]")
_DEFINED = re.compile(r"^ {0,3}\[([^\]]+)\]:", re.MULTILINE)
_EXTERNAL = ("http://", "https://", "mailto:")


@dataclass(frozen=True)
class Link:
    """One relative link: the page it is on, its line (1-based) and its target as written."""

    page: Path
    line: int
    target: str

    @property
    def name(self) -> str:
        """``README.md:12 -> docs/x.md#y``, for messages."""
        return f"{self.page.relative_to(ROOT)}:{self.line} -> {self.target}"


def _without_code(text: str) -> str:
    """``text`` with fenced code blocks blanked (spaces; newlines kept, so offsets and line numbers stay)."""
    return _FENCED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: inline code and emphasis marks dropped, lower case,
    punctuation removed (letters, digits, ``_``, ``-`` and spaces kept), spaces made ``-``.

    >>> github_slug("Cooler rollouts (`rollout_temperature=0.5`), third tuning")
    'cooler-rollouts-rollout_temperature05-third-tuning'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").lower()
    kept = (c for c in text if c.isalnum() or c in "_- " or unicodedata.category(c).startswith("M"))
    return "".join(kept).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str, int]]:
    """The headings of a Markdown text outside code blocks: (level, GitHub anchor, offset), in
    order; a repeated anchor gets ``-1``, ``-2``... as on GitHub."""
    seen: dict[str, int] = {}
    found = []
    for match in _HEADING.finditer(_without_code(text)):
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.append((len(match.group(1)), slug if count == 0 else f"{slug}-{count}", match.start()))
    return found


def section(text: str, anchor: str) -> str:
    """The text under the heading named ``anchor``, up to the next heading of the same or a higher level.

    Raises:
        KeyError: no heading has that anchor.
    """
    found = headings(text)
    for i, (level, slug, start) in enumerate(found):
        if slug == anchor:
            end = next((s for lv, _, s in found[i + 1 :] if lv <= level), len(text))
            return text[start:end]
    raise KeyError(anchor)


def links(page: Path) -> list[Link]:
    """The relative links of ``page`` (external ones left out)."""
    text = _without_code(page.read_text(encoding="utf-8"))
    found = []
    for pattern in (_INLINE, _DEFINITION):
        for match in pattern.finditer(text):
            target = match.group(1)
            if not target.startswith(_EXTERNAL):
                found.append(Link(page, text.count("\n", 0, match.start()) + 1, target))
    return sorted(found, key=lambda link: link.line)


def undefined_references(page: Path) -> list[str]:
    """``README.md:12 -> [name]: no definition`` for each reference link ``[text][name]`` of ``page``
    whose ``[name]: target`` is missing (Markdown would show it as plain text)."""
    text = _without_code(page.read_text(encoding="utf-8"))
    defined = {name.lower() for name in _DEFINED.findall(text)}
    return [
        f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1} -> [{match.group(1)}]: no definition"
        for match in _REFERENCE.finditer(text) if match.group(1).lower() not in defined
    ]


def broken_links(pages: list[Path] | None = None) -> list[str]:
    """``README.md:12 -> docs/x.md#y: why`` for each relative link of ``pages`` (default: README.md and
    docs/*.md) whose file does not exist or whose anchor is no heading of that file, and for each
    reference link with no definition."""
    broken = []
    for page in pages or DOCS:
        broken += undefined_references(page)
        for link in links(page):
            path, _, anchor = link.target.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{link.name}: no such file")
            elif anchor and target.suffix == ".md":
                anchors = {slug for _, slug, _ in headings(target.read_text(encoding="utf-8"))}
                if anchor not in anchors:
                    broken.append(f"{link.name}: no heading with that anchor in {target.relative_to(ROOT)}")
    return broken


if __name__ == "__main__":
    problems = broken_links()
    print("\n".join(problems) or "every relative link resolves")
    sys.exit(1 if problems else 0)
