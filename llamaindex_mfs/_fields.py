"""The fields of :class:`~llamaindex_mfs.MFSLLM`: the adapter's own and every ``MFSSettings`` field.

Each :class:`~mfs_core.settings.MFSSettings` field is mirrored as an optional
``Field(description=...)`` (LlamaIndex's convention) whose description is the setting's plus
where a None takes its value from. How they are resolved and used is
:class:`~llamaindex_mfs.MFSLLM`'s.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from llama_index.core.bridge.pydantic import Field, SecretStr
from llama_index.core.llms.function_calling import FunctionCallingLLM

from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings

__all__ = ["SETTING_NAMES", "MFSFields"]

SETTING_NAMES: tuple[str, ...] = tuple(MFSSettings.model_fields)
"""Names of the :class:`MFSSettings` fields, each also a field of :class:`~llamaindex_mfs.MFSLLM`."""


def _setting(name: str) -> Any:
    """A ``Field`` mirroring ``MFSSettings.<name>``: None means "not set here"."""
    field = MFSSettings.model_fields[name]
    return Field(
        default=None,
        description=(
            f"{field.description} None: the injected engine's value, else MFS_{name.upper()} "
            f"or the MFSSettings default ({field.default!r})."
        ),
    )



class MFSFields(FunctionCallingLLM):
    """The declared fields of :class:`~llamaindex_mfs.MFSLLM` (``engine``, ``method``,
    ``timeout``, then every :class:`MFSSettings` field, None meaning "not set here");
    declarations only."""

    engine: Optional[MFSEngine] = Field(
        default=None,
        exclude=True,
        repr=False,
        description="Engine to decode with (e.g. shared with a langchain_mfs model); None builds "
        "one with MFSEngine.from_settings, sharing the loaded model of equal backend settings.",
    )
    method: str = Field(default="mfs", description="Registered decoder that answers (mfs_core.decoders.DECODERS).")
    timeout: Optional[float] = Field(
        default=None,
        gt=0,
        description="Most seconds a call waits for its decode (None: no limit); on timeout the call raises "
        "TimeoutError and abandons the decode (as a cancelled async call or a stream closed early does): the engine "
        "drops it at its next round boundary, so retries never pile work onto it. As langchain_mfs's timeout.",
    )

    # --- mirrored MFSSettings fields (None: not set here) ------------------------------
    model: Optional[str] = _setting("model")
    backend: Optional[Literal["transformers", "vllm", "openai"]] = _setting("backend")
    device: Optional[str] = _setting("device")
    dtype: Optional[Literal["auto", "float32", "float16", "bfloat16"]] = _setting("dtype")
    seed: Optional[int] = _setting("seed")
    batch_size: Optional[int] = _setting("batch_size")
    base_urls: Optional[list[str]] = _setting("base_urls")
    api_key: Optional[SecretStr] = Field(
        default=None,
        exclude=True,
        description=f"{MFSSettings.model_fields['api_key'].description} None: the injected engine's value, else "
        "MFS_API_KEY. Excluded from to_dict/to_json (and so from the callbacks' and events' copies).",
    )
    request_timeout: Optional[float] = _setting("request_timeout")
    max_retries: Optional[int] = _setting("max_retries")
    server_n: Optional[Literal["auto", "yes", "no"]] = _setting("server_n")
    tokenizer: Optional[str] = _setting("tokenizer")
    num_parameters: Optional[int] = _setting("num_parameters")
    tensor_parallel_size: Optional[int] = _setting("tensor_parallel_size")
    gpu_memory_utilization: Optional[float] = _setting("gpu_memory_utilization")
    kv_cache_gib: Optional[float] = _setting("kv_cache_gib")
    max_model_len: Optional[int] = _setting("max_model_len")
    enable_prefix_caching: Optional[bool] = _setting("enable_prefix_caching")
    vllm_kwargs: Optional[dict[str, Any]] = _setting("vllm_kwargs")
    prompt_format: Optional[Literal["auto", "chat", "raw"]] = _setting("prompt_format")
    assistant_prefix: Optional[str] = _setting("assistant_prefix")
    system_prompt: Optional[str] = _setting("system_prompt")
    step_delimiter: Optional[str] = _setting("step_delimiter")
    end_marker: Optional[str] = _setting("end_marker")
    tool_call_parser: Optional[Literal["auto", "hermes", "llama3_json", "mistral"]] = _setting("tool_call_parser")
    constrain_tool_names: Optional[bool] = _setting("constrain_tool_names")
    constrain_actions: Optional[bool] = _setting("constrain_actions")
    answer_trigger: Optional[str] = _setting("answer_trigger")
    answer_trigger_tokens: Optional[int] = _setting("answer_trigger_tokens")
    max_step_tokens: Optional[int] = _setting("max_step_tokens")
    max_answer_tokens: Optional[int] = _setting("max_answer_tokens")
    step_beam_size: Optional[int] = _setting("step_beam_size")
    num_rollouts: Optional[int] = _setting("num_rollouts")
    foresight_rollouts: Optional[int] = _setting("foresight_rollouts")
    share_foresight: Optional[bool] = _setting("share_foresight")
    reuse_rollouts: Optional[bool] = _setting("reuse_rollouts")
    prune_lambda: Optional[float] = _setting("prune_lambda")
    temperature: Optional[float] = _setting("temperature")
    rollout_temperature: Optional[float] = _setting("rollout_temperature")
    top_p: Optional[float] = _setting("top_p")
    stop_epsilon: Optional[float] = _setting("stop_epsilon")
    max_steps: Optional[int] = _setting("max_steps")
    min_steps: Optional[int] = _setting("min_steps")
    selection_temperature: Optional[float] = _setting("selection_temperature")
    selection: Optional[Literal["sample", "top_k"]] = _setting("selection")
    baseline: Optional[Literal["parent_foresight", "parent_step"]] = _setting("baseline")
    aggregation: Optional[Literal["majority", "best_quality"]] = _setting("aggregation")
    max_finished_fraction: Optional[float] = _setting("max_finished_fraction")
    width_pruning: Optional[bool] = _setting("width_pruning")
    early_stopping: Optional[bool] = _setting("early_stopping")
    convergence_finish: Optional[Literal["parent_beams", "converged_rollouts"]] = _setting("convergence_finish")
    generate_timeout: Optional[float] = _setting("generate_timeout")
