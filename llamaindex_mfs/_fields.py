"""The fields of :class:`~llamaindex_mfs.MFSLLM`: the adapter's own, the flat settings and ``model_kwargs``.

The settings users turn often (:data:`mfs_core.call.ADAPTER_FIELDS`) are derived from
:class:`~mfs_core.settings.MFSSettings` (:func:`mfs_core.call.settings_fields`: same name and type,
nothing copied by hand) as optional ``Field(description=...)`` s (LlamaIndex's convention) whose
description is the setting's plus where a None takes its value from; every other setting goes in
``model_kwargs`` (as LlamaIndex's ``HuggingFaceLLM``'s). How they are resolved and used is
:class:`~llamaindex_mfs.MFSLLM`'s.
"""

from __future__ import annotations

from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field, create_model
from llama_index.core.llms.function_calling import FunctionCallingLLM

from mfs_core.call import ADAPTER_FIELDS, settings_fields
from mfs_core.engine import MFSEngine

__all__ = ["ADAPTER_FIELDS", "MFSFields"]


class _AdapterFields(FunctionCallingLLM):
    """The adapter's own fields of :class:`~llamaindex_mfs.MFSLLM`: ``engine``, ``method``, ``timeout``,
    ``model_kwargs``."""

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
    model_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Every other MFSSettings setting, by name ({'dtype': 'bfloat16', 'stop_epsilon': 0.05}): "
        "load-time ones (dtype, batch size, vLLM's engine, the prompt format) and the methods' parameters (epsilon, "
        "lambda, the baselines' knobs); validated with the flat fields. One not given takes the injected engine's "
        "value, else MFS_<NAME> or the MFSSettings default. As langchain_mfs's model_kwargs.",
    )


MFSFields = create_model(
    "MFSFields",
    __base__=_AdapterFields,
    __module__=__name__,
    __doc__="""The declared fields of :class:`~llamaindex_mfs.MFSLLM` (``engine``, ``method``,
    ``timeout``, ``model_kwargs``, then the flat settings, derived from :class:`MFSSettings` with
    None meaning "not set here", :func:`mfs_core.call.settings_fields`); declarations only.""",
    **settings_fields(
        optional=True,
        notes={"api_key": "Excluded from to_dict/to_json (and so from the callbacks' and events' copies)."},
        overrides={"api_key": {"exclude": True}},
    ),
)
