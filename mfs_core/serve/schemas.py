"""The OpenAI request bodies ``mfs serve`` takes, checked and turned into one decode call.

A body has the OpenAI fields of its endpoint and, as extra fields, per-request MFS settings
(``method``, ``step_beam_size``, ``num_rollouts``, ... every :class:`MFSSettings` field but
those that pick the loaded model and its backend) and ``return_trace``. The OpenAI fields
map to the engine as the adapters map their call keywords: ``seed``, ``temperature``,
``top_p`` are settings of the same name; ``max_tokens`` / ``max_completion_tokens`` are
``max_answer_tokens``, as the adapters' ``max_tokens``; ``stop`` cuts the text
(:meth:`mfs_core.call.Call.finish`); ``tools``, ``tool_choice`` and ``response_format``
go to :func:`mfs_core.tools.plan.plan_call`; ``n`` runs n decodes, choice i with seed
``seed + i``. Every refusal is a :class:`RequestError` with the library's one-line message.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from mfs_core.call import chat_message, settings_from_fields
from mfs_core.decoders import ParamNotAccepted, decoder_spec
from mfs_core.errors import MFSError, format_validation_error, one_line, unknown_name_message
from mfs_core.settings import BACKEND_FIELDS as SETTINGS_BACKEND_FIELDS
from mfs_core.settings import MFSSettings
from mfs_core.tools.plan import ResponseFormat

__all__ = [
    "BACKEND_FIELDS", "OVERRIDE_FIELDS", "RequestError", "ServeCall", "parse_chat", "parse_completion",
]

BACKEND_FIELDS = frozenset(SETTINGS_BACKEND_FIELDS)
"""Settings that pick the loaded model and its backend: fixed when the server starts."""

OVERRIDE_FIELDS = frozenset(MFSSettings.model_fields) - BACKEND_FIELDS
"""Settings a request may set as extra body fields (``step_beam_size``, ``seed``, ...)."""

_MFS_EXTRAS = frozenset({"method", "return_trace"})

# OpenAI fields the server does not implement, accepted only at the value that asks for nothing.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "logprobs": (None, False), "top_logprobs": (None, 0), "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0), "logit_bias": (None, {}), "echo": (None, False), "best_of": (None, 1),
    "suffix": (None, ""), "store": (None, False), "modalities": (None, ["text"]), "prediction": (None,),
    "audio": (None,), "web_search_options": (None,), "functions": (None,), "function_call": (None,),
}
_IGNORED = frozenset({"user", "metadata", "service_tier", "parallel_tool_calls", "safety_identifier",
                      "prompt_cache_key"})


class RequestError(MFSError):
    """A request the server refuses: HTTP ``status`` and a one-line OpenAI error body.

    Attributes:
        status: the HTTP status (400, 401, 404, 413, 429, 503).
        message: one line naming the value and what is allowed.
        param: the body field at fault, or None.
        kind: the OpenAI error ``type`` (``invalid_request_error``, ...).
        headers: extra response headers (``Retry-After`` for 429).
    """

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 kind: str = "invalid_request_error", headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.kind = kind
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The OpenAI error object, ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}}


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class _Common(BaseModel):
    """The OpenAI fields both endpoints share (ranges: the server's; sampling fields: MFSSettings').

    Strict, as JSON types: ``"n": "2"``, ``"seed": true`` or ``"stream": "yes"`` are refused, not coerced
    (an integer is still a number where a float is expected).
    """

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    n: int = Field(default=1, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None


class _ToolCallFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    arguments: str | dict[str, Any] = "{}"


class _ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str | None = None
    type: Literal["function"] = "function"
    function: _ToolCallFunction


class _Message(BaseModel):
    """One chat message; fields OpenAI clients add (``refusal``, ``annotations``) are ignored."""

    model_config = ConfigDict(extra="ignore")
    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[_ToolCallIn] | None = None
    tool_call_id: str | None = None


class _ChatBody(_Common):
    messages: list[_Message] = Field(min_length=1)
    max_completion_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


class _CompletionBody(_Common):
    prompt: str | list[str] = Field(min_length=1)


@dataclass
class ServeCall:
    """One checked request: what to decode and how to answer.

    Attributes:
        endpoint: ``"chat"``, ``"completions"`` or ``"responses"`` (a chat call answered as a Response).
        settings: the server's settings changed by the request's fields.
        method: the registered decoder.
        n: choices per prompt (choice i decodes with seed ``settings.seed + i``).
        stream: answer as server-sent events.
        include_usage: send the usage chunk at the end of a stream.
        stop: stop sequences cutting each answer.
        return_trace: add the search's trace to the response.
        messages: the neutral chat messages (chat).
        prompts: the prompts (completions).
        tools / tool_choice / response_format: the chat call's tools and structured output.
    """

    endpoint: Literal["chat", "completions", "responses"]
    settings: MFSSettings
    method: str = "mfs"
    n: int = 1
    stream: bool = False
    include_usage: bool = True
    stop: list[str] = field(default_factory=list)
    return_trace: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    response_format: ResponseFormat | None = None


def _split(body: Any, model: type[BaseModel], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's OpenAI fields and its MFS extra fields; unknown names refused."""
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    openai_fields = set(model.model_fields)
    valid = openai_fields | set(_NEUTRAL) | _IGNORED | OVERRIDE_FIELDS | _MFS_EXTRAS
    unknown = sorted(set(body) - valid)
    if unknown:
        backend = sorted(set(unknown) & BACKEND_FIELDS)
        if backend:
            msg = (f"{where} cannot set {backend}: they pick the loaded model and its backend, fixed when mfs serve "
                   "starts (its flags and MFS_* variables)")
            raise RequestError(400, msg, param=backend[0])
        raise RequestError(400, unknown_name_message(where, unknown, valid, what="field"), param=unknown[0])
    for name, allowed in _NEUTRAL.items():
        if name in body and body[name] not in allowed:
            raise RequestError(400, f"{name}={body[name]!r} is not supported by mfs serve (allowed: {allowed[-1]!r} or "
                               "leave it out)", param=name)
    openai = {name: body[name] for name in openai_fields if name in body}
    extras = {name: body[name] for name in set(body) & (OVERRIDE_FIELDS | _MFS_EXTRAS)}
    return openai, extras


