"""The LangChain fields of :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS`.

Every :class:`~mfs_core.settings.MFSSettings` field, with the same default and a docstring
(LangChain's field convention), and the adapter's own ``method``, ``stop`` and ``timeout``.
How the fields are filled (keywords, ``MFS_*`` variables, an injected engine) and used is
:class:`~langchain_mfs._base.MFSParams`'s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from mfs_core.settings import MFSSettings

__all__ = ["SETTINGS_FIELDS", "MFSFields"]

SETTINGS_FIELDS: tuple[str, ...] = tuple(MFSSettings.model_fields)
"""Names of the :class:`MFSSettings` fields, each also a field of the LangChain classes."""

_DEFAULTS = {name: field.default for name, field in MFSSettings.model_fields.items()}


class MFSFields(BaseModel):
    """The fields: every :class:`MFSSettings` field (same name, type and default), then
    ``method``, ``stop`` and ``timeout``. Declarations only; :class:`~langchain_mfs._base.MFSParams`
    resolves and uses them."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), arbitrary_types_allowed=True)

    # --- model and backend -------------------------------------------------------------
    model: str = _DEFAULTS["model"]
    """Hugging Face model name or local path; ``"mfs-demo"`` (default) is the bundled demo model."""
    backend: Literal["transformers", "vllm", "openai"] = _DEFAULTS["backend"]
    """Backend that samples from the model (default ``"transformers"``)."""
    device: str = _DEFAULTS["device"]
    """Torch device of the transformers backend: ``"auto"`` (default; CUDA if present), ``"cpu"``, ``"cuda:1"``."""
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = _DEFAULTS["dtype"]
    """Weight dtype (default ``"auto"``: float32 on CPU, the checkpoint's on GPU)."""
    seed: int = _DEFAULTS["seed"]
    """Seed of every random choice of a decode (default 0): the same prompt and seed give the same answer."""
    batch_size: int = _DEFAULTS["batch_size"]
    """Most sequences in one forward pass of the transformers backend (default 256)."""

    # --- vLLM and OpenAI-compatible backends (see MFSSettings for ranges) ----------------
    base_urls: list[str] = _DEFAULTS["base_urls"]
    """``backend="openai"``: base URLs of the OpenAI-compatible servers (default []); a round's requests are spread across them."""
    api_key: SecretStr | None = _DEFAULTS["api_key"]
    """``backend="openai"``: bearer token sent to the servers (default None: none, or
    ``MFS_API_KEY``). A ``SecretStr``: kept out of repr, callbacks, the cache key and
    ``save()`` (``lc_secrets`` maps it to ``MFS_API_KEY``)."""
    request_timeout: float = _DEFAULTS["request_timeout"]
    """``backend="openai"``: seconds one HTTP attempt may wait (default 600)."""
    max_retries: int = _DEFAULTS["max_retries"]
    """``backend="openai"``: retries after a 429, 5xx, timeout or connection error (default 3)."""
    server_n: Literal["auto", "yes", "no"] = _DEFAULTS["server_n"]
    """``backend="openai"``: whether the servers return n samples per request (default "auto": detected
    once; "no" for llama.cpp's server and Ollama sends one request per sample)."""
    tokenizer: str | None = _DEFAULTS["tokenizer"]
    """Local tokenizer path or cached name (default None: the model's own)."""
    num_parameters: int | None = _DEFAULTS["num_parameters"]
    """Parameter count for the FLOPs estimate 6·n·P (default None: read from the model config)."""
    tensor_parallel_size: int = _DEFAULTS["tensor_parallel_size"]
    """``backend="vllm"``: GPUs the model is split across (default 1)."""
    gpu_memory_utilization: float = _DEFAULTS["gpu_memory_utilization"]
    """``backend="vllm"``: fraction of GPU memory vLLM may use (default 0.9)."""
    kv_cache_gib: float | None = _DEFAULTS["kv_cache_gib"]
    """``backend="vllm"``: KV cache in GiB (default None: 4 GiB on vLLM's CPU build, vLLM's sizing on a GPU)."""
    max_model_len: int | None = _DEFAULTS["max_model_len"]
    """Context window in tokens for vLLM, or overriding the server's (default None)."""
    enable_prefix_caching: bool = _DEFAULTS["enable_prefix_caching"]
    """``backend="vllm"``: reuse the KV cache of shared prompt prefixes (default True)."""
    vllm_kwargs: dict[str, Any] = _DEFAULTS["vllm_kwargs"]
    """``backend="vllm"``: further ``vllm.LLM`` keyword arguments (default {})."""

    # --- prompt format -----------------------------------------------------------------
    prompt_format: Literal["auto", "chat", "raw"] = _DEFAULTS["prompt_format"]
    """How an LLM prompt becomes the model prompt: ``"chat"`` wraps it as the user message of
    the chat template plus ``assistant_prefix``; ``"raw"`` uses it verbatim; ``"auto"``
    (default) is ``"chat"`` when the tokenizer has a template. Chat models always use the template."""
    assistant_prefix: str = _DEFAULTS["assistant_prefix"]
    """Text that opens the assistant's answer (default ``"The reasoning steps are:\\n\\n"``)."""
    system_prompt: str | None = _DEFAULTS["system_prompt"]
    """System message of ``"chat"``-format LLM prompts (default None: none)."""
    step_delimiter: str = _DEFAULTS["step_delimiter"]
    """Text that ends one reasoning step (default ``"\\n"``)."""
    end_marker: str = _DEFAULTS["end_marker"]
    """Text that closes an answer (default ``"<end_of_reasoning>"``; the model's EOS also does)."""
    tool_call_parser: Literal["auto", "hermes", "llama3_json", "mistral"] = _DEFAULTS["tool_call_parser"]
    """How tool calls are read from the chosen completion (default ``"auto"``: by the chat template)."""
    constrain_tool_names: bool = _DEFAULTS["constrain_tool_names"]
    """Keep the names of the calls the model writes to the bound tools (default True; the
    transformers backend honours it)."""
    constrain_actions: bool = _DEFAULTS["constrain_actions"]
    """Sample tool-call arguments and structured output under a grammar from their JSON schema
    (default True; every backend; needs xgrammar)."""
    answer_trigger: str | None = _DEFAULTS["answer_trigger"]
    """Appended to a completed path that states no answer, to read one (default None: off;
    e.g. ``"\\nThe answer is:"`` for a pretrained model that loops to the token cap)."""
    answer_trigger_tokens: int = _DEFAULTS["answer_trigger_tokens"]
    """Most tokens read after ``answer_trigger`` (default 32)."""
    max_step_tokens: int = _DEFAULTS["max_step_tokens"]
    """Most tokens of one reasoning step (default 64)."""
    max_answer_tokens: int = _DEFAULTS["max_answer_tokens"]
    """Most tokens of one foresight rollout or completion (default 256); ``max_tokens`` sets it.
    The returned path can be longer: up to ``max_steps`` steps plus one completion."""

    # --- MFS -----------------------------------------------------------------------------
    step_beam_size: int = _DEFAULTS["step_beam_size"]
    """M, beams kept between steps (default 8, the paper's)."""
    num_rollouts: int = _DEFAULTS["num_rollouts"]
    """N, candidate steps sampled per beam (default 8, the paper's)."""
    foresight_rollouts: int = _DEFAULTS["foresight_rollouts"]
    """Foresight rollouts per candidate that survives width pruning (default 1)."""
    share_foresight: bool = _DEFAULTS["share_foresight"]
    """Survivors with the same path text share one foresight estimate (default True; False:
    the paper's rollout per survivor)."""
    reuse_rollouts: bool = _DEFAULTS["reuse_rollouts"]
    """A candidate equal to the first step of its beam's rollout reuses the rest of it as a
    foresight rollout, at no new tokens (default False)."""
    prune_lambda: float = _DEFAULTS["prune_lambda"]
    """λ1 of the width-pruning threshold μ + λ1·σ in standard deviations (default 0.8; eq. 10-11)."""
    temperature: float = _DEFAULTS["temperature"]
    """Sampling temperature of steps and rollouts, > 0 (default 0.7). MFS samples; for
    reproducible output fix ``seed`` instead of lowering this."""
    rollout_temperature: float | None = _DEFAULTS["rollout_temperature"]
    """Sampling temperature of foresight rollouts and completions (default None: ``temperature``)."""
    top_p: float = _DEFAULTS["top_p"]
    """Nucleus sampling mass in (0, 1] (default 1.0)."""
    stop_epsilon: float = _DEFAULTS["stop_epsilon"]
    """ε_stop of the martingale convergence test max V <= ε_stop, nats (default 1e-6; eq. 12)."""
    max_steps: int = _DEFAULTS["max_steps"]
    """Most deliberation (foresight) steps (default 8)."""
    min_steps: int = _DEFAULTS["min_steps"]
    """Steps done before the convergence test may stop (default 1)."""
    selection_temperature: float = _DEFAULTS["selection_temperature"]
    """T of softmax(V / T) when beams are drawn (default 0.1)."""
    selection: Literal["sample", "top_k"] = _DEFAULTS["selection"]
    """``"sample"`` (default): draw M beams by softmax(V/T); ``"top_k"``: keep the best M."""
    baseline: Literal["parent_foresight", "parent_step"] = _DEFAULTS["baseline"]
    """Step-value baseline: the parent's foresight quality (default; eq. 8) or its step log-prob."""
    aggregation: Literal["majority", "best_quality"] = _DEFAULTS["aggregation"]
    """``"majority"`` (default): vote over extracted answers; ``"best_quality"``: the best path."""
    max_finished_fraction: float = _DEFAULTS["max_finished_fraction"]
    """Most finished candidates kept per step, as a fraction of M (default 0.6)."""
    width_pruning: bool = _DEFAULTS["width_pruning"]
    """Apply width pruning (default True)."""
    early_stopping: bool = _DEFAULTS["early_stopping"]
    """Apply the martingale convergence stop (default True)."""
    convergence_finish: Literal["parent_beams", "converged_rollouts"] = _DEFAULTS["convergence_finish"]
    """On convergence, finish from the parent beams (default) or from the converged step's beams."""
    generate_timeout: float | None = _DEFAULTS["generate_timeout"]
    """Most seconds one backend call of a decode may take (default None: no limit)."""

    # --- the adapter -------------------------------------------------------------------
    method: str = "mfs"
    """Registered decoder (default ``"mfs"``; baselines where installed)."""
    stop: list[str] | None = None
    """Stop sequences applied to every call, together with the call's own ``stop``: the
    returned text is cut before the first occurrence of any of them (default None)."""
    timeout: float | None = None
    """Most seconds a call waits for its decodes (default None: no limit). On timeout the
    call raises ``TimeoutError`` and abandons its decodes, as a cancelled async call or a
    stream closed early does: the engine drops them at its next round boundary (after the
    model call in flight), so ``with_retry`` / ``with_fallbacks`` never pile work onto it."""

