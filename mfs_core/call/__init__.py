"""The one call layer: a front end's call, from its keywords to its answer.

LangChain's and LlamaIndex's classes and ``mfs serve`` translate their own types into a call and its
answer back, and nothing else; this package owns everything between (DESIGN.md, "The call layer and
the front ends"), above the engine:

* :mod:`~mfs_core.call.settings`: the adapters' flat fields and ``model_kwargs`` derived from
  :class:`MFSSettings`, and their values back to settings;
* :mod:`~mfs_core.call.keywords`: the per-call keywords (``method``, ``stop``, ``tools``, ``tool_choice``,
  ``response_format``, ``max_tokens``, settings), the same set everywhere (:class:`CallKeywords`);
* :mod:`~mfs_core.call.engines`: the engine of a call, injected or owned (:class:`EngineSource`);
* :mod:`~mfs_core.call.messages`: chat messages in the neutral shape (:func:`chat_message`);
* :mod:`~mfs_core.call.prepare`: the call's input planned and rendered (:func:`prepare`, :class:`PreparedCall`);
* :mod:`~mfs_core.call.run`: prepare -> submit -> wait or stream -> finish, logic once with thin sync,
  async and streaming drivers (:class:`Caller`, :class:`Call`, :class:`CallStream`);
* :mod:`~mfs_core.call.reply`: the answer (:class:`Reply`), its usage, metadata and stream chunks.

Example:
    >>> caller = Caller(EngineSource(engine), engine.settings)  # doctest: +SKIP
    >>> [reply] = caller.run(ChatInput([chat_message("user", "2 + 3 = ?")]), CallKeywords(stop=("\\n",)))  # doctest: +SKIP
    >>> reply.text, reply.usage["total_tokens"]  # doctest: +SKIP
"""

from __future__ import annotations

from mfs_core.call.engines import EngineSource, check_engine, engine_for
from mfs_core.call.keywords import CALL_KEYWORDS, SETTING_KEYWORDS, CallKeywords, join_stops
from mfs_core.call.messages import chat_message
from mfs_core.call.prepare import (
    CallInput, ChatInput, PreparedCall, TextInput, prepare, prepare_call, prepare_prompts, render_chat, uses_chat_template,
)
from mfs_core.call.reply import Reply, result_metadata, stream_chunks, token_usage, trace_summary
from mfs_core.call.run import Call, Caller, CallStream
from mfs_core.call.settings import (
    ADAPTER_FIELDS, adapter_arguments, check_adapter_arguments, check_model_kwargs, memo_settings, rename_max_tokens, settings_fields,
    settings_from_fields,
)

__all__ = [
    "ADAPTER_FIELDS", "CALL_KEYWORDS", "adapter_arguments", "SETTING_KEYWORDS", "Call", "CallInput", "CallKeywords", "CallStream", "Caller", "ChatInput",
    "EngineSource", "check_adapter_arguments", "check_model_kwargs", "PreparedCall", "Reply", "TextInput", "chat_message", "check_engine", "engine_for", "join_stops",
    "memo_settings", "prepare", "prepare_call", "prepare_prompts", "render_chat", "rename_max_tokens", "result_metadata",
    "settings_fields", "settings_from_fields", "stream_chunks", "token_usage", "trace_summary", "uses_chat_template",
]
