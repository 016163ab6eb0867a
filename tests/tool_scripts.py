"""Scripts that play the tool-calling demo model's contract on a :class:`~tests.scripted.ScriptedBackend`.

After the assistant prefix the model writes a reasoning line, then a Hermes block
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``; once a tool result is in
the prompt it answers ``The answer is: \\boxed{N}.``. Use them with
:func:`tests.scripted.hermes_template`, which renders tool results as ``<|tool|>`` turns.
"""

from __future__ import annotations

import json
import re

from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import continuation

__all__ = ["PREFIX", "STEP_STOP", "calculator_script", "follow"]

STEP_STOP = ("\n", "<end_of_reasoning>")
"""The stop strings of a step request (a rollout stops at the end marker only)."""

PREFIX = "The reasoning steps are:\n\n"


def follow(target: str, request: GenerationRequest, logprob: float = -0.3) -> list[Continuation]:
    """A deterministic model writing ``target`` after the assistant prefix: a step request gets
    its next line, a rollout the rest (ended by EOS). When the prompt already opens a tool call
    (a forced ``tool_choice``), the model writes ``target`` from its ``<tool_call>`` on."""
    written = request.prompt.rsplit(PREFIX, 1)[-1]
    if written.startswith("<tool_call>") and not target.startswith(written) and "<tool_call>" in target:
        target = target[target.index("<tool_call>"):]  # a forced call (tool_choice): no reasoning before it
    assert target.startswith(written), (target, written)
    rest = target[len(written):]
    if request.stop == STEP_STOP and "\n" in rest:
        return [continuation(rest.split("\n")[0], mean_logprob=logprob)] * request.n
    return [continuation(rest, mean_logprob=logprob, finish_reason="eos")] * request.n


def calculator_script(request: GenerationRequest) -> list[Continuation]:
    """A reasoning line and an ``add`` call on the question's numbers; the answer after a tool result."""
    if "<|tool|>" in request.prompt:
        result = re.findall(r"<\|tool\|>\n(.*?)\n", request.prompt)[-1]
        return follow(f"The answer is: \\boxed{{{result}}}.", request)
    a, b = re.findall(r"\d+", request.prompt.split("<|user|>")[-1])[:2]
    body = json.dumps({"name": "add", "arguments": {"a": int(a), "b": int(b)}})
    return follow(f"I add the two numbers with the tool.\n<tool_call>\n{body}\n</tool_call>", request)
