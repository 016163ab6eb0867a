"""The backend protocol: the only thing a decoder may ask of a model.

Dependency-free on purpose (no torch, no httpx): a decoder, the engine and the tests import
it without any model library installed.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from mfs_core.types import Continuation, GenerationRequest

__all__ = ["AsyncBackend", "Backend", "warn_unconstrained_grammar", "warn_unhonoured_choices"]


_WARNED_CHOICES: weakref.WeakSet[Any] = weakref.WeakSet()
_WARNED_GRAMMARS: weakref.WeakSet[Any] = weakref.WeakSet()


def warn_unhonoured_choices(backend: Any, requests: Sequence[GenerationRequest], logger: Any) -> None:
    """Log once per ``backend`` that it samples ``triggered_choice`` requests unconstrained.

    For the backends that do not honour :class:`~mfs_core.types.TriggeredChoice` (vLLM,
    HTTP): the tool names the model writes are then only checked after parsing (a call to
    a tool not bound becomes an invalid call).
    """
    if backend in _WARNED_CHOICES or not any(r.triggered_choice for r in requests):
        return
    _WARNED_CHOICES.add(backend)
    logger.warning(
        "%s samples without the tool-name constraint (constrain_tool_names): only the transformers "
        "backend honours it; calls to tools that are not bound become invalid calls", type(backend).__name__)


def warn_unconstrained_grammar(backend: Any, requests: Sequence[GenerationRequest], logger: Any) -> None:
    """Log once per ``backend`` that it samples a grammar request without its grammar.

    For the backends that send a request's grammar to vLLM (vLLM, HTTP): they can only send
    :attr:`~mfs_core.types.RequestGrammar.remote`, a grammar that starts where the prompt
    ends, and there is none when the prompt ends inside an action's JSON value (a rollout
    from a step cut there). Such a request is sampled unconstrained; its action is then
    only checked after parsing (an action that does not parse becomes an invalid call).
    """
    if backend in _WARNED_GRAMMARS:
        return
    if not any(r.grammar is not None and r.grammar.remote is None for r in requests):
        return
    _WARNED_GRAMMARS.add(backend)
    logger.warning(
        "%s samples a request whose prompt ends inside an action's JSON value without the action grammar "
        "(constrain_actions): only the transformers backend can continue a grammar from there; such actions "
        "are checked after parsing", type(backend).__name__)


@runtime_checkable
class Backend(Protocol):
    """A model that samples continuations with raw log-probabilities.

    Implementations: :class:`mfs_core.backends.transformers.TransformersBackend` (CPU or
    CUDA), and the vLLM and OpenAI-compatible HTTP backends.
    """

    model_name: str
    """Name or path of the loaded model."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Sample every request of the call as one batch.

        Args:
            requests: R requests; request r asks for ``requests[r].n`` continuations.

        Returns:
            R lists; list r holds ``requests[r].n`` continuations, in order.

        Raises:
            ContextWindowError: a prompt does not fit the context window.
        """
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's tokenizer (no special tokens added)."""
        ...

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str | None:
        """Render ``messages`` (and ``tools``) with the generation prompt; None without a template.

        Follows ``transformers``' ``apply_chat_template(messages, tools=..., add_generation_prompt=True)``:
        ``tools`` are OpenAI-format function tools, messages may be ``role="tool"`` results and
        assistant messages with ``tool_calls``. A template that ignores tools renders the same
        text with and without them (:func:`mfs_core.tools.renders_tools` tests that).
        """
        ...

    @property
    def context_window(self) -> int:
        """Most tokens (prompt + output) the model accepts."""
        ...

    @property
    def num_parameters(self) -> int:
        """Parameter count, for the FLOPs estimate 6·n·P."""
        ...


@runtime_checkable
class AsyncBackend(Backend, Protocol):
    """A backend whose requests may be sent a decode at a time, each call awaited on its own.

    What ``MFSSettings.scheduling="continuous"`` needs: the engine runs each decode as a task
    on :attr:`loop` and awaits :meth:`agenerate` with that decode's requests only, so the
    model's own scheduler (vLLM's ``AsyncLLM``: continuous batching) batches the requests of
    concurrent decodes as they arrive. Implementation:
    :class:`mfs_core.backends.vllm_async.AsyncVLLMBackend`. Its ``generate`` is the same
    call made from another thread (it must not be called on :attr:`loop`'s thread).
    """

    @property
    def loop(self) -> Any:
        """The running ``asyncio`` event loop :meth:`agenerate` must be awaited on (its own thread)."""
        ...

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Sample ``requests``, as :meth:`Backend.generate` (same shapes and errors), on :attr:`loop`.

        Cancelling the awaiting task cancels the requests (the model stops sampling them).
        """
        ...
