"""Framework-neutral pieces the LangChain and LlamaIndex adapters share.

Everything an adapter does beyond its framework's types lives here, once: building
:class:`MFSSettings` from an adapter's fields and choosing the engine that decodes them,
waiting for the engine's decodes (:mod:`mfs_core.engine.waiting`, re-exported here), turning a chat message into the ``{"role", "content"}`` dict the chat template
takes, cutting output at stop sequences, splitting a finished text into stream chunks, and
turning a :class:`DecodeResult` into usage counts and metadata.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mfs_core.engine import MFSEngine
from mfs_core.engine.waiting import (  # re-exported: the adapters wait through the engine's one helper
    abandon,
    astream_events,
    await_results,
    stream_events,
    timeout_message,
    wait_results,
)
from mfs_core.settings import MFSSettings
from mfs_core.tools.call import apply_stop  # re-exported: the call path's own cut at stop sequences
from mfs_core.types import DecodeResult

__all__ = [
    "OwnedEngines",
    "abandon",
    "apply_stop",
    "astream_events",
    "await_results",
    "chat_message",
    "check_engine",
    "engine_for",
    "rename_max_tokens",
    "result_metadata",
    "settings_fields",
    "settings_from_fields",
    "stream_chunks",
    "stream_events",
    "timeout_message",
    "token_usage",
    "trace_summary",
    "wait_results",
]

# Role names of the frameworks (LangChain message types, LlamaIndex ``MessageRole``,
# OpenAI roles) mapped to the three roles every chat template knows.
_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "chatbot": "assistant",
    "tool": "tool",
    "function": "tool",
}


def settings_from_fields(values: Mapping[str, Any], *, base: MFSSettings | None = None) -> MFSSettings:
    """The :class:`MFSSettings` an adapter's field values describe.

    Args:
        values: field name -> value, every name a field of :class:`MFSSettings`. A None
            value leaves that field to ``base`` (how adapters declare "not set").
        base: settings the values change (then nothing is read: no environment, no
            ``.env``); None: ``MFSSettings()``, so ``MFS_*`` environment variables, the
            ``.env`` file, then the defaults fill every field not given.

    Returns:
        New frozen settings (``base`` is not changed).

    Raises:
        ValueError: a name is not a settings field (the message lists the unknown names).
        pydantic.ValidationError: a value out of range (the message names field and value).
    """
    unknown = sorted(set(values) - set(MFSSettings.model_fields))
    if unknown:
        msg = f"not MFSSettings fields: {unknown}; known: {sorted(MFSSettings.model_fields)}"
        raise ValueError(msg)
    given = {name: value for name, value in values.items() if value is not None}
    if base is None:
        return MFSSettings(**given)
    return base.changed(**given)  # validated; no environment or .env read


def settings_fields(
    *, optional: bool = False, notes: Mapping[str, str] | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, tuple[Any, Any]]:
    """Every :class:`MFSSettings` field as an adapter field, for ``pydantic.create_model``.

    The one place the adapters' settings fields come from: name, type, default and
    description are :class:`MFSSettings`' own, so a field added there appears in both
    adapters with nothing copied by hand. Constraints are left to :class:`MFSSettings`,
    which validates every value the adapters resolve. The ablations
    (:data:`mfs_core.settings.ABLATION_FIELDS`) come as one run, in that order, each
    description starting ``"Ablation ("`` with the decoder variants that set it, so a
    framework's field listing shows them grouped and marked.

    Args:
        optional: False (LangChain): the setting's type and default. True (LlamaIndex):
            ``type | None`` defaulting to None, meaning "not set here" (the description says
            where such a field takes its value from).
        notes: field name -> a sentence on what the adapter does with it, appended to the description.
        overrides: field name -> further ``pydantic.Field`` keywords (``exclude=True``).

    Returns:
        Field name -> ``(annotation, FieldInfo)``, in :class:`MFSSettings`' order.
    """
    from pydantic import Field

    notes, overrides = notes or {}, overrides or {}
    fields: dict[str, tuple[Any, Any]] = {}
    for name, field in MFSSettings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if optional:
            tail = f"None: the injected engine's value, else MFS_{name.upper()} or the MFSSettings default ({default!r})."
            annotation, value = field.annotation | None, None
        else:
            tail = f"Default {default!r}, else MFS_{name.upper()}."
            annotation, value = field.annotation, default
        description = " ".join(part for part in (field.description, notes.get(name), tail) if part)
        extra = {"repr": False} if not field.repr else {}
        fields[name] = (annotation, Field(default=value, description=description, **{**extra, **overrides.get(name, {})}))
    return fields


def rename_max_tokens(values: Mapping[str, Any]) -> dict[str, Any]:
    """Map the frameworks' standard ``max_tokens`` to ``max_answer_tokens`` (tokens).

    Raises:
        ValueError: both are given with different values.
    """
    values = dict(values)
    if "max_tokens" not in values:
        return values
    max_tokens = values.pop("max_tokens")
    other = values.get("max_answer_tokens")
    if other is not None and max_tokens is not None and other != max_tokens:
        msg = f"give max_tokens or max_answer_tokens, not both (got {max_tokens} and {other})"
        raise ValueError(msg)
    if max_tokens is not None:
        values["max_answer_tokens"] = max_tokens
    return values


class OwnedEngines:
    """The engines an adapter object (``ChatMFS``, ``MFSLLM``, ...) made for itself, closed with it.

    :meth:`get` gives the engine for a call's settings: one per distinct backend settings
    (:meth:`MFSSettings.backend_key`), made on first use by :meth:`MFSEngine.from_settings` (on
    the process-wide shared backend, reference-counted) and kept, so concurrent calls with
    different backend settings never close each other's engine. :meth:`close` closes them all:
    each counts one engine out of its backend, which closes (the model unloads, vLLM's processes
    stop) with the last engine that shares it. :meth:`bind` makes that happen when the owner is
    garbage-collected, or at interpreter exit (:func:`weakref.finalize`), so a dropped adapter
    frees its model and a script that exits does not wait on a live vLLM engine.
    """

    def __init__(self) -> None:
        """Own nothing yet."""
        self._engines: dict[Any, MFSEngine] = {}
        self._lock = threading.Lock()

    def bind(self, owner: object) -> None:
        """Close these engines when ``owner`` is collected or the interpreter exits (``owner`` must
        support weak references; this object keeps no reference to it)."""
        weakref.finalize(owner, self.close)

    def get(self, settings: MFSSettings) -> MFSEngine:
        """The owned engine for ``settings``' backend settings, made (the model loaded) on first use.

        Raises:
            FileNotFoundError / ImportError: the model or the backend's dependencies are missing.
        """
        key = settings.backend_key()
        with self._lock:
            engine = self._engines.get(key)
            if engine is None or engine.closed:
                engine = self._engines[key] = MFSEngine.from_settings(settings)
            return engine

    def close(self) -> None:
        """Close every owned engine (a no-op for those already closed); :meth:`get` makes new ones after."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()


