"""LlamaIndex integration of MFS: :class:`MFSLLM`, a ``CustomLLM`` backed by ``mfs_core``.

Example::

    from llama_index.core import Settings
    from llamaindex_mfs import MFSLLM

    Settings.llm = MFSLLM(step_beam_size=4, num_rollouts=4)
"""

from llamaindex_mfs.base import MFSLLM

__all__ = ["MFSLLM"]
