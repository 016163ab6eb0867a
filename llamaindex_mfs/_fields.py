"""The fields of :class:`~llamaindex_mfs.MFSLLM`: the adapter's own and every ``MFSSettings`` field.

Each :class:`~mfs_core.settings.MFSSettings` field is derived from the settings
(:func:`mfs_core.call.settings_fields`: same name and type, nothing copied by hand) as an
optional ``Field(description=...)`` (LlamaIndex's convention) whose description is the
setting's plus where a None takes its value from. How they are resolved and used is
:class:`~llamaindex_mfs.MFSLLM`'s.
"""

from __future__ import annotations

from typing import Optional

from llama_index.core.bridge.pydantic import Field, create_model
from llama_index.core.llms.function_calling import FunctionCallingLLM

from mfs_core.call import settings_fields
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings

__all__ = ["SETTING_NAMES", "MFSFields"]

SETTING_NAMES: tuple[str, ...] = tuple(MFSSettings.model_fields)
"""Names of the :class:`MFSSettings` fields, each also a field of :class:`~llamaindex_mfs.MFSLLM`."""


class _AdapterFields(FunctionCallingLLM):
    """The adapter's own fields of :class:`~llamaindex_mfs.MFSLLM`: ``engine``, ``method``, ``timeout``."""

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


MFSFields = create_model(
    "MFSFields",
    __base__=_AdapterFields,
    __module__=__name__,
    __doc__="""The declared fields of :class:`~llamaindex_mfs.MFSLLM` (``engine``, ``method``,
    ``timeout``, then every :class:`MFSSettings` field, derived from the settings with None
    meaning "not set here", :func:`mfs_core.call.settings_fields`); declarations only.""",
    **settings_fields(
        optional=True,
        notes={"api_key": "Excluded from to_dict/to_json (and so from the callbacks' and events' copies)."},
        overrides={"api_key": {"exclude": True}},
    ),
)