def engine_for(settings: MFSSettings, engine: MFSEngine | None = None, *, owner: str = "engine_for") -> MFSEngine:
    """The engine that decodes with ``settings``: ``engine`` when given, else the shared one.

    An injected ``engine`` is used when its backend settings
    (:attr:`MFSSettings.backend_settings`: what chooses, loads and reaches the model) equal
    those of ``settings``, and refused otherwise (:func:`check_engine`): an adapter handed an
    engine never loads a second model. Without one, the engine shared by every caller with
    these backend settings (:meth:`MFSEngine.from_settings`, which loads the model on first
    use). Pass ``settings`` to the engine's decode call; the returned engine's own settings
    may differ in decoder fields.

    Raises:
        ValueError: ``engine``'s backend settings differ from ``settings``' (one line naming the fields).
        FileNotFoundError / ImportError: the model or the backend's dependencies are missing.
    """
    if engine is None:
        return MFSEngine.from_settings(settings)
    check_engine(engine, settings, owner)
    return engine


def check_engine(engine: MFSEngine, settings: MFSSettings, owner: str = "engine_for") -> None:
    """Refuse ``settings`` whose backend settings differ from the injected ``engine``'s.

    Args:
        engine: the engine handed to the adapter.
        settings: what the adapter (or one call) would decode with.
        owner: who got the engine, for the message (``"ChatMFS"``).

    Raises:
        ValueError: one line naming each differing field with the engine's and the given
            value (an API key shown as ``'**********'``), e.g. ``ChatMFS(engine=...): the engine's
            backend settings differ from this model's in max_retries (engine: 3, here: 5); ...``.
    """
    mine, given = engine.settings.backend_settings, settings.backend_settings
    if mine == given:
        return
    names = mine.differences(given)
    msg = (
        f"{owner}(engine=...): the engine's backend settings differ from this model's in {', '.join(names)} "
        f"(engine: {', '.join(mine.shown(n) for n in names)}; here: {', '.join(given.shown(n) for n in names)}); "
        "build the engine with them (MFSEngine.from_settings) or leave them out"
    )
    raise ValueError(msg)


