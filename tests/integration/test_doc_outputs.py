"""Every code block of README.md and docs/*.md runs alone and prints exactly what is shown.

The convention and the runner are :mod:`scripts.doc_outputs`; when an output here fails
after a deliberate change (a new checkpoint, a decoder change), regenerate the shown
outputs with ``python -m scripts.update_doc_outputs`` and review the diff.
"""

from __future__ import annotations

import shutil

import pytest

from scripts.doc_outputs import DOCS, ROOT, blocks, normalise, run_block, runnable_blocks

BLOCKS = list(runnable_blocks())


def _param(block):
    marks = [pytest.mark.slow] if "slow" in block.flags else []
    if "serve" in block.flags:  # against an `mfs serve` child process on loopback (scripts.doc_outputs.serve_address)
        marks += [pytest.mark.allow_hosts(["127.0.0.1"]), pytest.mark.slow]
        if block.lang == "bash":
            marks.append(pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed"))
    return pytest.param(block, id=block.name, marks=marks)


@pytest.mark.parametrize("block", [_param(block) for block in BLOCKS])
def test_the_block_prints_what_the_page_shows(block, demo_backend) -> None:
    printed = run_block(block)  # demo_backend: the blocks share the session's loaded demo model
    if printed and not printed.endswith("\n"):
        printed += "\n"
    shown = block.output.code if block.output is not None else ""
    hint = "regenerate with `python -m scripts.update_doc_outputs` and review the diff"
    assert block.output is not None or not printed, f"{block.name} prints but shows no output block; {hint}"
    assert normalise(printed) == normalise(shown), f"{block.name}: the printed output differs from the page; {hint}"


def test_the_pages_keep_their_examples() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in DOCS}
    pages = ("README.md", "docs/install.md", "docs/engine.md", "docs/langchain.md", "docs/llamaindex.md", "docs/backends.md")
    assert set(pages) <= names
    per_page = {}
    for block in BLOCKS:
        per_page.setdefault(block.path.relative_to(ROOT).as_posix(), []).append(block)
    assert len(per_page["docs/langchain.md"]) >= 10 and len(per_page["docs/llamaindex.md"]) >= 10
    # README: a LangChain, a LlamaIndex and an `mfs serve` example; README's former
    # `mfs ask` output and Python example live in docs/install.md and docs/engine.md
    readme = per_page["README.md"]
    assert [(b.lang, "serve" in b.flags) for b in readme] == [("python", False), ("python", False), ("python", True)]
    assert "langchain_mfs" in readme[0].code and "llamaindex_mfs" in readme[1].code and "OpenAI(" in readme[2].code
    assert all(b.output is not None for b in readme)
    install, engine = per_page["docs/install.md"], per_page["docs/engine.md"]
    assert [b.lang for b in install] == ["bash"] and "mfs ask " in install[0].code and install[0].output is not None
    assert [b.lang for b in engine] == ["python"] and "engine.decode(" in engine[0].code and engine[0].output is not None
    sources = "\n".join(block.code for block in BLOCKS)
    for needle in ("llm.complete(", "stream_complete(", "llm.chat(", "acomplete(", "TokenCountingHandler",
                   "Settings.llm =", "llm.batch(", "ChatMFS(", "MFSReasoningTool(", "mfs ask "):
        assert needle in sources, needle


def test_output_blocks_follow_code_and_shown_only_blocks_are_marked() -> None:
    for path in DOCS:
        for block in blocks(path):
            assert block.lang != "text" or block.output is None, block.name
            if block.lang == "python" and not block.runs:
                assert {"no-run", "tool-model"} & block.flags, block.name
            if "no-run" in block.flags:
                assert block.output is None, f"{block.name}: a no-run block cannot show a checked output"
