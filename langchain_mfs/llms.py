"""``MFSLLM``: Martingale Foresight Sampling as a LangChain ``BaseLLM``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun, Callbacks
from langchain_core.language_models import BaseLLM
from langchain_core.outputs import Generation, GenerationChunk, LLMResult
from pydantic import ConfigDict

from langchain_mfs._base import MFSParams
from mfs_core.call import Reply, TextInput
from mfs_core.events import StopEvent

__all__ = ["MFSLLM"]


class MFSLLM(MFSParams, BaseLLM):
    """Martingale Foresight Sampling (EACL 2026) as a LangChain LLM.

    Each prompt is answered by an MFS search: candidate reasoning steps are sampled from M
    beams, weak ones pruned, the rest scored by a foresight rollout, beams drawn by their
    step value, until the martingale convergence test stops the search; the answer is the
    majority vote of the completed paths. The decoding is :class:`mfs_core.MFSEngine`'s;
    this class translates LangChain calls into engine requests and back.

    - Prompts are rendered by ``prompt_format``: with ``"auto"`` (default) a prompt is the
      user message of the model's chat template, followed by ``assistant_prefix``.
    - ``batch()`` hands all prompts to ``_generate`` at once and the engine decodes them in
      lockstep: one backend call per decoding round for the whole batch. Concurrent
      ``ainvoke`` calls are decoded together too; async calls never block the event loop.
    - ``stop`` (per instance and per call) cuts the returned text before the first stop
      sequence; it does not shorten the search.
    - **Streaming:** MFS chooses the whole answer before anything is streamed (the vote
      needs every completed path). ``stream``/``astream`` then yield that final text in
      chunks, firing ``on_llm_new_token`` for each, so a UI can show it progressively.
    - ``llm_output["token_usage"]`` sums prompt, completion and total tokens of every
      generation request of the search; each generation's ``generation_info`` holds the
      extracted ``answer``, ``vote_share``, ``stop_reason``, ``num_steps``, ``flops``,
      ``output_tokens``, ``method``, ``wall_seconds``, ``trace`` and ``token_usage``.
    - A call may change any setting: ``llm.invoke(q, step_beam_size=4)`` or ``.bind(...)``.
      Another ``model`` loads (once) and decodes with that model.

    Instances with the same backend fields (backend, model, device, dtype, batch size)
    share one loaded model and one engine worker, so their requests batch together.

    Example:
        .. code-block:: python

            from langchain_mfs import MFSLLM

            llm = MFSLLM(step_beam_size=4, num_rollouts=4)
            llm.invoke("Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?")
            # '3 + 4 = 7\\nThe answer is: \\\\boxed{7}.'
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "mfs"

    # --- LangChain hooks ---------------------------------------------------------------
    def generate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        callbacks: Callbacks | list[Callbacks] | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        """``BaseLLM.generate`` with the call's settings in the cache key.

        ``BaseLLM`` keys its cache (``set_llm_cache``) by the instance's parameters only, so
        a call with other settings (``seed=1``, ``temperature``, M, N, ``.bind(...)``) would
        get the answer cached for the defaults. The call runs on a copy of this instance
        with its settings applied instead, so the key, the callbacks' ``invocation_params``
        and the decode all carry them. Arguments as ``BaseLLM.generate``.
        """
        llm, kwargs = self._with_call_settings(kwargs)
        if llm is not self:
            return llm.generate(prompts, stop, callbacks, **kwargs)
        return super().generate(prompts, stop, callbacks, **kwargs)

    async def agenerate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        callbacks: Callbacks | list[Callbacks] | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        """Async :meth:`generate` (the call's settings enter the cache key)."""
        llm, kwargs = self._with_call_settings(kwargs)
        if llm is not self:
            return await llm.agenerate(prompts, stop, callbacks, **kwargs)
        return await super().agenerate(prompts, stop, callbacks, **kwargs)

    def _generate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        """Decode every prompt with MFS in lockstep (one backend call per round).

        Args:
            prompts: P prompts, each a non-blank string.
            stop: stop sequences of this call, applied with the instance's ``stop``.
            run_manager: LangChain's callback manager (unused: nothing streams here).
            **kwargs: the call keywords (:class:`mfs_core.call.CallKeywords`): settings
                (``step_beam_size=4``, ``max_tokens``), ``method``, ``response_format``.

        Returns:
            P generations (one each) and ``llm_output`` with ``token_usage`` and ``model_name``.

        Raises:
            ValueError / TypeError: no prompts, or prompt i is empty or not a string (the
                message names i); an unknown keyword or a bad setting.
            TimeoutError: not done within ``timeout`` seconds.
        """
        return _llm_result(self._caller().run(TextInput(prompts), self._keywords(kwargs, stop)))

    async def _agenerate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        """Async :meth:`_generate`: awaits the engine without blocking the event loop."""
        return _llm_result(await self._caller().arun(TextInput(prompts), self._keywords(kwargs, stop)))

    def _stream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[GenerationChunk]:
        """Decode ``prompt``, then yield the final text in chunks (MFS decides before streaming).

        While the search runs, fires the custom callback event ``mfs_step`` after each step
        and ``mfs_stop`` at the end (data: :meth:`mfs_core.events.StepEvent.to_dict`), so
        callback handlers' ``on_custom_event`` and ``astream_events`` see the search. Fires
        ``run_manager.on_llm_new_token`` for each chunk; the last chunk carries the
        ``generation_info`` of :meth:`_generate`. Raises as :meth:`_generate`.
        """
        call = self._caller().stream(TextInput([prompt]), self._keywords(kwargs, stop))
        for event in self._events(call, run_manager):
            if isinstance(event, StopEvent):
                for chunk in _chunks(call.finish(event)):
                    if run_manager:
                        run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk

    async def _astream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[GenerationChunk]:
        """Async :meth:`_stream`: the same events, never blocking the event loop, then the chunks."""
        call = await self._caller().astream(TextInput([prompt]), self._keywords(kwargs, stop))
        async for event in self._aevents(call, run_manager):
            if isinstance(event, StopEvent):
                for chunk in _chunks(call.finish(event)):
                    if run_manager:
                        await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk



def _llm_result(replies: Sequence[Reply]) -> LLMResult:
    """P generations (one per prompt) and ``llm_output`` with the summed ``token_usage`` and ``model_name``."""
    generations = [[Generation(text=reply.text, generation_info=_generation_info(reply))] for reply in replies]
    usages = [reply.usage for reply in replies]
    total = {key: sum(usage[key] for usage in usages) for key in usages[0]}
    return LLMResult(generations=generations, llm_output={"token_usage": total, "model_name": replies[0].model_name})


def _chunks(reply: Reply) -> Iterator[GenerationChunk]:
    """The answer streamed in chunks; the last carries the ``generation_info`` and ``model_name``."""
    pieces = reply.chunks()
    info = {**_generation_info(reply), "model_name": reply.model_name}
    for i, piece in enumerate(pieces):
        yield GenerationChunk(text=piece, generation_info=info if i == len(pieces) - 1 else None)


def _generation_info(reply: Reply) -> dict[str, Any]:
    return {**reply.metadata, "token_usage": reply.usage}
