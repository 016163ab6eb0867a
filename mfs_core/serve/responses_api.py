"""``POST /v1/responses``: the OpenAI Responses API in front of the same search.

LangChain's ``ChatOpenAI`` drops chat-completions reasoning fields (langchain #35059) but reads
reasoning items of the Responses API (``use_responses_api=True``), as does the ``openai``
client's ``responses.create`` / ``responses.stream``. So a Responses request is translated into
the chat call it means (:func:`chat_body`, then :func:`mfs_core.serve.schemas.parse_chat`'s
checks: the same strict types, limits and MFS extra fields), decoded as a chat call, and
answered as a Response:

* a ``reasoning`` item holding the search as :class:`~mfs_core.streaming.ReasoningText` writes it
  (the lines ``[step t: ...]`` and the reasoning committed at each step), both as its summary
  (``summary_text``, what LangChain and OpenAI's own models show) and as its content
  (``reasoning_text``, as vLLM's reasoning parsers return it);
* then the answer as a ``message`` with ``output_text``, or one ``function_call`` item per tool call;
* ``usage`` with ``output_tokens_details.reasoning_tokens`` (the search's tokens not in the answer).

Streamed, the same items arrive as the Responses API's events: ``response.created``, per step
``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta``, then the
answer's ``response.output_text.delta`` (or ``response.function_call_arguments.delta``), and
``response.completed`` with the whole Response (a failure: ``response.failed``).

Not supported (400): ``previous_response_id`` and ``conversation`` (nothing is stored),
``background``, built-in tools (web search, file search, ...), non-text input parts.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from mfs_core.serve.schemas import RequestError, ServeCall, parse_chat
from mfs_core.settings import MFSSettings
from mfs_core.tools.parsers import ParsedOutput

__all__ = ["ResponseEvents", "chat_body", "parse_responses", "response_object"]

WHERE = "/v1/responses"

# Responses fields accepted and not acted on (nothing is stored; the search is always shown).
_IGNORED = frozenset({"store", "metadata", "user", "include", "parallel_tool_calls", "reasoning", "truncation",
                      "service_tier", "safety_identifier", "prompt_cache_key", "max_tool_calls", "stream_options"})
_REFUSED = {"previous_response_id": "nothing is stored, send the whole conversation in input",
            "conversation": "nothing is stored, send the whole conversation in input",
            "background": "decodes are answered in the request", "prompt": "prompt templates are not stored here"}
# The translated chat body's names of Responses fields that mean the same.
_RENAMED = {"max_output_tokens": "max_tokens"}
# Fields passed to the chat check as they are (OpenAI's and the search's).
_PASSED = frozenset({"model", "stream", "temperature", "top_p", "seed", "top_logprobs"})


def chat_body(body: Any) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body a Responses request means.

    ``input`` (a string, or a list of messages and ``function_call`` / ``function_call_output``
    items) and ``instructions`` become ``messages``; ``tools`` (flat function tools) and
    ``tool_choice`` the chat shapes; ``text.format`` becomes ``response_format``;
    ``max_output_tokens`` becomes ``max_tokens``. Other fields (the search's settings, ``seed``,
    ``method``) pass through to :func:`~mfs_core.serve.schemas.parse_chat`, which checks them.

    Raises:
        RequestError: 400 for a body that is not an object, a missing ``input``, an item or
            content part that is not text or a function call, a field this server cannot honour.
    """
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    for name, why in _REFUSED.items():
        if body.get(name) not in (None, False):
            raise RequestError(400, f"{WHERE}: {name} is not supported by mfs serve ({why})", param=name)
    if "n" in body:
        raise RequestError(400, f"{WHERE} answers one response per request (n is a chat completions field)", param="n")
    if "input" not in body:
        raise RequestError(400, f"{WHERE} needs input (a string or a list of items)", param="input")
    messages = _messages(body["input"])
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise RequestError(400, f"instructions must be a string, got {type(instructions).__name__}",
                               param="instructions")
        messages.insert(0, {"role": "system", "content": instructions})
    chat: dict[str, Any] = {"messages": messages}
    for name, value in body.items():
        if name in ("input", "instructions") or name in _IGNORED or name in _REFUSED:
            continue
        if name == "tools":
            chat["tools"] = _tools(value)
        elif name == "tool_choice":
            chat["tool_choice"] = _tool_choice(value)
        elif name == "text":
            fmt = _format(value)
            if fmt is not None:
                chat["response_format"] = fmt
        else:
            chat[_RENAMED.get(name, name)] = value
    return chat


