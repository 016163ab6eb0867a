"""How a decode's answer key shapes its generation requests: the engine's one question to a key.

An answer key (:class:`~mfs_core.tools.ActionVote` for tool calls and structured output,
:class:`~mfs_core.answers.OptionAnswer` for a multiple-choice question) may carry, besides
the answer it extracts:

* ``triggered_choice`` (:class:`~mfs_core.types.TriggeredChoice`): a constraint set on every
  generation request of the decode (the tool names an :class:`ActionVote` keeps calls to);
* ``action_grammar`` (:class:`~mfs_core.grammar.ActionGrammar`) and ``opening`` (the
  text the rendered prompt forces at the start of the answer): each request is given the
  grammar of what its prompt has written after the decode's prompt, and a request that
  continues an open action at least that action's token budget;
* ``answer_choices``: the labels a selecting decoder (φ) may pick from.

:func:`check_answer_key` says whether a decoder can take a key; :func:`shape_requests` wraps
a decoder so that its requests carry the key's constraints. The engine only schedules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mfs_core.decoders import Decoder, decoder_spec
from mfs_core.types import GenerationRequest, TriggeredChoice

__all__ = ["check_answer_key", "shape_requests"]


def check_answer_key(method: str, answer_key: Any) -> None:
    """Refuse an ``answer_key`` that decoder ``method`` cannot vote by.

    Every registered decoder takes an ``answer_key``; one that picks its completion by its own
    rule (:attr:`DecoderSpec.final` ``"select"``, φ-Decoding) only lets a key read the
    completions' answers (a key with ``answer_choices``, :class:`~mfs_core.answers.OptionAnswer`).

    Args:
        method: the registered decoder name.
        answer_key: the key, or None (always accepted).

    Raises:
        ValueError: an unknown ``method`` (listing the known ones), or a selecting decoder with
            a key that has no ``answer_choices``; the message names the decoder and the ones that can.
    """
    spec = decoder_spec(method)
    if answer_key is None or spec.final != "select" or getattr(answer_key, "answer_choices", None):
        return
    msg = f"decoder {method!r} cannot vote over actions (it chooses its completion without a vote); use 'mfs', 'sc' or 'cot'"
    raise ValueError(msg)


def shape_requests(decoder: Decoder, prompt: str, answer_key: Any, triggered_choice: TriggeredChoice | None = None) -> Decoder:
    """``decoder`` with its generation requests shaped by ``answer_key`` (see the module docstring).

    Args:
        decoder: the decode of ``prompt``.
        prompt: the rendered prompt it decodes (ends with the key's ``opening``, if any).
        answer_key: the decode's key, or None.
        triggered_choice: a constraint for every request; None: the key's ``triggered_choice``.

    Returns:
        ``decoder`` itself when nothing applies, else a generator that changes each request
        and passes the results through.
    """
    choice = triggered_choice if triggered_choice is not None else getattr(answer_key, "triggered_choice", None)
    if choice is not None:
        decoder = _map_requests(decoder, lambda request: replace(request, triggered_choice=choice))
    grammar = getattr(answer_key, "action_grammar", None)
    if grammar is not None:
        opening = len(getattr(answer_key, "opening", ""))
        decoder = _with_grammar(decoder, grammar, prompt[:len(prompt) - opening])
    return decoder


def _map_requests(decoder: Decoder, change: Callable[[GenerationRequest], GenerationRequest]) -> Decoder:
    """``decoder`` with ``change`` applied to every generation request it makes (results pass through)."""
    try:
        requests = next(decoder)
        while True:
            outputs = yield [change(request) for request in requests]
            requests = decoder.send(outputs)
    except StopIteration as stop:
        return stop.value
    finally:
        decoder.close()


def _with_grammar(decoder: Decoder, grammar: Any, anchor: str) -> Decoder:
    """``decoder`` with each request's :class:`~mfs_core.types.RequestGrammar` set from ``grammar``
    (an :class:`~mfs_core.grammar.ActionGrammar`) and the text its prompt has after
    ``anchor`` (the decode's prompt without a forced opening); a request that continues an
    open action gets ``max_tokens`` of at least the action's budget."""

    def constrained(request: GenerationRequest) -> GenerationRequest:
        if not request.prompt.startswith(anchor):
            return request
        bound = grammar.request_grammar(request.prompt[len(anchor):])
        max_tokens = max(request.max_tokens, bound.action_tokens) if bound.in_action else request.max_tokens
        return replace(request, grammar=bound, max_tokens=max_tokens)

    return _map_requests(decoder, constrained)
