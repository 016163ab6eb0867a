"""A LlamaIndex instrumentation handler that records LLM events, for the LlamaIndex tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import llm as llm_events

__all__ = ["EventRecorder", "recording"]

LLM_EVENT_TYPES = tuple(
    getattr(llm_events, name) for name in dir(llm_events) if name.startswith("LLM") and name.endswith("Event")
)


class EventRecorder(BaseEventHandler):
    """An instrumentation handler that keeps every LLM event it is sent."""

    events: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        """Name of the handler."""
        return "EventRecorder"

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Keep ``event`` if it is one of ``llama_index.core.instrumentation.events.llm``."""
        if isinstance(event, LLM_EVENT_TYPES):
            self.events.append(event)

    def of_type(self, event_type: type) -> list[Any]:
        """The recorded events of ``event_type``, in order."""
        return [event for event in self.events if isinstance(event, event_type)]


@contextmanager
def recording() -> Iterator[EventRecorder]:
    """An :class:`EventRecorder` on the root dispatcher while the block runs."""
    dispatcher = get_dispatcher()
    handler = EventRecorder()
    dispatcher.add_event_handler(handler)
    try:
        yield handler
    finally:
        dispatcher.event_handlers.remove(handler)
