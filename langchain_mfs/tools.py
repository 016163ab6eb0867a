"""``MFSReasoningTool``: a LangChain tool an agent calls to delegate a reasoning step to MFS."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.outputs import LLMResult
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field

from langchain_mfs.llms import MFSLLM

__all__ = ["MFSReasoningInput", "MFSReasoningTool"]


class MFSReasoningInput(BaseModel):
    """Arguments of :class:`MFSReasoningTool`."""

    question: str = Field(
        description="One self-contained question that needs careful step-by-step reasoning or "
        "arithmetic, stating every number and fact needed to answer it."
    )


class MFSReasoningTool(BaseTool):
    """Hand a hard reasoning sub-question to Martingale Foresight Sampling.

    An agent driven by any chat model calls this tool with a self-contained question; the
    tool answers it with :class:`~langchain_mfs.MFSLLM` (many reasoning paths sampled,
    pruned and voted on) and returns text the agent can read::

        Answer: 7
        Vote share: 0.75 (the share of completed reasoning paths that reached this answer)
        Reasoning:
        3 + 4 = 7
        The answer is: \\boxed{7}.

    The tool's output is ``(content, artifact)``: called with a ``ToolCall`` it returns a
    ``ToolMessage`` whose ``artifact`` holds the full MFS result (``answer``,
    ``vote_share``, ``text``, ``stop_reason``, ``num_steps``, ``flops``, ``token_usage``,
    ``trace``, ``model_name``). A blank question, a failed decode or one past the
    model's ``timeout`` is reported to the agent as an error message (``status="error"``)
    rather than raised.

    Example:
        .. code-block:: python

            from langchain_mfs import MFSLLM, MFSReasoningTool

            tool = MFSReasoningTool(llm=MFSLLM(step_beam_size=4, num_rollouts=4))
            tool.invoke({"question": "Tom has 3 apples. He buys 4 more. How many apples now?"})
    """

    name: str = "mfs_reasoning"
    description: str = (
        "Solves a hard multi-step reasoning or math question with Martingale Foresight Sampling: "
        "it samples several reasoning paths, prunes weak steps and returns the majority answer "
        "with the share of paths that agree (a confidence). Input: one self-contained question "
        "stating every number and fact it needs."
    )
    args_schema: type[BaseModel] = MFSReasoningInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True
    llm: MFSLLM = Field(default_factory=MFSLLM)
    """The MFS model that answers (default ``MFSLLM()``: settings from ``MFS_*`` variables)."""

    def _run(self, question: str, run_manager: CallbackManagerForToolRun | None = None) -> tuple[str, dict[str, Any]]:
        """Answer ``question``; returns ``(content for the agent, full result)``.

        Raises:
            ToolException: a blank question, a failed or timed-out decode (handled as tool output).
        """
        callbacks = run_manager.get_child() if run_manager else None
        try:
            result = self.llm.generate([question], callbacks=callbacks)
        except (TypeError, ValueError, RuntimeError, TimeoutError) as exc:
            raise ToolException(f"{self.name} failed: {exc}") from exc
        return _content_and_artifact(result)

    async def _arun(
        self, question: str, run_manager: AsyncCallbackManagerForToolRun | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Async :meth:`_run`; never blocks the event loop."""
        callbacks = run_manager.get_child() if run_manager else None
        try:
            result = await self.llm.agenerate([question], callbacks=callbacks)
        except (TypeError, ValueError, RuntimeError, TimeoutError) as exc:
            raise ToolException(f"{self.name} failed: {exc}") from exc
        return _content_and_artifact(result)


def _content_and_artifact(result: LLMResult) -> tuple[str, dict[str, Any]]:
    generation = result.generations[0][0]
    info = dict(generation.generation_info or {})
    artifact = {"text": generation.text, **info, "model_name": (result.llm_output or {}).get("model_name")}
    answer = info.get("answer")
    head = f"Answer: {answer}" if answer is not None else "No answer could be extracted from the reasoning paths."
    share = f"Vote share: {info.get('vote_share', 0.0):.2f} (the share of completed reasoning paths that reached this answer)"
    return f"{head}\n{share}\nReasoning:\n{generation.text}", artifact
