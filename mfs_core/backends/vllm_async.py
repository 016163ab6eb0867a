"""The vLLM backend for ``scheduling="continuous"``: ``AsyncLLM``, each decode's requests on their own.

:class:`~mfs_core.backends.vllm.VLLMBackend` sends a round of every live decode as one
``LLM.generate`` call (the engine's lockstep design). This backend holds vLLM's
``vllm.v1.engine.async_llm.AsyncLLM`` instead, on an event loop of its own
(:class:`~mfs_core.backends._loop.EventLoopThread`), and the engine's continuous scheduler
awaits :meth:`AsyncVLLMBackend.agenerate` per decode: a decode's requests enter vLLM's
scheduler as soon as that decode asks for them, and leave it as soon as they finish, so vLLM
batches the requests of all decodes continuously instead of round by round.

Coded against the installed vLLM CPU build **0.32.0** (files read:
``vllm/v1/engine/async_llm.py``: ``AsyncLLM.from_engine_args``, ``generate(prompt,
sampling_params, request_id)`` (an async generator of ``RequestOutput``; cancelling its
consumer aborts the request in the engine), ``get_tokenizer``, ``model_config``,
``shutdown``; ``vllm/engine/arg_utils.py``: ``AsyncEngineArgs``;
``vllm/sampling_params.py``: ``RequestOutputKind.FINAL_ONLY``). Everything else is
:class:`VLLMBackend`'s: the same token prompts, the same ``SamplingParams`` per request
(its own ``seed``, ``logprobs=0``, grammars), the same mapping of outputs onto
:class:`~mfs_core.types.Continuation` and the same errors. Two differences:

* ``output_kind=FINAL_ONLY``: vLLM hands back each request once, finished (``LLM.generate``
  sets the same, ``vllm/entrypoints/common/offline.py``), instead of a cumulative output per
  engine step.
* ``disable_log_stats=True`` unless ``vllm_kwargs`` says otherwise (``vllm.LLM``'s default;
  ``AsyncEngineArgs`` would log throughput every few seconds).

And one thing kept the same on purpose: the engine is built with ``vllm.LLM``'s
``UsageContext.LLM_CLASS``, whose scheduler budget (``EngineArgs.get_batch_defaults``; on
the CPU build 4,096 batched tokens and 256 sequences per engine step) is what the lockstep
backend gets, so the two designs differ only in how requests reach the scheduler.

Seeds: vLLM gives a request with a ``seed`` its own generator (``SamplingType.RANDOM_SEED``;
a request with ``n > 1`` fans out into children seeded from it, in both engines the same
way), so a request's samples do not depend on which other requests share its batch, in
either design. What a batch can change is the arithmetic: the logits of one sequence may
differ in the last bits with the batch's shape, which can flip a sample that sits on a
boundary. ``tests/vllm/test_vllm_continuous.py`` checks that seeded decodes on the demo model
(float32) give the same texts under both designs, alone and concurrently.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from typing import Any

from mfs_core.backends import _hf
from mfs_core.backends._loop import EventLoopThread
from mfs_core.backends.vllm import VLLMBackend, _continuations, _import_vllm, _on_cpu, engine_kwargs
from mfs_core.backends.vllm_processes import _child_processes, _stop_processes
from mfs_core.backends.vllm_threads import bind_cpu_threads
from mfs_core.errors import BackendOutputError
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["AsyncVLLMBackend"]

logger = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 30.0
"""Most seconds :meth:`AsyncVLLMBackend.close` waits for ``AsyncLLM.shutdown`` before stopping the processes by PID."""


class AsyncVLLMBackend(VLLMBackend):
    """Sample with vLLM's ``AsyncLLM``: every request its own ``AsyncLLM.generate``, awaited on :attr:`loop`.

    Args:
        llm: an ``AsyncLLM`` started on ``thread``'s loop (or an object with its ``generate``
            async generator, ``get_tokenizer``, ``model_config`` and ``shutdown``).
        model_name: name reported in results.
        thread: the event loop ``llm`` runs on (closed with the backend).
        sampling_params_cls, structured_outputs_cls, num_parameters: as :class:`VLLMBackend`.

    Implements :class:`mfs_core.backends.base.AsyncBackend` (and so
    :class:`~mfs_core.backends.base.Backend`).
    """

    def __init__(
        self, llm: Any, model_name: str, *, thread: EventLoopThread, sampling_params_cls: Any = None,
        num_parameters: int | None = None, structured_outputs_cls: Any = None,
    ) -> None:
        super().__init__(llm, model_name, sampling_params_cls=sampling_params_cls, num_parameters=num_parameters,
                         structured_outputs_cls=structured_outputs_cls)
        self._thread = thread
        self._ids = itertools.count()
        self._final_only: Any = None

    @classmethod
    def from_settings(cls, settings: MFSSettings) -> AsyncVLLMBackend:
        """Start an ``AsyncLLM`` with :func:`~mfs_core.backends.vllm.engine_kwargs` of ``settings``.

        The engine is built on the backend's own event loop, so its output handler (a task
        of the loop it starts on) runs there.
        On vLLM's CPU build, :func:`~mfs_core.backends.vllm_threads.bind_cpu_threads` first
        binds the worker to every CPU of a machine of at most 2 (as :class:`VLLMBackend` does).

        Raises:
            ImportError: vllm is not installed (see :class:`VLLMBackend`).
            ValueError: a refused ``vllm_kwargs`` entry.
        """
        vllm = _import_vllm()
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        cpu = _on_cpu()
        kwargs = engine_kwargs(settings, cpu=cpu)
        kwargs.setdefault("disable_log_stats", True)
        if cpu:
            bind_cpu_threads()  # both CPUs of a 2-CPU machine for the model (vllm_threads)
        before = _child_processes()
        thread = EventLoopThread("mfs-vllm-async")

        async def start() -> Any:
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs), usage_context=UsageContext.LLM_CLASS)

        try:
            llm = thread.run(start())
        except BaseException:
            _stop_processes([proc for proc in _child_processes() if proc.pid not in {b.pid for b in before}])
            thread.stop()
            raise
        backend = cls(llm, settings.model, thread=thread, sampling_params_cls=vllm.SamplingParams,
                      num_parameters=settings.num_parameters)
        backend._processes = [proc for proc in _child_processes() if proc.pid not in {b.pid for b in before}]
        return backend

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop ``AsyncLLM`` runs on; :meth:`agenerate` must be awaited there."""
        return self._thread.loop

    def close(self) -> None:
        """Shut ``AsyncLLM`` down, stop its loop and its processes (idempotent).

        ``AsyncLLM.shutdown`` runs on the loop (at most :data:`SHUTDOWN_SECONDS`); requests
        still awaited there fail. The processes that appeared while :meth:`from_settings`
        started the engine are then stopped by PID, as :meth:`VLLMBackend.close` does. A
        closed backend refuses :meth:`generate` and :meth:`agenerate`.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True

        async def shutdown() -> None:
            self.llm.shutdown()
            # AsyncLLM.__del__ shuts down again when the object is collected, at interpreter exit after
            # vLLM's module globals are gone ("TypeError: 'NoneType' object is not callable"): once is enough.
            self.llm.shutdown = _shut_down

        try:
            if self._thread.alive:
                self._thread.run(shutdown(), timeout=SHUTDOWN_SECONDS)
        except Exception:  # a shutdown that fails or hangs: the processes are stopped by PID below
            logger.warning("AsyncLLM.shutdown failed; stopping vLLM's processes by PID", exc_info=True)
        finally:
            self._thread.stop()
            _stop_processes(self._processes)

    def sampling_params(self, request: GenerationRequest, max_tokens: int) -> Any:
        """:meth:`VLLMBackend.sampling_params` with ``output_kind=FINAL_ONLY`` (one output per request, finished)."""
        params = super().sampling_params(request, max_tokens)
        if self._final_only is None:
            from vllm.sampling_params import RequestOutputKind

            self._final_only = RequestOutputKind.FINAL_ONLY
        params.output_kind = self._final_only
        return params

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """:meth:`agenerate` run on :attr:`loop` from another thread (the lockstep engine's call).

        Raises:
            RuntimeError: called on :attr:`loop`'s own thread.
            BackendDeadError: the backend was closed or its engine core died.
            As :meth:`agenerate`.
        """
        self.check_alive()
        return self._thread.run(self.agenerate(requests))

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Sample ``requests``, each an ``AsyncLLM.generate`` request of its own; await on :attr:`loop`.

        The requests are added in :func:`~mfs_core.backends._hf.prefix_order` (as
        :meth:`VLLMBackend.generate` sends them) and sampled alongside whatever other
        requests the engine holds. Cancelling the awaiting task aborts the ones not finished.

        Returns:
            One list of ``request.n`` continuations per request, in order.

        Raises:
            ContextWindowError, BackendOutputError, BackendDeadError (closed, or the engine core died
                before or during the call), ImportError: as :meth:`VLLMBackend.generate`.
        """
        prompts, params = self._prepare(requests)
        if not requests:
            return []
        order = _hf.prefix_order([prompt["prompt_token_ids"] for prompt in prompts])
        tasks = {i: asyncio.ensure_future(self._final(prompts[i], params[i])) for i in order}  # added in this order
        try:
            finals = await asyncio.gather(*(tasks[i] for i in range(len(requests))))
        except BaseException as exc:
            for task in tasks.values():
                task.cancel()
            if isinstance(exc, Exception):
                self._raise_if_dead(exc)  # EngineDeadError: every request awaited fails at once
            raise
        return [
            _continuations(i, request, output, len(prompt["prompt_token_ids"]))
            for i, (request, output, prompt) in enumerate(zip(requests, finals, prompts))
        ]

    async def _final(self, prompt: dict[str, Any], params: Any) -> Any:
        """The finished ``RequestOutput`` of one request.

        Raises:
            BackendOutputError: vLLM ended the request without a finished output.
        """
        request_id = f"mfs-{next(self._ids)}"
        final = None
        async for output in self.llm.generate(prompt, params, request_id):
            final = output
        if final is None or not final.finished:
            msg = f"vLLM ended request {request_id} without a finished output"
            raise BackendOutputError(msg)
        return final


def _shut_down(timeout: float | None = None) -> None:
    """``AsyncLLM.shutdown`` of an engine already shut down: nothing to do."""
