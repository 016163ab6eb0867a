"""Former home of :mod:`mfs_core.vllm_server` (a launcher of ``vllm serve`` replicas, not a backend).

Kept so that ``from mfs_core.backends.vllm_serve import VLLMServer`` keeps working.
"""

from mfs_core.vllm_server import VLLMServer, server_command

__all__ = ["VLLMServer", "server_command"]
