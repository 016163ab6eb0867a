"""Which backend settings mean the same loaded model: :data:`BACKEND_FIELDS` and their comparison.

:class:`~mfs_core.settings.BackendSettings` (built from :class:`~mfs_core.settings.MFSSettings`'
fields of these names) takes its equality, hash and differences from :class:`BackendIdentity`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["BACKEND_FIELDS", "BackendIdentity", "resolve_device"]

BACKEND_FIELDS: tuple[str, ...] = (
    "backend", "model", "device", "dtype", "batch_size", "base_urls", "api_key", "request_timeout", "max_retries",
    "server_n", "replica_routing", "tokenizer", "num_parameters", "tensor_parallel_size", "gpu_memory_utilization", "kv_cache_gib",
    "max_model_len", "enable_prefix_caching", "vllm_kwargs", "scheduling",
)
"""The :class:`MFSSettings` fields that choose, load and reach the model (the rest choose how to decode)."""

class BackendIdentity(BaseModel):
    """Equality, hash and differences of :class:`BackendSettings` (its fields come from MFSSettings)."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    def _compared(self, name: str) -> Any:
        """Field ``name`` as it is compared: what it means for the model that gets loaded.

        ``device="auto"`` is resolved (to ``"cuda"`` when torch sees a GPU, else ``"cpu"``), so
        ``"auto"`` and the device it means share one model; the device counts only for
        ``backend='transformers'`` (the others never use it, and need no torch). ``scheduling="auto"`` is
        resolved as the settings resolve it. The API key enters only as a digest; lists and dicts as tuples and JSON.
        """
        value = getattr(self, name)
        if name == "device":
            return resolve_device(value) if self.backend == "transformers" else None
        if name == "api_key":
            secret = value.get_secret_value() if value is not None else None
            return hashlib.sha256(secret.encode()).hexdigest()[:16] if secret is not None else None
        if name == "base_urls":
            return tuple(value)
        if name == "vllm_kwargs":
            return json.dumps(value, sort_keys=True, default=repr)
        if name == "scheduling" and value == "auto":  # what "auto" means (MFSSettings.scheduler)
            return "continuous" if self.backend == "vllm" else "lockstep"
        return value

    def identity(self) -> tuple:
        """One hashable value per field (:meth:`_compared`), in :data:`BACKEND_FIELDS` order."""
        return tuple(self._compared(name) for name in BACKEND_FIELDS)

    def differences(self, other: BackendIdentity) -> list[str]:
        """Names of the fields whose compared values differ from ``other``'s, in field order.

        Equal values are not compared further (so equal settings never import torch to
        resolve ``device="auto"``).
        """
        return [
            name for name in BACKEND_FIELDS
            if getattr(self, name) != getattr(other, name) and self._compared(name) != other._compared(name)
        ]

    def shown(self, name: str) -> str:
        """Field ``name`` for a message: its repr, the API key masked as ``'**********'``."""
        value = getattr(self, name)
        return repr("**********") if name == "api_key" and value is not None else repr(value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BackendIdentity):
            return NotImplemented
        return not self.differences(other)

    def __hash__(self) -> int:
        return hash(self.identity())


def resolve_device(device: str) -> str:
    """``"auto"`` as the device it selects (imports torch only when asked and installed)."""
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