def _check_extra_types(extras: dict[str, Any]) -> None:
    """Refuse a setting among the extra fields (``extras``: names of :data:`OVERRIDE_FIELDS` only) whose
    JSON type is not the setting's (``"step_beam_size": "4"``, ``"share_foresight": 1``): the settings
    would coerce them; a request must say what it means.

    Raises:
        RequestError: 400 naming the field, the value and its JSON type.
    """
    for name, value in extras.items():
        try:
            _strict_adapter(name).validate_json(json.dumps(value), strict=True)
        except ValidationError as exc:
            expected = exc.errors()[0].get("msg", "another type")
            raise RequestError(400, f"{name}={value!r} has the wrong JSON type ({type(value).__name__}): {expected}",
                               param=name) from None


@functools.lru_cache(maxsize=None)
def _strict_adapter(name: str) -> TypeAdapter:
    """A validator of the setting ``name``'s type (constraints are checked later, by the settings)."""
    return TypeAdapter(MFSSettings.model_fields[name].annotation)


def _validated(model: type[BaseModel], values: dict[str, Any]) -> Any:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0].get("loc", ())
        raise RequestError(400, format_validation_error(exc, model), param=str(first[0]) if first else None) from None


def _settings(base: MFSSettings, common: _Common, extras: dict[str, Any], max_completion: int | None,
              served: str, max_n: int) -> tuple[MFSSettings, str, bool]:
    """The request's settings, decoder and ``return_trace``."""
    if common.model is not None and common.model != served:
        raise RequestError(404, f"model {common.model!r} is not served here; this server serves {served!r}",
                           param="model", kind="not_found_error")
    if common.n > max_n:
        raise RequestError(400, f"n={common.n} is more than this server allows; allowed: 1 <= n <= {max_n}", param="n")
    method = extras.get("method", "mfs")
    try:
        spec = decoder_spec(method)
    except (ValueError, TypeError) as exc:
        raise RequestError(400, str(exc), param="method") from None
    values = {name: value for name, value in extras.items() if name in OVERRIDE_FIELDS}
    _check_extra_types(values)
    try:
        spec.check_params(values)  # the method's own parameters; ranges are checked with the settings below
    except ParamNotAccepted as exc:
        raise RequestError(400, str(exc), param=exc.names[0]) from None
    except ValidationError as exc:
        first = exc.errors()[0].get("loc", ())
        raise RequestError(400, str(exc), param=str(first[0]) if first else None) from None
    for name in ("seed", "temperature", "top_p"):
        if getattr(common, name) is not None:
            values[name] = getattr(common, name)
    limits = {name: value for name, value in (("max_tokens", common.max_tokens), ("max_completion_tokens", max_completion),
                                              ("max_answer_tokens", values.get("max_answer_tokens"))) if value is not None}
    if len(set(limits.values())) > 1:
        shown = ", ".join(f"{name}={value}" for name, value in limits.items())
        raise RequestError(400, f"give one of max_tokens, max_completion_tokens, max_answer_tokens, not several ({shown})",
                           param=next(iter(limits)))
    if limits:
        values["max_answer_tokens"] = next(iter(limits.values()))
    try:
        settings = settings_from_fields(values, base=base)
    except ValidationError as exc:
        message = str(one_line(exc, MFSSettings))
        first = exc.errors()[0].get("loc", ())
        param = str(first[0]) if first else None
        given = next(iter(limits), None)  # the name the client used for the token limit
        if param == "max_answer_tokens" and given not in (None, "max_answer_tokens"):
            message, param = message.replace("max_answer_tokens", given), given
        raise RequestError(400, message, param=param) from None
    except ValueError as exc:
        raise RequestError(400, str(exc)) from None
    trace = extras.get("return_trace", False)
    if not isinstance(trace, bool):
        raise RequestError(400, f"return_trace must be true or false, got {trace!r}", param="return_trace")
    return settings, method, trace