def parse_responses(body: Any, base: MFSSettings, *, served: str, max_n: int, max_messages: int) -> ServeCall:
    """Check a ``/v1/responses`` body; the chat call it asks for, answered as a Response.

    Raises:
        RequestError: as :func:`chat_body` and :func:`~mfs_core.serve.schemas.parse_chat`.
    """
    call = parse_chat(chat_body(body), base, served=served, max_n=max_n, max_messages=max_messages, where=WHERE)
    call.endpoint = "responses"
    return call


def _messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise RequestError(400, f"input must be a string or a non-empty list of items, got {value!r:.80}", param="input")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise RequestError(400, f"input[{index}] must be an object, got {type(item).__name__}", param="input")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role"), "content": _text(item.get("content"), index)})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments", "{}")}}
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls") is not None:
                messages[-1]["tool_calls"].append(call)  # parallel calls of one assistant turn
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": output if isinstance(output, str) else json.dumps(output)})
        elif kind == "reasoning":
            continue  # an earlier answer's search: not shown to the model again
        else:
            raise RequestError(400, f"input[{index}] is a {kind!r} item; mfs serve takes messages, function_call and "
                               "function_call_output items", param="input")
    return messages


def _text(content: Any, index: int) -> Any:
    """A message's content as the chat check takes it: a string, or its text parts joined."""
    if isinstance(content, str) or content is None:
        return content
    if not isinstance(content, list):
        return content  # the chat check names the wrong type
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            parts.append(part.get("text"))
        else:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise RequestError(400, f"input[{index}] holds a {kind!r} content part; mfs serve renders text only",
                               param="input")
    if not all(isinstance(text, str) for text in parts):
        raise RequestError(400, f"input[{index}]: a text part's text must be a string", param="input")
    return "".join(parts)


def _tools(value: Any) -> Any:
    if not isinstance(value, list):
        return value  # the chat check names the wrong type
    tools = []
    for index, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            raise RequestError(400, f"tools[{index}] is a {kind!r} tool; mfs serve calls function tools only",
                               param="tools")
        function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if key in tool}
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") == "function" and "function" not in value:
        return {"type": "function", "function": {"name": value.get("name")}}
    return value


def _format(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        raise RequestError(400, f"text must be an object, got {value!r:.80}", param="text")
    fmt = value.get("format")
    if fmt is None or isinstance(fmt, dict) and fmt.get("type") == "text":
        return None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = {key: fmt[key] for key in ("name", "schema", "strict", "description") if key in fmt}
        return {"type": "json_schema", "json_schema": schema}
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {"type": "json_object"}
    raise RequestError(400, f"text.format must be text, json_schema or json_object, got {fmt!r:.80}", param="text")


def _usage(chat_usage: dict[str, Any]) -> dict[str, Any]:
    """The Responses API's ``usage`` of a chat ``usage`` (:func:`mfs_core.serve.responses.usage`)."""
    return {"input_tokens": chat_usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": chat_usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": chat_usage["completion_tokens_details"]["reasoning_tokens"]},
            "total_tokens": chat_usage["total_tokens"]}


def _ids() -> dict[str, str]:
    hexes = uuid.uuid4().hex
    return {"response": f"resp_{hexes}", "reasoning": f"rs_{hexes}", "message": f"msg_{hexes}"}


def _reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text else []
    content = [{"type": "reasoning_text", "text": text}] if text else []
    return {"type": "reasoning", "id": item_id, "summary": summary, "content": content, "status": status}