def chat_message(
    role: str,
    content: str,
    *,
    name: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    tool_call_id: str | None = None,
) -> dict[str, Any]:
    """One chat message as the neutral dict :func:`mfs_core.prompts.render_messages` takes.

    Roles are normalised to ``system`` / ``user`` / ``assistant`` / ``tool``: ``human`` and
    ``user`` are the user; ``ai``, ``assistant``, ``model`` and ``chatbot`` the assistant;
    ``system`` and ``developer`` the system; ``tool`` and ``function`` a tool result. How
    tool results and tool calls reach the template (the Hugging Face tool format, or text
    turns for a template without tools) is decided when rendering
    (:func:`mfs_core.tools.rendering.template_messages`).

    Args:
        role: the framework's role name (case-insensitive).
        content: the message text.
        name: the tool's name (tool results only; the speaker's name is dropped).
        tool_calls: an assistant message's calls, ``[{"name", "arguments": dict, "id"}]``.
        tool_call_id: the call a tool result answers.

    Returns:
        ``{"role", "content"}``, plus ``tool_calls`` (assistant), ``name`` and
        ``tool_call_id`` (tool) when given.

    Raises:
        TypeError: ``content`` is not a string.
        ValueError: an unknown role (the message lists the known ones).
    """
    if not isinstance(content, str):
        msg = f"message content must be a string, got {type(content).__name__}: {content!r:.80}"
        raise TypeError(msg)
    normalised = _ROLES.get(str(role).lower())
    if normalised is None:
        msg = f"unknown chat role {role!r}; known: {sorted(_ROLES)}"
        raise ValueError(msg)
    message: dict[str, Any] = {"role": normalised, "content": content}
    if normalised == "tool":
        message.update({key: value for key, value in (("name", name), ("tool_call_id", tool_call_id)) if value})
    elif normalised == "assistant" and tool_calls:
        message["tool_calls"] = [
            {"name": call["name"], "arguments": dict(call.get("arguments") or {}), "id": call.get("id")} for call in tool_calls
        ]
    return message


def stream_chunks(text: str) -> Iterator[str]:
    """Split a finished text into stream chunks: each line, and the words within it.

    MFS chooses the whole answer before anything is streamed; the chunks only let a UI
    show it progressively. ``"".join(stream_chunks(t)) == t``.
    """
    start = 0
    for i, char in enumerate(text):
        if char in " \n" and i + 1 > start:
            yield text[start : i + 1]
            start = i + 1
    if start < len(text):
        yield text[start:]


def token_usage(result: DecodeResult) -> dict[str, int]:
    """``{"prompt_tokens", "completion_tokens", "total_tokens"}`` of one decode (tokens)."""
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.output_tokens,
        "total_tokens": result.prompt_tokens + result.output_tokens,
    }


def trace_summary(result: DecodeResult) -> list[dict[str, Any]]:
    """Per step: candidates sampled, pruned, selected, ``max V`` and whether it converged; for a
    step its decoder noted (ESC's windows, DeepConf's rounds: pruned = discarded or stopped,
    selected = votes, converged = the stop test passed) also its ``note``."""
    return [
        {
            "step": step.step,
            "candidates": len(step.candidates),
            "pruned": step.num_pruned,
            "selected": sum(c.selected for c in step.candidates),
            "max_step_value": step.max_step_value,
            "converged": step.converged,
        } | ({"note": step.note} if step.note else {})
        for step in result.steps
    ]


def result_metadata(result: DecodeResult) -> dict[str, Any]:
    """What adapters attach to a generation: answer, vote share, stop reason, steps, FLOPs.

    Keys: ``answer`` (with tools: the winning action key), ``vote_share`` (0-1),
    ``votes`` (completed paths per answer or action key, most first), ``stop_reason``,
    ``num_steps``, ``flops`` (6·n·P), ``output_tokens`` (tokens), ``method``,
    ``wall_seconds`` and ``trace`` (:func:`trace_summary`).
    """
    votes = Counter(key for key in result.completion_answers if key is not None)
    return {
        "votes": dict(votes.most_common()),
        "answer": result.answer,
        "vote_share": result.vote_share,
        "stop_reason": result.stop_reason,
        "num_steps": len(result.steps),
        "flops": result.flops,
        "output_tokens": result.output_tokens,
        "method": result.method,
        "wall_seconds": result.wall_seconds,
        "trace": trace_summary(result),
    }