def _stop(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def _text(message: _Message, index: int) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            msg = (f"messages[{index}] holds a {part.get('type')!r} content part; mfs serve renders text only "
                   "(images, audio and files are not supported)")
            raise RequestError(400, msg, param="messages")
    return "".join(parts)


def _calls(message: _Message, index: int) -> list[dict[str, Any]]:
    calls = []
    for call in message.tool_calls or []:
        arguments = call.function.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                msg = f"messages[{index}].tool_calls: arguments of {call.function.name!r} are not JSON ({exc.msg})"
                raise RequestError(400, msg, param="messages") from None
        if not isinstance(arguments, dict):
            msg = f"messages[{index}].tool_calls: arguments of {call.function.name!r} must be a JSON object"
            raise RequestError(400, msg, param="messages")
        calls.append({"name": call.function.name, "arguments": arguments, "id": call.id})
    return calls


def _response_format(value: dict[str, Any] | None) -> ResponseFormat | None:
    """OpenAI's ``response_format`` as the engine's :class:`ResponseFormat` (None: free text)."""
    if value is None or value.get("type") == "text":
        return None
    if value.get("type") == "json_object":
        return ResponseFormat("json_mode", None)
    if value.get("type") == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            msg = "response_format json_schema needs {'json_schema': {'name': ..., 'schema': {...}}}"
            raise RequestError(400, msg, param="response_format")
        return ResponseFormat("json_schema", schema)
    msg = f"response_format type must be 'text', 'json_object' or 'json_schema', got {value.get('type')!r}"
    raise RequestError(400, msg, param="response_format")


def parse_chat(body: Any, base: MFSSettings, *, served: str, max_n: int, max_messages: int,
               where: str = "/v1/chat/completions") -> ServeCall:
    """Check a ``/v1/chat/completions`` body; the call it asks for.

    Args:
        body: the decoded JSON body.
        base: the server's settings.
        served: the model name the server serves (a request naming another gets 404).
        max_n: most choices per request.
        max_messages: most messages per request.
        where: the endpoint named in messages (``/v1/responses`` reuses this check on the body it
            translates, :mod:`mfs_core.serve.responses_api`).

    Raises:
        RequestError: an unknown field, a value out of range, an unsupported feature.
    """
    openai, extras = _split(body, _ChatBody, where)
    if openai.get("messages") == []:
        raise RequestError(400, "messages must hold at least one message, got []", param="messages")
    if isinstance(openai.get("messages"), list) and len(openai["messages"]) > max_messages:
        raise RequestError(400, f"messages holds {len(openai['messages'])} messages; this server allows at most "
                           f"{max_messages}", param="messages")
    chat: _ChatBody = _validated(_ChatBody, openai)
    settings, method, trace = _settings(base, chat, extras, chat.max_completion_tokens, served, max_n)
    messages = []
    for index, message in enumerate(chat.messages):
        try:
            messages.append(chat_message(message.role, _text(message, index), name=message.name,
                                         tool_calls=_calls(message, index) or None, tool_call_id=message.tool_call_id))
        except (TypeError, ValueError) as exc:
            raise RequestError(400, f"messages[{index}]: {exc}", param="messages") from None
    include = chat.stream_options.include_usage if chat.stream_options is not None else None
    return ServeCall(
        "chat", settings, method, chat.n, chat.stream, include is not False, _stop(chat.stop), trace, messages=messages,
        tools=chat.tools, tool_choice=chat.tool_choice, response_format=_response_format(chat.response_format),
    )


def parse_completion(body: Any, base: MFSSettings, *, served: str, max_n: int, max_messages: int) -> ServeCall:
    """Check a ``/v1/completions`` body (``prompt``: a string or a list, at most ``max_messages``).

    Raises:
        RequestError: as :func:`parse_chat`.
    """
    where = "/v1/completions"
    openai, extras = _split(body, _CompletionBody, where)
    completion: _CompletionBody = _validated(_CompletionBody, openai)
    prompts = [completion.prompt] if isinstance(completion.prompt, str) else list(completion.prompt)
    if len(prompts) > max_messages:
        raise RequestError(400, f"prompt holds {len(prompts)} prompts; this server allows at most {max_messages}",
                           param="prompt")
    settings, method, trace = _settings(base, completion, extras, None, served, max_n)
    include = completion.stream_options.include_usage if completion.stream_options is not None else None
    return ServeCall("completions", settings, method, completion.n, completion.stream, include is not False,
                     _stop(completion.stop), trace, prompts=prompts)
