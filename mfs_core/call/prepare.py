"""Preparing a call: its input, planned (:func:`~mfs_core.tools.plan.plan_call`) and rendered on its engine.

A call's input is a :class:`ChatInput` (neutral chat messages, :func:`mfs_core.call.chat_message`) or a
:class:`TextInput` (completion prompts). :func:`prepare` plans the call's tools and response format
against the engine's model once, renders the prompt (the chat template with its tools and JSON
instruction, then a forced call's opening; or each prompt by ``prompt_format``) and refuses a prompt
over the model's context window before any decode. Each :class:`PreparedCall` then finishes its
decode's chosen completion (:meth:`PreparedCall.finish`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from mfs_core.backends.base import Backend
from mfs_core.call.keywords import CallKeywords
from mfs_core.engine import MFSEngine
from mfs_core.errors import ContextWindowError
from mfs_core.settings import MFSSettings
from mfs_core.tools.actions import ActionVote
from mfs_core.tools.parsers import ParsedOutput
from mfs_core.tools.plan import CallPlan, ResponseFormat, ToolChoiceValue, plan_call

__all__ = ["CallInput", "ChatInput", "PreparedCall", "TextInput", "prepare", "prepare_call", "prepare_prompts",
           "render_chat", "uses_chat_template"]


@dataclass(frozen=True)
class ChatInput:
    """A chat call's input.

    Attributes:
        messages: neutral chat messages (``{"role", "content", ...}``, :func:`mfs_core.call.chat_message`).
        as_text: where the call's ``prompt_format`` does not use the chat template (``"raw"``, or
            ``"auto"`` on a model without one), the messages joined into one completion prompt
            (LlamaIndex's ``messages_to_prompt``); None: the chat template always.
    """

    messages: Sequence[dict[str, Any]]
    as_text: Callable[[], str] | None = None


@dataclass(frozen=True)
class TextInput:
    """A completion call's input: P prompts, each rendered by ``prompt_format`` (as ``mfs ask`` renders a question)."""

    prompts: Sequence[str]


CallInput = Union[ChatInput, TextInput]
"""What a call decodes."""


@dataclass(frozen=True)
class PreparedCall:
    """One prompt ready to decode: its plan, its rendered prompt and the decode's vote key.

    Attributes:
        plan: the :class:`~mfs_core.tools.plan.CallPlan` (it parses and finishes the chosen completion).
        prompt: the rendered model prompt (template, tools, JSON instruction, forced opening).
        answer_key: what the decode votes by: the plan's :class:`~mfs_core.tools.actions.ActionVote`
            when the call has tools or structured output, else None (the extracted answer).
    """

    plan: CallPlan
    prompt: str
    answer_key: ActionVote | None

    def finish(self, text: str, stop: Sequence[str] | None = None) -> tuple[str, ParsedOutput]:
        """The reply to the call from its decode's chosen completion ``text``: the message text
        (calls removed when tools were rendered, cut before the first ``stop`` sequence) and its
        parsed calls (:meth:`~mfs_core.tools.plan.CallPlan.reply`).

        Raises:
            TypeError: ``stop`` is a bare string or holds a non-string.
        """
        return self.plan.reply(text, stop)


def prepare(engine: MFSEngine, settings: MFSSettings, call_input: CallInput,
            keywords: CallKeywords) -> list[PreparedCall]:
    """The prepared calls of one call: one for a chat call, one per prompt for a completion call.

    A chat call whose ``prompt_format`` does not use the chat template and that gives ``as_text`` is
    decoded as that completion prompt (tools are then refused).

    Raises:
        TypeError: tools or a tool choice for a completion call; a prompt that is not a string.
        ValueError: a prompt or conversation without text; tools where the template is not used.
        ToolsNotSupportedError: tools on a model whose template does not render them.
        ContextWindowError: a prompt as long as the model's context window or longer.
    """
    tools, choice, response_format = keywords.tools, keywords.tool_choice, keywords.response_format
    if isinstance(call_input, ChatInput):
        if call_input.as_text is None or uses_chat_template(engine.backend, settings.prompt_format):
            return [prepare_call(engine, settings, call_input.messages, tools=tools, tool_choice=choice,
                                 response_format=response_format)]
        if plan_call(engine.backend, settings, tools=tools, tool_choice=choice).prompt_tools() is not None:
            msg = f"tools need the chat template, but prompt_format={settings.prompt_format!r}"
            raise ValueError(msg)
        return prepare_prompts(engine, settings, [call_input.as_text()], response_format=response_format)
    if keywords.has_tools:
        msg = "tools and tool_choice need a chat call: a completion prompt renders no tools"
        raise TypeError(msg)
    return prepare_prompts(engine, settings, call_input.prompts, response_format=response_format)


def prepare_call(
    engine: MFSEngine,
    settings: MFSSettings,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: ToolChoiceValue = None,
    response_format: ResponseFormat | None = None,
) -> PreparedCall:
    """A chat call: :func:`~mfs_core.tools.plan.plan_call` on ``engine``'s model, then the prompt
    (:func:`render_chat`) and the vote key.

    Raises:
        As :func:`~mfs_core.tools.plan.plan_call`, and ContextWindowError: the prompt does not fit the window.
    """
    plan = plan_call(engine.backend, settings, tools=tools, tool_choice=tool_choice, response_format=response_format)
    return PreparedCall(plan, render_chat(engine, settings, plan, messages), plan.answer_key)


def prepare_prompts(
    engine: MFSEngine, settings: MFSSettings, prompts: Sequence[str], *, response_format: ResponseFormat | None = None,
) -> list[PreparedCall]:
    """Completion calls: each prompt rendered by ``settings.prompt_format`` (:meth:`MFSEngine.render`), no
    tools; with ``response_format`` the decodes vote over JSON objects (and sample them under a grammar
    with ``constrain_actions``), the prompt itself unchanged (a completion prompt carries its own instruction).

    Returns:
        One :class:`PreparedCall` per prompt, in order.

    Raises:
        ValueError: no prompts; prompt i is empty (the message names i of P).
        TypeError: prompt i is not a string.
    """
    if not prompts:
        msg = "prompts must not be empty, got []"
        raise ValueError(msg)
    plan = plan_call(engine.backend, settings, response_format=response_format)
    calls = []
    for i, prompt in enumerate(prompts):
        try:
            calls.append(PreparedCall(plan, engine.render(prompt, settings), plan.answer_key))
        except (TypeError, ValueError) as exc:
            msg = f"prompt {i} of {len(prompts)}: {exc}"
            raise (TypeError if isinstance(exc, TypeError) else ValueError)(msg) from exc
    return calls


def render_chat(engine: MFSEngine, settings: MFSSettings, plan: CallPlan, messages: Sequence[dict[str, Any]]) -> str:
    """The model prompt of a chat call: ``plan``'s messages and tools through ``engine``'s template, then
    the opening of a forced call (:meth:`~mfs_core.tools.actions.ToolRequest.forced_opening`).

    Raises:
        ContextWindowError: the prompt has as many tokens as the model's context window or more; the
            message gives the tokens, the window and the first message of the history that does not
            fit (raised here, once, before any decode).
    """
    prompt = engine.render_messages(plan.messages(messages), settings, tools=plan.prompt_tools()) + plan.vote.opening
    try:
        window = engine.backend.context_window
        tokens = engine.backend.count_tokens(prompt)
    except Exception:  # a backend that cannot tell (the HTTP one without a tokenizer): the server will
        return prompt
    if isinstance(window, int) and 0 < window <= tokens:
        raise ContextWindowError(_overflow_message(engine, settings, plan, messages, tokens, window))
    return prompt


def _overflow_message(engine: MFSEngine, settings: MFSSettings, plan: CallPlan, messages: Sequence[dict[str, Any]],
                      tokens: int, window: int) -> str:
    """One line: the history's size, the window, and the first message past it."""
    first = None
    for count in range(1, len(messages)):
        try:
            part = engine.render_messages(plan.messages(messages[:count]), settings, tools=plan.prompt_tools())
        except Exception:  # a template that refuses a cut history (e.g. a tool result without its call)
            continue
        if engine.backend.count_tokens(part) >= window:
            first = count
            break
    where = f"message {first} ({messages[first - 1].get('role')}) is the first that does not fit" if first else (
        f"the last message ({messages[-1].get('role') if messages else 'none'}) does not fit")
    return (f"the chat history of {len(messages)} messages renders to {tokens} tokens, which does not fit the "
            f"context window of {window} tokens of model {engine.backend.model_name!r}; {where}; shorten or "
            f"summarise the history")


_HAS_TEMPLATE: weakref.WeakKeyDictionary[Backend, bool] = weakref.WeakKeyDictionary()


def uses_chat_template(backend: Backend, prompt_format: str) -> bool:
    """True when ``prompt_format`` renders through the chat template: ``"chat"``, or ``"auto"`` on a model
    that has one (probed once per backend object)."""
    if prompt_format != "auto":
        return prompt_format == "chat"
    try:
        return _HAS_TEMPLATE[backend]
    except (KeyError, TypeError):
        pass
    has = backend.apply_chat_template([{"role": "user", "content": "?"}]) is not None
    try:
        _HAS_TEMPLATE[backend] = has
    except TypeError:  # not weak-referenceable: not cached
        pass
    return has