def _answer_items(ids: dict[str, str], text: str, parsed: ParsedOutput | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    calls = parsed.tool_calls if parsed is not None else []
    if text or not calls:
        items.append({"type": "message", "id": ids["message"], "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for index, call in enumerate(calls):
        items.append({"type": "function_call", "id": f"fc_{ids['message'][4:]}_{index}", "call_id": call.id,
                      "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"})
    return items


def _shell(call: ServeCall, ids: dict[str, str], served: str, created: int, status: str) -> dict[str, Any]:
    """The Response's fields besides ``output`` and ``usage``."""
    fmt = call.response_format
    return {"id": ids["response"], "object": "response", "created_at": created, "status": status, "model": served,
            "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
            "parallel_tool_calls": False, "temperature": call.settings.temperature, "top_p": call.settings.top_p,
            "tool_choice": call.tool_choice if call.tool_choice is not None else "auto",
            "tools": [{"type": "function", **tool["function"]} for tool in (call.tools or [])],
            "text": {"format": {"type": "text"} if fmt is None else {"type": "json_schema"}}, "output": [],
            "usage": None}


def response_object(call: ServeCall, served: str, reasoning: str, text: str, parsed: ParsedOutput | None,
                    chat_usage: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """The Response of a finished, non-streamed call: the reasoning item, the answer's items, ``usage``,
    and the decode's ``mfs`` metadata (as a chat choice carries it)."""
    ids = _ids()
    response = _shell(call, ids, served, int(time.time()), "completed")
    response["output"] = [_reasoning_item(ids["reasoning"], reasoning, "completed"), *_answer_items(ids, text, parsed)]
    response["usage"] = _usage(chat_usage)
    response["mfs"] = metadata
    return response


class ResponseEvents:
    """The Responses API's stream events of one call, numbered (``sequence_number``) as they are made.

    Use: :meth:`start`, then :meth:`reasoning` per piece of the search's text, then
    :meth:`answer` with the chosen completion, then :meth:`completed` (or :meth:`failed`).
    Each returns event dicts to send as server-sent events.
    """

    def __init__(self, call: ServeCall, served: str) -> None:
        self.call = call
        self.served = served
        self.ids = _ids()
        self.created = int(time.time())
        self.sequence = 0
        self.reasoning_text = ""
        self.output: list[dict[str, Any]] = []

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def _response(self, status: str) -> dict[str, Any]:
        response = _shell(self.call, self.ids, self.served, self.created, status)
        response["output"] = list(self.output)
        return response

    def start(self) -> Iterator[dict[str, Any]]:
        """``response.created``, ``response.in_progress``, the reasoning item and its summary part opened."""
        yield self._event("response.created", response=self._response("in_progress"))
        yield self._event("response.in_progress", response=self._response("in_progress"))
        item = self.ids["reasoning"]
        yield self._event("response.output_item.added", output_index=0,
                          item=_reasoning_item(item, "", "in_progress"))
        yield self._event("response.reasoning_summary_part.added", item_id=item, output_index=0, summary_index=0,
                          part={"type": "summary_text", "text": ""})

    def reasoning(self, delta: str) -> Iterator[dict[str, Any]]:
        """One piece of the search's text, as a summary delta and as a reasoning-text delta."""
        self.reasoning_text += delta
        item = self.ids["reasoning"]
        yield self._event("response.reasoning_summary_text.delta", item_id=item, output_index=0, summary_index=0,
                          delta=delta)
        yield self._event("response.reasoning_text.delta", item_id=item, output_index=0, content_index=0, delta=delta)

    def answer(self, text: str, parsed: ParsedOutput | None, pieces: list[str]) -> Iterator[dict[str, Any]]:
        """The reasoning item closed, then the answer's items: the message text in ``pieces``, or each call."""
        item, reasoning = self.ids["reasoning"], self.reasoning_text
        yield self._event("response.reasoning_summary_text.done", item_id=item, output_index=0, summary_index=0,
                          text=reasoning)
        yield self._event("response.reasoning_summary_part.done", item_id=item, output_index=0, summary_index=0,
                          part={"type": "summary_text", "text": reasoning})
        yield self._event("response.reasoning_text.done", item_id=item, output_index=0, content_index=0, text=reasoning)
        done = _reasoning_item(item, reasoning, "completed")
        self.output.append(done)
        yield self._event("response.output_item.done", output_index=0, item=done)
        for answer in _answer_items(self.ids, text, parsed):
            index = len(self.output)
            if answer["type"] == "message":
                yield self._event("response.output_item.added", output_index=index,
                                  item={**answer, "status": "in_progress", "content": []})
                part = {"type": "output_text", "text": "", "annotations": []}
                yield self._event("response.content_part.added", item_id=answer["id"], output_index=index,
                                  content_index=0, part=part)
                for piece in pieces:
                    yield self._event("response.output_text.delta", item_id=answer["id"], output_index=index,
                                      content_index=0, delta=piece, logprobs=[])
                yield self._event("response.output_text.done", item_id=answer["id"], output_index=index,
                                  content_index=0, text=text, logprobs=[])
                yield self._event("response.content_part.done", item_id=answer["id"], output_index=index,
                                  content_index=0, part={**part, "text": text})
            else:
                yield self._event("response.output_item.added", output_index=index,
                                  item={**answer, "arguments": "", "status": "in_progress"})
                yield self._event("response.function_call_arguments.delta", item_id=answer["id"], output_index=index,
                                  delta=answer["arguments"])
                yield self._event("response.function_call_arguments.done", item_id=answer["id"], output_index=index,
                                  arguments=answer["arguments"])
            self.output.append(answer)
            yield self._event("response.output_item.done", output_index=index, item=answer)

    def completed(self, chat_usage: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
        """``response.completed`` with the whole Response."""
        response = self._response("completed")
        response["usage"] = _usage(chat_usage)
        response["mfs"] = metadata
        return self._event("response.completed", response=response)

    def failed(self, error: RequestError) -> dict[str, Any]:
        """``response.failed``: the Response with its ``error`` (``code``, ``message``)."""
        response = self._response("failed")
        response["error"] = {"code": error.kind, "message": error.message}
        return self._event("response.failed", response=response)
