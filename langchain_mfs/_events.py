"""LangChain callbacks of a decode: its steps and stop as custom events (``mfs_step``, ``mfs_stop``).

A decode's :class:`~mfs_core.events.DecodeEvent` s reach the LLM run's callback handlers
through :class:`_EventSink`; :func:`stream_with_run` lets a chat model's ``_stream`` find
the run LangChain opened for it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManager,
    CallbackManager,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
)

from mfs_core.events import DecodeEvent, StepEvent

__all__ = ["STEP_EVENT", "STOP_EVENT", "astream_with_run", "stream_with_run"]

STEP_EVENT = "mfs_step"
"""Name of the custom callback event fired after each finished MFS step (data: ``StepEvent.to_dict()``)."""

STOP_EVENT = "mfs_stop"
"""Name of the custom callback event fired when the search stops (data: ``StopEvent.to_dict()``)."""


def _custom_event(event: DecodeEvent) -> tuple[str, dict[str, Any]]:
    """Name and data of the custom callback event for a decode event."""
    return (STEP_EVENT if isinstance(event, StepEvent) else STOP_EVENT), event.to_dict()


def _callback_manager(kind: type, run_manager: Any) -> Any:
    """A callback manager with the LLM run's handlers, tags and metadata (to fire custom
    events on that run, as ``dispatch_custom_event`` does inside a runnable)."""
    return kind(
        handlers=run_manager.handlers,
        inheritable_handlers=run_manager.inheritable_handlers,
        parent_run_id=run_manager.parent_run_id,
        tags=run_manager.tags,
        inheritable_tags=run_manager.inheritable_tags,
        metadata=run_manager.metadata,
        inheritable_metadata=run_manager.inheritable_metadata,
    )


_T = TypeVar("_T")
_END = object()

_STREAM_RUN: ContextVar[tuple[RunnableConfig, uuid.UUID] | None] = ContextVar("mfs_stream_run", default=None)
"""The config and run id of a chat model ``stream`` call while its ``_stream`` starts."""


class _EventSink:
    """Where a call's custom callback events (``mfs_step``, ``mfs_stop``) go.

    In order: the LLM run's ``run_manager`` when LangChain passes one (``BaseLLM.stream``,
    the v3 event stream); else the run that :func:`stream_with_run` opened (``BaseChatModel``
    calls ``_stream`` without its run manager); else ``dispatch_custom_event`` on the
    enclosing runnable's run (a chat model invoked inside a chain); else nowhere.
    """

    def __init__(self, run_manager: Any, *, is_async: bool) -> None:
        self.manager: Any = None
        self.run_id: uuid.UUID | None = None
        self.ambient = False
        call = _STREAM_RUN.get()
        if run_manager is not None:
            self.manager = _callback_manager(AsyncCallbackManager if is_async else CallbackManager, run_manager)
            self.run_id = run_manager.run_id
        elif call is not None:
            config, self.run_id = call
            configure = get_async_callback_manager_for_config if is_async else get_callback_manager_for_config
            self.manager = configure(config)
        else:
            self.ambient = True

    def fire(self, event: DecodeEvent) -> None:
        """Fire ``event`` as a custom event (sync handlers path)."""
        name, data = _custom_event(event)
        if self.manager is not None:
            self.manager.on_custom_event(name, data, run_id=self.run_id)
        elif self.ambient:
            try:
                dispatch_custom_event(name, data)
            except RuntimeError:  # not inside a run: nobody listens
                self.ambient = False

    async def afire(self, event: DecodeEvent) -> None:
        """Async :meth:`fire`."""
        name, data = _custom_event(event)
        if self.manager is not None:
            await self.manager.on_custom_event(name, data, run_id=self.run_id)
        elif self.ambient:
            try:
                await adispatch_custom_event(name, data)
            except RuntimeError:
                self.ambient = False


def stream_with_run(start: Callable[[RunnableConfig], Iterator[_T]], config: RunnableConfig | None) -> Iterator[_T]:
    """Run LangChain's ``stream`` with its run id chosen here, so ``_stream`` can fire
    custom events on that run (see :class:`_EventSink`).

    ``start(config)`` is the framework's ``stream``; the run (config, id) is visible to
    ``_stream`` only while the first chunk is produced, when ``_stream`` reads it.
    """
    config = ensure_config(config)
    run_id = config.get("run_id") or uuid.uuid4()
    inner = start({**config, "run_id": run_id})
    token = _STREAM_RUN.set((config, run_id))
    try:
        first = next(inner, _END)
    finally:
        _STREAM_RUN.reset(token)
    if first is _END:
        return
    yield first
    yield from inner


async def astream_with_run(
    start: Callable[[RunnableConfig], AsyncIterator[_T]], config: RunnableConfig | None
) -> AsyncIterator[_T]:
    """Async :func:`stream_with_run`."""
    config = ensure_config(config)
    run_id = config.get("run_id") or uuid.uuid4()
    inner = start({**config, "run_id": run_id})
    token = _STREAM_RUN.set((config, run_id))
    try:
        first = await anext(inner, _END)
    finally:
        _STREAM_RUN.reset(token)
    if first is _END:
        return
    yield first
    async for item in inner:
        yield item
