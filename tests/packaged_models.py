"""Shared by the test folders of packaged models (tests/smollm2, tests/qwen): an engine on the
model converted into a temporary cache, and a spy on the prompts the model receives."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["packaged_engine", "spy_prompts"]


@contextmanager
def packaged_engine(model: str, cache: Path) -> Iterator[Any]:
    """An :class:`~mfs_core.MFSEngine` on the packaged ``model`` (transformers backend, CPU),
    converted into ``cache`` (its ``XDG_CACHE_HOME`` while it loads); closed on exit."""
    from mfs_core import MFSEngine, MFSSettings
    from mfs_core.backends.transformers import TransformersBackend

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    try:
        settings = MFSSettings(model=model, device="cpu")
        engine = MFSEngine(TransformersBackend.from_settings(settings), settings)
    finally:
        monkeypatch.undo()
    try:
        yield engine
    finally:
        engine.close()


def spy_prompts(engine: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompt text of every generation request ``engine``'s model receives from now on, in order."""
    prompts: list[str] = []
    generate = engine.backend.generate

    def spy(requests: Any) -> Any:
        prompts.extend(request.prompt for request in requests)
        return generate(requests)

    monkeypatch.setattr(engine.backend, "generate", spy)
    return prompts
