"""Structured output through the prompt: the JSON instruction and the validation.

``json_schema`` / ``json_mode`` structured output asks for a JSON object in the prompt (a
system instruction, :func:`json_instruction`), MFS votes over the canonical JSON of each
path's last object (:class:`~mfs_core.tools.actions.ActionVote` with ``json_answers``), and
the chosen completion's object is validated against the schema (:func:`validate_json`).
No guided decoding: the vLLM backend's structured outputs are not used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mfs_core.errors import MFSError

__all__ = ["StructuredOutputError", "add_system_instruction", "json_instruction", "validate_json"]


class StructuredOutputError(MFSError, ValueError):
    """The chosen completion holds no JSON object, or one the schema rejects."""


def json_instruction(schema: dict[str, Any] | None) -> str:
    """The system instruction that asks for one JSON object (matching ``schema`` if given)."""
    if schema is None:
        return "Answer with a single JSON object and nothing after it."
    return (
        "Answer with a single JSON object that conforms to this JSON schema, and nothing after it:\n"
        + json.dumps(schema, sort_keys=True)
    )


def add_system_instruction(messages: Sequence[dict[str, Any]], instruction: str) -> list[dict[str, Any]]:
    """``messages`` with ``instruction`` appended to the leading system message (or one added first)."""
    messages = [dict(message) for message in messages]
    if messages and messages[0]["role"] == "system":
        content = messages[0].get("content") or ""
        messages[0]["content"] = f"{content}\n\n{instruction}" if content else instruction
        return messages
    return [{"role": "system", "content": instruction}, *messages]


def validate_json(obj: Any, schema: dict[str, Any] | None) -> Any:
    """``obj`` if it is a JSON object valid under ``schema`` (Draft 2020-12 via ``jsonschema``).

    Raises:
        StructuredOutputError: ``obj`` is None or not an object, or the schema rejects it
            (the message gives the schema's complaint and the path).
    """
    if obj is None:
        msg = "the completion holds no JSON object"
        raise StructuredOutputError(msg)
    if not isinstance(obj, dict):
        msg = f"expected a JSON object, got {type(obj).__name__}: {obj!r:.120}"
        raise StructuredOutputError(msg)
    if schema:
        import jsonschema

        try:
            jsonschema.validate(obj, schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            msg = f"the JSON object does not match the schema at {where}: {exc.message}"
            raise StructuredOutputError(msg) from exc
    return obj
