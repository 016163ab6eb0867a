"""Run the Python examples of ``docs/langchain.md`` on the demo model, in order, in one namespace.

A block fenced ```` ```python ```` runs; one fenced ```` ```python no-run ```` is shown only
(it needs a model that is not available offline); one fenced ```` ```python tool-model ````
runs when the bundled demo model's chat template renders tools
(:func:`tests.tool_model.demo_model_renders_tools`). ``MFS_*`` variables set by the examples
are restored afterwards.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from unittest import mock

from tests.tool_model import demo_model_renders_tools

DOC = Path(__file__).resolve().parents[2] / "docs" / "langchain.md"
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def code_blocks() -> list[tuple[int, str, str]]:
    """``(line, info string, code)`` of every fenced block of the document."""
    text = DOC.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 1, f"{match.group(1)}{match.group(2)}".strip(), match.group(3))
        for match in FENCE.finditer(text)
    ]


def test_every_python_block_runs_or_is_marked_no_run() -> None:
    infos = [info for _, info, _ in code_blocks()]
    assert infos.count("python") >= 10
    assert infos.count("python no-run") == 1  # the agent with a hosted tool-calling model
    assert infos.count("python tool-model") >= 1  # the agent whose model is ChatMFS
    assert {info for info in infos} <= {"python", "python no-run", "python tool-model"}


def test_the_examples_run() -> None:
    namespace: dict[str, object] = {"__name__": "docs_langchain"}
    # MFS_DEVICE=cpu gives the examples' instances the backend fields of tests/conftest.py's
    # demo fixtures, so they share its loaded model instead of loading another copy.
    runs = {"python", "python tool-model"} if demo_model_renders_tools() else {"python"}
    with mock.patch.dict(os.environ, {"MFS_DEVICE": "cpu"}):
        for line, info, code in code_blocks():
            if info not in runs:
                continue
            exec(compile(code, f"{DOC}:{line}", "exec"), namespace)  # noqa: S102 - our own documentation
    assert namespace["configured"].step_beam_size == 3  # the last sections ran
