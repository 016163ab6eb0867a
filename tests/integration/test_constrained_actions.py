"""Grammar-constrained actions on the demo model, transformers backend.

Every forced call and every structured output must parse and validate against its JSON
schema (50 of each, counted); the log-probs reported under the grammar are the model's raw
ones; agents built the standard way end in one model turn with a validated object; a
history that no longer fits the context window fails once, before any decode, saying where.
The vLLM and HTTP backends run the same counts in tests/integration/test_constrained_actions_vllm.py.
"""

from __future__ import annotations

import pytest

from mfs_core import MFSEngine, MFSSettings
from experiments.benchmarks.tool_vote import TOOLS, generate_questions
from mfs_core.call import render_chat
from mfs_core.tools.plan import ResponseFormat, plan_call
from tests.tool_model import requires_tool_model

pytestmark = [requires_tool_model, pytest.mark.slow]
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("xgrammar")

SEARCH = {"device": "cpu", "step_beam_size": 2, "num_rollouts": 2, "seed": 0}
ANSWER_SCHEMA = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
QUESTION = "Sam has 9 apples. Then Sam buys 5 more apples. How many apples does Sam have now?"


@pytest.fixture(scope="module")
def engine(demo_backend: object) -> MFSEngine:
    return MFSEngine.from_settings(MFSSettings(**SEARCH))


def _schemas() -> dict[str, dict]:
    return {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}


def test_fifty_forced_calls_all_validate(engine: MFSEngine) -> None:
    settings = engine.settings
    plan = plan_call(engine.backend, settings.model_copy(update={"constrain_actions": True}), tools=TOOLS,
                     tool_choice="required")
    questions = generate_questions(50, 0)
    prompts = [render_chat(engine, settings, plan, [{"role": "user", "content": q.question}]) for q in questions]
    results = engine.decode_prompts(prompts, answer_key=plan.vote)
    valid = 0
    for result in results:
        parsed = plan.parse(result.text)
        if parsed.tool_calls and not parsed.invalid_tool_calls:
            call = parsed.tool_calls[0]
            jsonschema.validate(call.arguments, _schemas()[call.name])
            valid += 1
    print(f"transformers: {valid}/50 forced calls validate")
    assert valid == 50


def test_fifty_structured_outputs_all_validate(engine: MFSEngine) -> None:
    settings = engine.settings
    plan = plan_call(engine.backend, settings.model_copy(update={"constrain_actions": True}),
                     response_format=ResponseFormat("json_schema", ANSWER_SCHEMA))
    questions = [q.question for q in generate_questions(50, 1)]
    prompts = [render_chat(engine, settings, plan, [{"role": "user", "content": q}]) for q in questions]
    results = engine.decode_prompts(prompts, answer_key=plan.vote)
    valid = 0
    for result in results:
        import json

        obj = json.loads(result.text)  # the whole completion is the object
        jsonschema.validate(obj, ANSWER_SCHEMA)
        valid += 1
    print(f"transformers: {valid}/50 structured outputs validate")
    assert valid == 50


def test_the_log_probs_under_the_grammar_are_the_models_raw_ones(engine: MFSEngine) -> None:
    """A constrained continuation's reported log-prob sum equals the unconstrained model's
    log-probability of the same tokens (teacher-forced), so ``F`` is the raw likelihood."""
    import torch

    from mfs_core.types import GenerationRequest

    settings = engine.settings
    plan = plan_call(engine.backend, settings.model_copy(update={"constrain_actions": True}),
                     response_format=ResponseFormat("json_schema", ANSWER_SCHEMA))
    prompt = render_chat(engine, settings, plan, [{"role": "user", "content": QUESTION}])
    grammar = plan.vote.action_grammar.request_grammar("")
    backend = engine.backend
    request = GenerationRequest(prompt=prompt, n=2, max_tokens=64, temperature=0.7, seed=3, grammar=grammar)
    first, second = backend.generate([request])[0]
    again = backend.generate([request])[0]
    assert [c.text for c in again] == [first.text, second.text]  # seeded: the same samples
    for continuation in (first, second):
        ids = backend.encode_prompt(prompt)
        tokens = list(continuation.token_ids)
        with torch.inference_mode():
            logits = backend.model(input_ids=torch.tensor([ids + tokens])).logits[0, len(ids) - 1:-1].float()
        raw = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(tokens).unsqueeze(1)).sum().item()
        assert continuation.logprob_sum == pytest.approx(raw, abs=1e-3)


def test_a_structured_output_agent_returns_a_validated_object_in_one_model_turn() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from pydantic import BaseModel

    from langchain_mfs import ChatMFS

    class Answer(BaseModel):
        value: int

    agent = create_agent(ChatMFS(**SEARCH), tools=[], response_format=Answer)
    state = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    for message in state["messages"]:
        print(f"[{message.type}] {message.content!r} {getattr(message, 'tool_calls', '') or ''}")
    turns = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert len(turns) == 1 and [c["name"] for c in turns[0].tool_calls] == ["Answer"]
    assert isinstance(state["structured_response"], Answer)
    assert state["structured_response"].value == 9  # seeded: the demo model copies the first number (its card)


def test_llamaindex_structured_predict_returns_the_object() -> None:
    from llama_index.core.prompts import PromptTemplate
    from pydantic import BaseModel

    from llamaindex_mfs import MFSLLM

    class Answer(BaseModel):
        value: int

    answer = MFSLLM(**SEARCH).structured_predict(Answer, PromptTemplate("{question}"), question=QUESTION)
    assert isinstance(answer, Answer) and answer.value == 9


def test_json_schema_structured_output_through_chatmfs_is_the_whole_completion() -> None:
    from langchain_mfs import ChatMFS

    out = ChatMFS(**SEARCH).with_structured_output(ANSWER_SCHEMA | {"title": "Answer"}, method="json_schema",
                                                     include_raw=True).invoke(QUESTION)
    print(out["raw"].content)
    assert out["parsing_error"] is None and out["parsed"] == {"value": 9}
    assert out["raw"].content == '{"value": 9}'


def test_a_history_past_the_context_window_fails_once_before_any_decode(engine: MFSEngine) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_mfs import ChatMFS
    from mfs_core.errors import ContextWindowError

    window = engine.backend.context_window
    history = []
    while engine.backend.count_tokens(" ".join(str(m.content) for m in history)) < window:
        history += [HumanMessage(QUESTION), AIMessage("9 + 5 = 14\nThe answer is: \\boxed{14}.")]
    calls_before = engine.backend.prefill_stats.calls
    with pytest.raises(ContextWindowError) as caught:
        ChatMFS(**SEARCH).invoke([*history, HumanMessage(QUESTION)])
    message = str(caught.value)
    print(message)
    assert "\n" not in message and f"the chat history of {len(history) + 1} messages renders to" in message
    assert f"which does not fit the context window of {window} tokens" in message
    assert "is the first that does not fit" in message
    assert engine.backend.prefill_stats.calls == calls_before  # no decode was started
