"""LangChain integration of Martingale Foresight Sampling.

Swap one object to give a chain or an agent foresight-guided reasoning::

    from langchain_mfs import ChatMFS, MFSLLM, MFSReasoningTool

- :class:`MFSLLM`: a ``BaseLLM`` (``prompt | MFSLLM() | StrOutputParser()``);
- :class:`ChatMFS`: a ``BaseChatModel``;
- :class:`MFSReasoningTool`: a tool that lets an agent driven by any chat model delegate a
  hard reasoning step to MFS.

All decoding is :class:`mfs_core.MFSEngine`'s; instances with the same backend settings
share one loaded model. See ``docs/langchain.md``.
"""

from langchain_mfs.chat_models import ChatMFS
from langchain_mfs.llms import MFSLLM
from langchain_mfs.tools import MFSReasoningInput, MFSReasoningTool

__all__ = ["MFSLLM", "ChatMFS", "MFSReasoningInput", "MFSReasoningTool"]
