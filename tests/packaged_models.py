"""Shared by the test folders of packaged models (tests/smollm2, tests/qwen): an engine on the
model converted into a temporary cache, and a spy on the prompts the model receives."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["packaged_cache", "packaged_engine", "spy_prompts"]


@contextmanager
def packaged_engine(model: str, cache: Path, **settings: Any) -> Iterator[Any]:
    """An :class:`~mfs_core.MFSEngine` on the packaged ``model`` (transformers backend, CPU),
    converted into ``cache`` (its ``XDG_CACHE_HOME`` while it loads); closed on exit. ``settings``:
    more :class:`~mfs_core.MFSSettings` fields (``dtype``, ...)."""
    from mfs_core import MFSEngine, MFSSettings
    from mfs_core.backends.transformers import TransformersBackend

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    try:
        chosen = MFSSettings(model=model, device="cpu", **settings)
        engine = MFSEngine(TransformersBackend.from_settings(chosen), chosen)
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


def packaged_cache(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The ``XDG_CACHE_HOME`` a packaged model is converted into during a test session: the folder
    that ``MFS_TEST_CACHE`` names when it is set (a conversion there is kept for later sessions:
    7.1 GB and minutes for Qwen2.5-Coder-1.5B), else a new temporary folder of this session."""
    import os

    chosen = os.environ.get("MFS_TEST_CACHE")
    return Path(chosen) if chosen else tmp_path_factory.mktemp(name)
