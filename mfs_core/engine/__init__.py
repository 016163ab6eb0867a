"""The decoding engine: one backend, many decoders decoded together.

One module per job:

* :mod:`~mfs_core.engine.core`: :class:`MFSEngine`, the public face (settings, the shared
  backend, the entry points that start decodes and wait for them);
* :mod:`~mfs_core.engine.lockstep`: lockstep scheduling (any backend; the default but on vLLM): each
  round the scheduler gathers the pending requests of every live decoder (many questions,
  many callers, sync or async), makes **one** ``backend.generate`` call, and hands each
  decoder its share (DESIGN.md, "Decoders are coroutines; the engine batches them");
* :mod:`~mfs_core.engine.continuous`: continuous scheduling (``backend="vllm"``, its default):
  each decoder runs as a task of its own on the backend's event loop and awaits its own
  requests from vLLM's ``AsyncLLM``, which batches them as they come;
* :mod:`~mfs_core.engine.scheduler`: what both share (the base scheduler, a decode's future,
  its event listener, the check of a backend's answer, the counters);
* :mod:`~mfs_core.engine.registry`: the backends shared by engines with the same backend
  settings, reference-counted (the backend closes with its last engine);
* :mod:`~mfs_core.engine.waiting`: waiting for decodes, with a timeout, and abandoning them
  when the caller stops waiting; every entry point uses it, the adapters' too.

A decoder that fails (bad input, a prompt over the context window) fails alone: its caller
gets the exception, every other decode in the round goes on.
"""

from __future__ import annotations

from mfs_core.engine.core import MFSEngine
from mfs_core.engine.scheduler import DecodeFuture, EngineStats, check_outputs, share_group

__all__ = ["DecodeFuture", "EngineStats", "MFSEngine", "check_outputs", "share_group"]
