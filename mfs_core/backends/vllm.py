"""The vLLM backend: ``vllm.LLM`` in-process, on one or more GPUs or on vLLM's CPU build.

Coded against vLLM **0.33.0** (commit ``4ba787ec9``; files read: ``vllm/entrypoints/llm.py``,
``vllm/sampling_params.py``, ``vllm/outputs.py``, ``vllm/v1/engine/detokenizer.py``,
``vllm/v1/engine/output_processor.py``, ``vllm/v1/engine/logprobs.py``,
``vllm/v1/core/sched/utils.py``, ``vllm/config/model.py``). The calls used are stable since
vLLM 0.10: ``LLM(model, ...)``, ``LLM.generate(prompts, sampling_params, use_tqdm=False)``,
``LLM.get_tokenizer()``, ``SamplingParams(n=..., ...)`` and the fields of ``RequestOutput`` /
``CompletionOutput`` read below.

One :meth:`VLLMBackend.generate` call is one ``LLM.generate`` call: every request of the
round, each as a tokenized prompt (``{"prompt_token_ids": [...]}``) with its own
``SamplingParams(n, temperature, top_p, max_tokens, stop, seed, logprobs=0)`` (a greedy
request: ``temperature=0`` and ``n=1``, its output repeated ``n`` times). vLLM's scheduler
batches them (continuous batching) and, with prefix caching on, shares the KV cache of the
prompt prefix that a question's beams, candidates and rollouts have in common. The requests
are sent in :func:`~mfs_core.backends._hf.prefix_order` (prompts sharing a prefix next to
each other, e.g. the same question from two callers); the results come back in request order.

Why each parameter is sent:

* ``max_tokens``: vLLM's default is 16 tokens; it is always sent (clamped, as the
  transformers backend does, to the context window left after the prompt).
* ``logprobs=0``: vLLM fills ``CompletionOutput.cumulative_logprob`` only when ``logprobs``
  is not None (``LogprobsProcessor.from_new_request``); 0 asks for no top-k alternatives,
  only the sampled token's log-prob. They are raw (``ModelConfig.logprobs_mode`` defaults to
  ``"raw_logprobs"``: before temperature and top-p), the quantity MFS_SPEC.md needs. An engine
  started with another ``logprobs_mode`` (through ``vllm_kwargs``) is refused. A request with
  ``top_logprobs = k > 0`` (DeepConf) is sent ``logprobs=k``; its top-k raw log-probs per token
  become ``Continuation.token_confidences`` (:func:`_token_confidences`).
* ``seed``: vLLM seeds a per-request generator (``SamplingType.RANDOM_SEED``), so a request's
  samples do not depend on the rest of the batch; MFS always sends one.
* Prompts are sent as token ids made with the rule of the transformers backend (special
  tokens only when the text lacks a leading BOS), so a chat template that writes its own BOS
  does not get a second one and both backends count the same prompt tokens.

Grammars (``GenerationRequest.grammar``, grammar-constrained actions,
:mod:`mfs_core.grammar`): a request whose grammar has a
:attr:`~mfs_core.types.RequestGrammar.remote` form gets
``structured_outputs=StructuredOutputsParams(structural_tag=remote)`` in its
``SamplingParams`` (vLLM >= 0.11, where ``StructuredOutputsParams`` replaced
``GuidedDecodingParams``; checked on 0.32.0): vLLM's xgrammar backend compiles the
structural tag (cached per tag) and runs one matcher per sample, from the first sampled
token. A request whose prompt ends inside an action's JSON value has no remote grammar
(``remote`` is None): it is sampled unconstrained, logged once per backend
(:func:`~mfs_core.backends.base.warn_unconstrained_grammar`). Requests without a grammar
get exactly the ``SamplingParams`` they got before.

**Log-probs under a grammar are not raw.** vLLM 0.32's model runner
(``GPUModelRunner.sample_tokens``, inherited by the CPU runner) applies the grammar's
token bitmask to the logits *in place* (``vllm/v1/structured_output/utils.py:
apply_grammar_bitmask``, ``xgr.apply_token_bitmask_inplace``: forbidden tokens get -inf)
*before* it calls the sampler, and the sampler's "raw" log-probs
(``Sampler.forward``: ``compute_logprobs(logits)`` under ``logprobs_mode="raw_logprobs"``)
are the log-softmax of those masked logits. So a constrained token's reported log-prob is
renormalised over the tokens the grammar allows: ``log p(t) - log sum_{allowed} p``, never
below the raw one, and 0 for a token the grammar forces (the fixed text of an action's
opening and closing). Every ``logprobs_mode`` (``raw_logits``, ``processed_*``) is computed
after the mask too, so vLLM has no option that reports pre-mask values for sampled tokens.
Outside an action (free text of a ``triggered_tags`` grammar) every token is allowed and
the log-probs are raw. The transformers backend reports raw log-probs under the same
grammar, so the two backends score constrained actions differently (vLLM's scores are
higher, by the log of the mass the grammar removed); free-text steps score the same.

Token accounting (identical to the transformers backend): vLLM 0.33 keeps in
``CompletionOutput.token_ids`` every sampled token, including the one that completes a stop
string (``BaseIncrementalDetokenizer.update`` cuts the text before the stop string but only
drops tokens sampled *after* the completing one, which happens only when one engine step
emits several tokens) and the EOS / stop-token-id token (excluded from the text, appended to
``token_ids``). ``cumulative_logprob`` sums the sampled-token log-probs of exactly those
tokens (``OutputProcessor._trim_surplus_tokens`` trims the log-probs with the tokens). So
``Continuation.num_tokens = len(token_ids)`` and ``logprob_sum = cumulative_logprob`` count
what :class:`~mfs_core.backends.transformers.TransformersBackend` counts.

Finish reasons: vLLM's ``"length"`` is ``"length"``; its ``"stop"`` with a string
``stop_reason`` is ``"stop"`` (that string); ``"stop"`` with ``stop_reason`` None (the EOS
token) or an int (a ``stop_token_ids`` entry, e.g. Llama-3's extra end-of-turn ids from
``generation_config.json``) is ``"eos"``. ``"abort"``, ``"error"`` and ``"repetition"`` raise
:class:`~mfs_core.errors.BackendOutputError` (a missing ``cumulative_logprob`` its
:class:`~mfs_core.errors.MissingLogprobsError`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from mfs_core.backends import _hf
from mfs_core.backends.base import warn_unconstrained_grammar, warn_unhonoured_choices
from mfs_core.backends.vllm_processes import (
    _child_processes, _stop_processes, engine_dead_reason, woken_on_engine_death,
)
from mfs_core.backends.vllm_threads import bind_cpu_threads
from mfs_core.errors import BackendDeadError, BackendOutputError, ContextWindowError, MissingLogprobsError
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["CPU_BLOCK_SIZE", "CPU_KV_CACHE_GIB", "VLLM_SOURCE_VERSION", "VLLMBackend", "cpu_has_bfloat16", "engine_kwargs"]

logger = logging.getLogger(__name__)

VLLM_SOURCE_VERSION = "0.33.0 (commit 4ba787ec9)"
"""The vLLM release whose source this adapter follows (also run in CI: vLLM's CPU build 0.32.0)."""

CPU_KV_CACHE_GIB = 4.0
"""KV cache of vLLM's CPU build when ``kv_cache_gib`` is None (GiB)."""

CPU_BLOCK_SIZE = 32
"""KV-cache block of vLLM's CPU build unless ``vllm_kwargs`` sets ``block_size`` (tokens).

vLLM's CPU platform defaults to 128-token blocks (``vllm/platforms/cpu.py``) and its prefix cache
reuses whole blocks only, so the part of a question plus a path that does not fill a block is
prefilled again in every MFS round. Measured on Qwen2.5-Coder-0.5B (docs/real_models.md,
"bfloat16 and the KV block on CPU"): MFS rounds' prefix-cache hit rate and wall time at 32 against 128."""

_BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_has_bfloat16(cpuinfo: str | None = None) -> bool:
    """Whether this x86-64 CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16).

    Reads the ``flags`` lines of ``/proc/cpuinfo`` (Linux; anywhere else, and on Arm, False:
    bfloat16 there was never measured). Where it is True, vLLM's CPU build runs ``dtype="auto"``
    in bfloat16 (:func:`engine_kwargs`).

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (None: read it).

    Returns:
        True when a ``flags`` line names ``avx512_bf16`` or ``amx_bf16``.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as handle:
                cpuinfo = handle.read()
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and _BF16_CPU_FLAGS & set(line.partition(":")[2].split()):
            return True
    return False


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        msg = (
            "the vllm backend needs the vllm package: on a CUDA GPU pip install \"mfs-decoding[vllm]\"; on a CPU "
            "(x86-64 with AVX-512, or Arm) vLLM's CPU build, see docs/backends.md ('vLLM on CPU'); or use "
            "backend='transformers', or backend='openai' with a `vllm serve` elsewhere"
        )
        raise ImportError(msg) from exc
    return vllm


def quiet_vllm(verbose: bool = False) -> None:
    """Send vLLM's logs to stderr, at WARNING unless ``verbose`` (for the ``mfs`` commands).

    vLLM configures its own logger from ``VLLM_LOGGING_STREAM`` (default stdout, which would
    mix its INFO lines into ``mfs ask`` output and ``--json``) and ``VLLM_LOGGING_LEVEL``
    when it is first imported, in this process and in its engine-core processes; this sets
    both unless the user has. A no-op once vLLM is imported.
    """
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "WARNING")


def _on_cpu() -> bool:
    """Whether the installed vLLM is its CPU build (``current_platform.is_cpu()``)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:  # pragma: no cover - every vLLM since 0.6 has it
        return False
    return bool(current_platform.is_cpu())


def engine_kwargs(settings: MFSSettings, *, cpu: bool = False, cpu_bfloat16: bool | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for ``settings``.

    ``model`` (``"mfs-demo"``: the bundled checkpoint), ``tokenizer`` (when set),
    ``tensor_parallel_size``, ``dtype``, ``gpu_memory_utilization``, ``max_model_len`` (when
    set), ``enable_prefix_caching``, ``seed`` (the engine's default seed; MFS gives every
    request its own), ``kv_cache_memory_bytes`` (``kv_cache_gib``), then
    ``settings.vllm_kwargs`` (which may not repeat these keys).

    On vLLM's CPU build (``cpu=True``):

    * ``dtype="auto"`` is sent as ``"bfloat16"`` where the CPU computes it natively
      (:func:`cpu_has_bfloat16`: AVX512-BF16 or AMX), else as ``"float32"`` (the transformers
      backend's CPU rule). Measured on Qwen2.5-Coder-0.5B (docs/real_models.md): bfloat16
      decodes faster at 1 and 32 rows at the same greedy GSM8K accuracy; its texts are not the
      float32 texts token for token, so a comparison with the transformers backend sets
      ``dtype="float32"`` (as the vLLM tests do).
    * ``block_size`` is :data:`CPU_BLOCK_SIZE` (32 tokens) unless ``vllm_kwargs`` sets it: the
      prefix cache reuses whole blocks, and 128-token blocks miss most of an MFS round's shared prefix.
    * ``kv_cache_memory_bytes`` is 4 GiB unless ``kv_cache_gib`` says otherwise: without it
      vLLM reserves ``gpu_memory_utilization`` (90%) of the machine's RAM.
    * ``enable_chunked_prefill=False``. vLLM 0.32's model runner rewinds a seeded request's
      ``torch.Generator`` (``set_offset``) when chunked prefill discards a partial prefill's
      sampled token, and CPU generators do not support offsets: ``RuntimeError: CPU Generator
      does not use offset`` kills the engine as soon as a round of seeded requests exceeds
      the batch token budget (``max_num_batched_tokens``, 4,096 tokens; one MFS round of 5
      questions does). MFS always seeds its requests. Lift this when vLLM's CPU runner stops
      rewinding CPU generators. ``vllm_kwargs={"enable_chunked_prefill": True}`` is refused
      there.

    Args:
        settings: the engine's settings.
        cpu: the installed vLLM is its CPU build.
        cpu_bfloat16: with ``cpu``, whether the CPU computes bfloat16 natively (None: ask
            :func:`cpu_has_bfloat16`).

    Returns:
        The keyword arguments (model path, not name, for ``"mfs-demo"``).

    Raises:
        ValueError: ``vllm_kwargs`` sets a ``logprobs_mode`` other than ``"raw_logprobs"``, or
            ``enable_chunked_prefill=True`` on CPU.
    """
    from mfs_core.models import resolve_model_path

    dtype = settings.dtype
    if cpu and dtype == "auto":
        dtype = "bfloat16" if (cpu_has_bfloat16() if cpu_bfloat16 is None else cpu_bfloat16) else "float32"
    kwargs: dict[str, Any] = {
        "model": resolve_model_path(settings.model),
        "tensor_parallel_size": settings.tensor_parallel_size,
        "dtype": dtype,
        "gpu_memory_utilization": settings.gpu_memory_utilization,
        "enable_prefix_caching": settings.enable_prefix_caching,
        "seed": settings.seed,
    }
    kv_cache_gib = settings.kv_cache_gib if settings.kv_cache_gib is not None else (CPU_KV_CACHE_GIB if cpu else None)
    if kv_cache_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
    if cpu:
        kwargs["enable_chunked_prefill"] = False
        kwargs["block_size"] = CPU_BLOCK_SIZE
    if settings.tokenizer:
        kwargs["tokenizer"] = resolve_model_path(settings.tokenizer)
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    if cpu and settings.vllm_kwargs.get("enable_chunked_prefill"):
        msg = ("vllm_kwargs sets enable_chunked_prefill=True, which vLLM's CPU build cannot run with seeded "
               "requests ('CPU Generator does not use offset'); leave it out on CPU")
        raise ValueError(msg)
    kwargs.update(settings.vllm_kwargs)
    mode = kwargs.get("logprobs_mode", "raw_logprobs")
    if mode != "raw_logprobs":
        msg = f"vllm_kwargs sets logprobs_mode={mode!r}; MFS needs raw log-probs ('raw_logprobs', vLLM's default)"
        raise ValueError(msg)
    return kwargs


class VLLMBackend:
    """Sample with ``vllm.LLM``: all requests of a round in one ``LLM.generate`` call.

    Args:
        llm: a ``vllm.LLM`` (or an object with its ``generate``, ``get_tokenizer`` and
            ``model_config.max_model_len``).
        model_name: name reported in results.
        sampling_params_cls: the ``SamplingParams`` class (default: ``vllm.SamplingParams``,
            imported on first use).
        structured_outputs_cls: the ``StructuredOutputsParams`` class of grammar requests
            (default: ``vllm.sampling_params.StructuredOutputsParams``, imported on first use).
        num_parameters: parameter count for the FLOPs estimate; None counts them from
            ``llm.model_config.hf_config`` on the meta device (0, with a warning, if that fails).

    Implements :class:`mfs_core.backends.base.Backend`; see the module docstring for how
    vLLM's outputs map onto :class:`~mfs_core.types.Continuation`.
    """

    def __init__(
        self, llm: Any, model_name: str, *, sampling_params_cls: Any = None, num_parameters: int | None = None,
        structured_outputs_cls: Any = None,
    ) -> None:
        self.llm = llm
        self.model_name = model_name
        self._sampling_params_cls = sampling_params_cls
        self._structured_outputs_cls = structured_outputs_cls
        self._tokenizer = llm.get_tokenizer()
        self._num_parameters = num_parameters
        self._lock = threading.Lock()
        self._closed = False
        self._dead: str | None = None
        self._processes: list[Any] = []  # psutil.Process of the engine's processes (from_settings)

    @classmethod
    def from_settings(cls, settings: MFSSettings) -> VLLMBackend:
        """Start a ``vllm.LLM`` with :func:`engine_kwargs` of ``settings``.

        On vLLM's CPU build, :func:`~mfs_core.backends.vllm_threads.bind_cpu_threads` first sets
        ``VLLM_CPU_OMP_THREADS_BIND`` to this process's CPUs when it is unset and there are at most 2.

        Raises:
            ImportError: vllm is not installed (``pip install "mfs-decoding[vllm]"`` on a CUDA GPU,
                vLLM's CPU build elsewhere: docs/backends.md).
            ValueError: a refused ``vllm_kwargs`` entry.
        """
        vllm = _import_vllm()
        cpu = _on_cpu()
        kwargs = engine_kwargs(settings, cpu=cpu)
        if cpu:
            bind_cpu_threads()  # both CPUs of a 2-CPU machine for the model (vllm_threads)
        before = _child_processes()
        llm = vllm.LLM(**kwargs)
        backend = cls(llm, settings.model, sampling_params_cls=vllm.SamplingParams,
                      num_parameters=settings.num_parameters)
        backend._processes = [proc for proc in _child_processes() if proc.pid not in {b.pid for b in before}]
        return backend

    def close(self) -> None:
        """Stop vLLM's engine-core and worker processes (idempotent).

        ``LLM`` has no public shutdown in vLLM 0.32-0.33; its ``llm_engine.engine_core``
        (the client of the engine-core process) has ``shutdown()``, which is what vLLM's
        own finalizer calls when the ``LLM`` is garbage-collected. On a loaded machine that
        shutdown can time out and force-kill the engine core, leaving its worker process
        orphaned and running; so the processes that appeared while :meth:`from_settings`
        started the engine are then stopped by PID (:func:`~mfs_core.backends.vllm_processes._stop_processes`: terminate, a
        bounded wait, kill). A closed backend refuses :meth:`generate`.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if shutdown is not None:
            shutdown()
        _stop_processes(self._processes)

    @property
    def dead_reason(self) -> str | None:
        """Why this backend can no longer serve (closed, or vLLM's engine core died:
        :func:`~mfs_core.backends.vllm_processes.engine_dead_reason`), one line; None while it can. Read by the engine before each
        submission and round, and by ``mfs serve``'s ``/health``."""
        if self._closed:
            return f"the vLLM backend of {self.model_name!r} is closed"
        if self._dead is None:
            self._dead = engine_dead_reason(self.llm)
        return self._dead

    def check_alive(self) -> None:
        """Raise at once when the backend cannot serve.

        Raises:
            BackendDeadError: :attr:`dead_reason` is set (a ``RuntimeError``).
        """
        reason = self.dead_reason
        if reason is not None:
            raise BackendDeadError(reason, self.model_name)

    def _raise_if_dead(self, exc: BaseException) -> None:
        """Raise :class:`BackendDeadError` from ``exc`` (a failed vLLM call) when the engine died under it.

        Raises:
            BackendDeadError: the engine core is gone (its flag, or vLLM's ``EngineDeadError``).
        """
        if self.dead_reason is None and type(exc).__name__ == "EngineDeadError":
            self._dead = f"vLLM's engine core died (EngineDeadError: {exc}); vLLM cannot restart it in this process"
        if self.dead_reason is not None:
            raise BackendDeadError(self.dead_reason, self.model_name) from exc

    def __enter__(self) -> VLLMBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- Backend protocol ------------------------------------------------------------------
    @property
    def context_window(self) -> int:
        """``max_model_len`` of the running engine (tokens, prompt + output)."""
        config = getattr(self.llm, "model_config", None) or self.llm.llm_engine.model_config
        return int(config.max_model_len)

    @property
    def num_parameters(self) -> int:
        """Parameters of the model: the ``num_parameters`` given, else counted once from the
        engine's Hugging Face config on the meta device; 0 (FLOPs reported as 0) if neither works."""
        with self._lock:
            if self._num_parameters is None:
                try:
                    config = getattr(self.llm, "model_config", None) or self.llm.llm_engine.model_config
                    if config.hf_config is None:
                        msg = "the engine has no Hugging Face config"
                        raise ValueError(msg)
                    self._num_parameters = _hf.count_parameters(config.hf_config)
                except Exception as exc:  # any failure leaves FLOPs unknown, never the decode
                    logger.warning("cannot count the parameters of %r (%s); FLOPs are reported as 0; "
                                   "set num_parameters to fix", self.model_name, exc, stacklevel=2)
                    self._num_parameters = 0
            return self._num_parameters

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the engine's tokenizer (no special tokens added)."""
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str | None:
        """The chat template of ``LLM.get_tokenizer()`` with the generation prompt (and ``tools``); None without one."""
        return _hf.render_chat(self._tokenizer, messages, tools)

    def sampling_params(self, request: GenerationRequest, max_tokens: int) -> Any:
        """The ``SamplingParams`` of one request (``max_tokens`` already clamped to the window).

        A ``greedy`` request is sent as ``temperature=0.0``, vLLM's greedy sampling (its
        ``top_p`` and ``seed`` are then unused, as in the transformers backend), with ``n=1``:
        vLLM refuses ``n > 1`` under greedy sampling, and the one continuation is repeated
        ``n`` times on the way back (the ``n`` identical ones the transformers backend returns).

        ``logprobs`` is ``request.top_logprobs`` (0 unless a decoder asks for top-k log-probs:
        the sampled token's log-prob only, which fills ``cumulative_logprob``).

        A request with a remote grammar (``request.grammar.remote``) also gets
        ``structured_outputs=StructuredOutputsParams(structural_tag=remote)``; its log-probs
        then come back renormalised over the tokens the grammar allows (module docstring).

        Raises:
            ImportError: a grammar request on a vLLM without ``StructuredOutputsParams`` (< 0.11).
        """
        cls = self._sampling_params_cls
        if cls is None:
            cls = self._sampling_params_cls = _import_vllm().SamplingParams
        extra: dict[str, Any] = {}
        if request.grammar is not None and request.grammar.remote is not None:
            extra["structured_outputs"] = self._structured_outputs()(structural_tag=request.grammar.remote)
        return cls(
            n=1 if request.greedy else request.n, temperature=0.0 if request.greedy else request.temperature,
            top_p=request.top_p,
            max_tokens=max_tokens, stop=list(request.stop), seed=request.seed, logprobs=request.top_logprobs, **extra,
        )

    def _structured_outputs(self) -> Any:
        """The ``StructuredOutputsParams`` class (imported on first use)."""
        if self._structured_outputs_cls is None:
            _import_vllm()
            try:
                from vllm.sampling_params import StructuredOutputsParams
            except ImportError:
                msg = ("constrain_actions on the vllm backend needs vLLM >= 0.11 (StructuredOutputsParams); "
                       "upgrade vLLM or set constrain_actions=False")
                raise ImportError(msg) from None
            self._structured_outputs_cls = StructuredOutputsParams
        return self._structured_outputs_cls

    def _prepare(self, requests: Sequence[GenerationRequest]) -> tuple[list[dict[str, Any]], list[Any]]:
        """The token prompts (``{"prompt_token_ids": [...]}``) and ``SamplingParams`` of ``requests``, in order.

        Raises:
            BackendDeadError: the backend was closed or its engine core died (a ``RuntimeError``).
            ContextWindowError: a prompt has as many tokens as ``max_model_len`` or more.
        """
        self.check_alive()
        warn_unhonoured_choices(self, requests, logger)
        warn_unconstrained_grammar(self, requests, logger)
        window = self.context_window if requests else 0
        prompts, params = [], []
        for i, request in enumerate(requests):
            ids = _hf.encode_prompt(self._tokenizer, request.prompt)
            if len(ids) >= window:
                msg = (
                    f"prompt {i} has {len(ids)} tokens, which does not fit the context window of "
                    f"{window} tokens of model {self.model_name!r}: {request.prompt[:60]!r}..."
                )
                raise ContextWindowError(msg)
            prompts.append({"prompt_token_ids": ids})
            params.append(self.sampling_params(request, min(request.max_tokens, window - len(ids))))
        return prompts, params

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Sample all ``requests`` in one ``LLM.generate`` call.

        Returns:
            One list of ``request.n`` continuations per request, in order (vLLM's
            ``CompletionOutput.index`` order).

        Raises:
            ContextWindowError: a prompt has as many tokens as ``max_model_len`` or more.
            BackendOutputError: vLLM returned an unfinished or aborted output, or a different number
                of outputs than asked; its :class:`~mfs_core.errors.MissingLogprobsError` when an
                output has no ``cumulative_logprob``.
            BackendDeadError: the backend was closed, or its engine core died before or during
                the call (a ``RuntimeError``; :attr:`dead_reason`).
            ImportError: a grammar request on a vLLM without ``StructuredOutputsParams`` (< 0.11).
        """
        prompts, params = self._prepare(requests)
        if not requests:
            return []
        # Prompts that share a prefix go to vLLM next to each other (see _hf.prefix_order);
        # LLM.generate returns its outputs in the order of its prompts.
        order = _hf.prefix_order([prompt["prompt_token_ids"] for prompt in prompts])
        try:
            with woken_on_engine_death(self.llm):  # vLLM's sync client would wait forever on a dead engine core
                sent = self.llm.generate([prompts[i] for i in order], [params[i] for i in order], use_tqdm=False)
        except Exception as exc:
            self._raise_if_dead(exc)
            raise
        if len(sent) != len(requests):
            msg = f"vLLM returned {len(sent)} request outputs for {len(requests)} prompts"
            raise BackendOutputError(msg)
        outputs: list[Any] = [None] * len(requests)
        for position, i in enumerate(order):
            outputs[i] = sent[position]
        return [
            _continuations(i, request, output, len(prompt["prompt_token_ids"]))
            for i, (request, output, prompt) in enumerate(zip(requests, outputs, prompts))
        ]


def _continuations(index: int, request: GenerationRequest, output: Any, prompt_len: int) -> list[Continuation]:
    """Map one ``RequestOutput`` onto ``request.n`` continuations."""
    completions = sorted(output.outputs, key=lambda c: c.index)
    sent = 1 if request.greedy else request.n
    if len(completions) != sent:
        msg = f"vLLM returned {len(completions)} outputs for request {index} with n={sent}"
        raise BackendOutputError(msg)
    prompt_tokens = len(output.prompt_token_ids) if output.prompt_token_ids is not None else prompt_len
    continuations = [_continuation(index, c, prompt_tokens, request.top_logprobs) for c in completions]
    return continuations * request.n if request.greedy else continuations


def _token_confidences(index: int, completion: Any, k: int) -> tuple[float, ...]:
    """DeepConf's confidence of each sampled token from ``CompletionOutput.logprobs`` (asked with ``logprobs=k``).

    vLLM returns per position a dict ``token id -> Logprob(logprob, rank)`` holding the sampled
    token (its vocabulary rank) and the ranks 1..k (``vllm/logprobs.py``
    ``append_logprobs_for_next_position``): k entries when the sampled token is among the top k,
    k + 1 when it is not. The entries of rank <= k are the top k, whose mean is the confidence
    (:func:`mfs_core.confidence.token_confidence`); the authors' ``compute_confidence``
    (``deepconf/utils.py:48``) averages all entries, the sampled one included.

    Raises:
        MissingLogprobsError: no log-probs, or not one entry per token.
    """
    from mfs_core.confidence import token_confidence

    entries = completion.logprobs
    if entries is None or len(entries) != len(completion.token_ids):
        got = "none" if entries is None else f"{len(entries)} positions"
        msg = (f"vLLM returned {got} of top-{k} log-probs for request {index} (output {completion.index}) with "
               f"{len(completion.token_ids)} tokens; SamplingParams(logprobs={k}) asks one entry per token")
        raise MissingLogprobsError(msg)
    confidences = []
    for entry in entries:
        top = sorted((lp.logprob for lp in entry.values() if lp.rank is not None and lp.rank <= k), reverse=True)
        confidences.append(token_confidence(top[:k]))
    return tuple(confidences)


def _continuation(index: int, completion: Any, prompt_tokens: int, top_logprobs: int = 0) -> Continuation:
    """Map one ``CompletionOutput`` (see the module docstring); with ``top_logprobs`` > 0 also its
    token confidences (:func:`_token_confidences`).

    Raises:
        MissingLogprobsError: no ``cumulative_logprob`` (or no top log-probs when asked).
        BackendOutputError: a finish reason other than ``"stop"`` or ``"length"``.
    """
    if completion.cumulative_logprob is None:
        msg = (
            f"vLLM returned no cumulative_logprob for request {index} (output {completion.index}); "
            "MFS scores steps by log-probabilities and vLLM fills them only when "
            "SamplingParams.logprobs is set (this backend sets logprobs=0: were the sampling "
            "params replaced?)"
        )
        raise MissingLogprobsError(msg)
    reason, stop = completion.finish_reason, completion.stop_reason
    if reason == "length":
        finish, stop_reason = "length", None
    elif reason == "stop" and isinstance(stop, str):
        finish, stop_reason = "stop", stop
    elif reason == "stop":  # EOS (None) or a stop_token_ids entry (int)
        finish, stop_reason = "eos", None
    else:
        msg = (f"vLLM finished request {index} (output {completion.index}) with finish_reason={reason!r}, "
               f"stop_reason={stop!r}")
        raise BackendOutputError(msg)
    return Continuation(
        text=completion.text, token_ids=tuple(int(t) for t in completion.token_ids),
        logprob_sum=float(completion.cumulative_logprob), finish_reason=finish, stop_reason=stop_reason,
        prompt_tokens=prompt_tokens,
        token_confidences=_token_confidences(index, completion, top_logprobs) if top_logprobs else (),
    )
