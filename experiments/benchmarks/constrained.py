"""Grammar-constrained actions measured: do forced calls and structured output parse and validate?

Two kinds of decode, each over ``count`` generated tool questions
(:func:`experiments.benchmarks.tool_vote.generate_questions`), built as both adapters build them
(:func:`mfs_core.tools.plan.plan_call`, :func:`~mfs_core.call.render_chat`,
``engine.decode_prompts(..., answer_key=plan.vote)``, :meth:`~mfs_core.tools.plan.CallPlan.parse`):

* ``forced call``: the tools of :data:`~experiments.benchmarks.tool_vote.TOOLS` with
  ``tool_choice="required"``; valid when the chosen completion holds at least one call, no
  invalid call, and every call's arguments validate against its tool's parameter schema;
* ``structured output``: ``response_format`` json_schema :data:`VALUE_SCHEMA`; valid when
  the chosen completion is one JSON value that validates against it.

Validation uses ``jsonschema`` (installed with the ``langchain`` or ``llamaindex`` extras).
Used by ``experiments/benchmarks/constrained_actions.py`` and the backends' integration tests.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from experiments.benchmarks.tool_vote import TOOLS, generate_questions
from mfs_core.settings import MFSSettings
from mfs_core.call import render_chat
from mfs_core.tools.plan import ResponseFormat, plan_call

__all__ = ["FORCED_CALL", "STRUCTURED_OUTPUT", "VALUE_SCHEMA", "ActionRun", "run_actions", "valid_action"]

FORCED_CALL = "forced call"
STRUCTURED_OUTPUT = "structured output"
Kind = Literal["forced call", "structured output"]

VALUE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
"""The response schema of the structured-output decodes."""


@dataclass(frozen=True)
class ActionRun:
    """One kind of decode over ``total`` questions.

    Attributes:
        kind: :data:`FORCED_CALL` or :data:`STRUCTURED_OUTPUT`.
        constrained: sampled under the action grammar (``constrain_actions``).
        valid: completions that parse and validate (see the module docstring).
        total: questions decoded.
        output_tokens: tokens sampled by the whole decode (every path, rollouts included).
        seconds: wall time of ``decode_prompts`` (seconds).
        invalid: the chosen texts that did not validate (for reports).
    """

    kind: str
    constrained: bool
    valid: int
    total: int
    output_tokens: int
    seconds: float
    invalid: tuple[str, ...] = ()


def valid_action(kind: str, parsed: Any) -> bool:
    """Whether one parsed completion (:class:`~mfs_core.tools.parsers.ParsedOutput`) is valid for ``kind``."""
    import jsonschema

    if kind == FORCED_CALL:
        schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
        if not parsed.tool_calls or parsed.invalid_tool_calls:
            return False
        for call in parsed.tool_calls:
            try:
                jsonschema.validate(call.arguments, schemas[call.name])
            except (KeyError, jsonschema.ValidationError):
                return False
        return True
    try:
        jsonschema.validate(json.loads(parsed.content), VALUE_SCHEMA)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def run_actions(engine: Any, settings: MFSSettings, kind: Kind, *, constrained: bool, count: int = 50,
                seed: int = 0) -> ActionRun:
    """Decode ``count`` questions of ``kind`` on ``engine`` and count the valid ones.

    Args:
        engine: an :class:`~mfs_core.engine.MFSEngine` on a model whose template renders tools.
        settings: the search settings of the decodes (``max_answer_tokens`` is the action budget).
        kind: :data:`FORCED_CALL` or :data:`STRUCTURED_OUTPUT`.
        constrained: sample actions under their grammar (``constrain_actions``).
        count: questions (>= 1).
        seed: seed of the generated questions.

    Returns:
        The :class:`ActionRun`.

    Raises:
        ValueError: an unknown ``kind`` or ``count`` < 1.
    """
    if kind == FORCED_CALL:
        plan = plan_call(engine.backend, settings.changed(constrain_actions=constrained), tools=TOOLS,
                         tool_choice="required")
    elif kind == STRUCTURED_OUTPUT:
        plan = plan_call(engine.backend, settings.changed(constrain_actions=constrained),
                         response_format=ResponseFormat("json_schema", VALUE_SCHEMA))
    else:
        msg = f"kind must be {FORCED_CALL!r} or {STRUCTURED_OUTPUT!r}, got {kind!r}"
        raise ValueError(msg)
    questions = generate_questions(count, seed)
    prompts = [render_chat(engine, settings, plan, [{"role": "user", "content": q.question}]) for q in questions]
    start = time.perf_counter()
    results = engine.decode_prompts(prompts, settings=settings, answer_key=plan.vote)
    seconds = time.perf_counter() - start
    invalid = tuple(r.text for r in results if not valid_action(kind, plan.parse(r.text)))
    return ActionRun(kind=kind, constrained=constrained, valid=len(results) - len(invalid), total=len(results),
                     output_tokens=sum(r.output_tokens for r in results), seconds=seconds, invalid=invalid)
