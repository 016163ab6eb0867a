"""The public surface of ``langchain_mfs``: ``__all__``, documentation, no heavy imports."""

from __future__ import annotations

import inspect
import subprocess
import sys

import langchain_mfs

EXPECTED_ALL = ["MFSLLM", "ChatMFS", "MFSReasoningInput", "MFSReasoningTool"]


def test_all_lists_the_public_classes() -> None:
    assert sorted(langchain_mfs.__all__) == sorted(EXPECTED_ALL)
    for name in langchain_mfs.__all__:
        obj = getattr(langchain_mfs, name)
        assert inspect.isclass(obj), name
        assert obj.__module__.startswith("langchain_mfs."), name
        assert inspect.getdoc(obj), f"{name} has no docstring"


def test_submodules_declare_all() -> None:
    from langchain_mfs import chat_models, llms, tools

    assert llms.__all__ == ["MFSLLM"]
    assert chat_models.__all__ == ["ChatMFS", "to_chat_dicts"]
    assert tools.__all__ == ["MFSReasoningInput", "MFSReasoningTool"]


def test_importing_and_constructing_loads_no_model_library() -> None:
    code = (
        "import sys; from langchain_mfs import ChatMFS, MFSLLM, MFSReasoningTool; "
        "MFSLLM(); ChatMFS(); MFSReasoningTool(); "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
