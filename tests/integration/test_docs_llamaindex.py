"""Runs the Python code blocks of ``docs/llamaindex.md``, in order, in one namespace.

The blocks run on the bundled demo model as written (about 13 decodes at M = N = 4, so the
run is marked slow); only the token budgets the page does not set are made small through
``MFS_*`` environment variables, to keep it shorter.
Outputs shown in the page's comments are not checked (they depend on the model); the
blocks' own ``assert`` statements are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.instrumentation import get_dispatcher

from tests.tool_model import demo_model_renders_tools

DOC = Path(__file__).resolve().parents[2] / "docs" / "llamaindex.md"
_FENCE = re.compile(r"^```python( tool-model)?\n(.*?)^```", re.DOTALL | re.MULTILINE)


def code_blocks(*, tool_model: bool | None = None) -> list[tuple[int, str]]:
    """``(line number, code)`` of each ```python block of the page.

    Blocks fenced ```python tool-model need the tool-calling demo model; ``tool_model`` None
    includes them when the bundled model's template renders tools, True always, False never.
    """
    if tool_model is None:
        tool_model = demo_model_renders_tools()
    text = DOC.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(2))
        for match in _FENCE.finditer(text)
        if tool_model or not match.group(1)
    ]


@pytest.fixture
def restored_llama_index() -> Iterator[None]:
    """Restore ``Settings`` and the root dispatcher's handlers that the page changes."""
    dispatcher = get_dispatcher()
    saved_handlers = list(dispatcher.event_handlers)
    saved_settings = (Settings._llm, Settings._callback_manager)
    try:
        yield
    finally:
        dispatcher.event_handlers[:] = saved_handlers
        Settings._llm, Settings._callback_manager = saved_settings


def test_the_page_has_its_examples() -> None:
    blocks = code_blocks(tool_model=True)
    assert len(blocks) >= 10
    assert len(blocks) > len(code_blocks(tool_model=False))  # the agent section
    sources = "\n".join(code for _, code in blocks)
    for needle in ("llm.complete(", "stream_complete(", "llm.chat(", "acomplete(", "TokenCountingHandler", "Settings.llm =", "FunctionAgent("):
        assert needle in sources, needle


@pytest.mark.slow
def test_the_code_blocks_run(monkeypatch: pytest.MonkeyPatch, restored_llama_index: None) -> None:
    monkeypatch.setenv("MFS_MAX_STEPS", "1")
    monkeypatch.setenv("MFS_MAX_STEP_TOKENS", "8")
    monkeypatch.setenv("MFS_MAX_ANSWER_TOKENS", "16")
    namespace: dict[str, object] = {"__name__": "docs_llamaindex"}
    for line, code in code_blocks():
        # pad with newlines so tracebacks point at the page's own line numbers
        exec(compile("\n" * (line - 1) + code, str(DOC), "exec"), namespace)  # noqa: S102
