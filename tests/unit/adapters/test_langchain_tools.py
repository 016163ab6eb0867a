"""``MFSReasoningTool``: LangChain's standard tool unit tests, and the tool invoked the way an
agent invokes it, on a scripted backend. No model is loaded."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import ToolCall, ToolMessage
from langchain_tests.unit_tests import ToolsUnitTests

from langchain_mfs import MFSLLM, MFSReasoningTool
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)
QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"


class TestMFSReasoningToolStandard(ToolsUnitTests):
    """LangChain's standard unit tests for tools (``langchain_tests.unit_tests.ToolsUnitTests``)."""

    @property
    def tool_constructor(self) -> type[MFSReasoningTool]:
        return MFSReasoningTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"llm": MFSLLM(step_beam_size=2, num_rollouts=2)}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"question": QUESTION}


def split_vote_script(request: GenerationRequest) -> list[Continuation]:
    """Three of every four sampled paths answer 7, one answers 8; each ends at once (EOS)."""
    answers = ["3 + 4 = 7\nThe answer is: \\boxed{7}.", "3 + 4 = 7\nThe answer is: \\boxed{7}.",
               "3 + 5 = 8\nThe answer is: \\boxed{8}.", "3 + 4 = 7\nThe answer is: \\boxed{7}."]
    return [continuation(answers[i % 4], mean_logprob=-0.1 - 0.01 * i, finish_reason="eos") for i in range(request.n)]


@pytest.fixture
def tool() -> MFSReasoningTool:
    engine = MFSEngine(ScriptedBackend(split_vote_script), MFSSettings(step_beam_size=4, num_rollouts=1,
                                                                       max_finished_fraction=1.0))
    return MFSReasoningTool(llm=MFSLLM(engine=engine))


EXPECTED_CONTENT = (
    "Answer: 7\n"
    "Vote share: 0.75 (the share of completed reasoning paths that reached this answer)\n"
    "Reasoning:\n3 + 4 = 7\nThe answer is: \\boxed{7}."
)


def test_invoked_with_arguments_it_returns_the_answer_and_vote_share(tool: MFSReasoningTool) -> None:
    assert tool.invoke({"question": QUESTION}) == EXPECTED_CONTENT


def test_invoked_with_a_tool_call_it_returns_a_tool_message(tool: MFSReasoningTool) -> None:
    call = ToolCall(name="mfs_reasoning", args={"question": QUESTION}, id="call-1", type="tool_call")
    message = tool.invoke(call)
    assert isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.name, message.status) == ("call-1", "mfs_reasoning", "success")
    assert message.content == EXPECTED_CONTENT
    artifact = message.artifact
    assert (artifact["answer"], artifact["vote_share"], artifact["model_name"]) == ("7", 0.75, "mfs-demo")
    assert artifact["text"] == "3 + 4 = 7\nThe answer is: \\boxed{7}."
    assert artifact["token_usage"]["total_tokens"] > 0


async def test_ainvoke_with_a_tool_call(tool: MFSReasoningTool) -> None:
    call = ToolCall(name="mfs_reasoning", args={"question": QUESTION}, id="call-2", type="tool_call")
    message = await tool.ainvoke(call)
    assert message.content == EXPECTED_CONTENT
    assert message.artifact["vote_share"] == 0.75


def test_the_schema_an_agent_sees(tool: MFSReasoningTool) -> None:
    schema = tool.tool_call_schema.model_json_schema()
    assert schema["required"] == ["question"]
    assert "self-contained" in schema["properties"]["question"]["description"]


def test_a_blank_question_comes_back_as_an_error_message(tool: MFSReasoningTool) -> None:
    call = ToolCall(name="mfs_reasoning", args={"question": "  "}, id="call-3", type="tool_call")
    message = tool.invoke(call)
    assert message.status == "error"
    assert message.content == "mfs_reasoning failed: prompt 0 of 1: a prompt must not be empty or whitespace only, got '  '"


def test_no_answer_is_said_plainly() -> None:
    engine = MFSEngine(ScriptedBackend(lambda r: [continuation("I am not sure.", finish_reason="eos")] * r.n), SETTINGS)
    content = MFSReasoningTool(llm=MFSLLM(engine=engine)).invoke({"question": QUESTION})
    assert content.startswith("No answer could be extracted from the reasoning paths.\nVote share: 0.00")


def test_the_default_model_is_configured_by_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_STEP_BEAM_SIZE", "3")
    monkeypatch.setenv("MFS_NUM_ROLLOUTS", "5")
    llm = MFSReasoningTool().llm
    assert (llm.step_beam_size, llm.num_rollouts) == (3, 5)


class SlowBackend(ScriptedBackend):
    """Answers like ``split_vote_script`` after ``delay`` seconds per call."""

    def __init__(self, delay: float) -> None:
        super().__init__(split_vote_script)
        self.delay = delay

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        time.sleep(self.delay)
        return super().generate(requests)


def test_a_decode_past_the_timeout_comes_back_as_an_error_message() -> None:
    llm = MFSLLM(engine=MFSEngine(SlowBackend(delay=0.3), SETTINGS), timeout=0.05)
    call = ToolCall(name="mfs_reasoning", args={"question": QUESTION}, id="call-4", type="tool_call")
    message = MFSReasoningTool(llm=llm).invoke(call)
    assert message.status == "error"
    assert message.content == "mfs_reasoning failed: 1 MFS decode(s) did not finish within timeout=0.05 s (abandoned: the engine stops them)"
