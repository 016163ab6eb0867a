"""Model backends behind one protocol (:class:`mfs_core.backends.base.Backend`).

Heavy libraries (torch, transformers, vllm, httpx) are imported only inside the module of
the backend that needs them; :func:`create_backend` picks one from settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mfs_core.backends.base import Backend

if TYPE_CHECKING:
    from mfs_core.settings import MFSSettings

__all__ = ["Backend", "create_backend"]


def create_backend(settings: MFSSettings) -> Backend:
    """Build the backend ``settings.backend`` names, loading its model.

    ``backend="vllm"`` gives ``vllm.LLM`` (:class:`~mfs_core.backends.vllm.VLLMBackend`) under
    ``scheduling="lockstep"``, vLLM's ``AsyncLLM``
    (:class:`~mfs_core.backends.vllm_async.AsyncVLLMBackend`) under ``scheduling="continuous"``.

    Raises:
        ImportError: the backend's optional dependencies are missing (the message says
            which ``pip install "mfs-decoding[...]"`` adds them).
        FileNotFoundError / OSError: the model cannot be found locally.
    """
    if settings.backend == "transformers":
        from mfs_core.backends.transformers import TransformersBackend

        return TransformersBackend.from_settings(settings)
    if settings.backend == "vllm" and settings.scheduler == "continuous":
        from mfs_core.backends.vllm_async import AsyncVLLMBackend

        return AsyncVLLMBackend.from_settings(settings)
    if settings.backend == "vllm":
        from mfs_core.backends.vllm import VLLMBackend

        return VLLMBackend.from_settings(settings)
    if settings.backend == "openai":
        from mfs_core.backends.openai import OpenAIBackend

        return OpenAIBackend.from_settings(settings)
    msg = f"unknown backend {settings.backend!r}; expected 'transformers', 'vllm' or 'openai'"
    raise ValueError(msg)
