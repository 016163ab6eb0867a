"""LlamaIndex instrumentation events for the MFS search: one per finished step, one at the stop.

:class:`~llamaindex_mfs.MFSLLM` sends them through the instrumentation dispatcher
(``llama_index.core.instrumentation.get_dispatcher``) while a call streams, so any
``BaseEventHandler`` added to the root dispatcher sees the search as it runs:

.. code-block:: python

    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llamaindex_mfs.events import MFSStepEvent

    class Printer(BaseEventHandler):
        def handle(self, event, **kwargs):
            if isinstance(event, MFSStepEvent):
                print(event.summary)

    get_dispatcher().add_event_handler(Printer())
"""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation.events import BaseEvent

from mfs_core.events import DecodeEvent, StepEvent, step_summary, stop_summary

__all__ = ["MFSStepEvent", "MFSStopEvent", "to_instrumentation_event"]


class MFSStepEvent(BaseEvent):
    """A step of the MFS search has finished (``mfs_core.events.StepEvent``)."""

    step: int = Field(description="Step index t, from 0.")
    summary: str = Field(description="One line: candidates sampled, pruned, rolled out, beams, max V vs ε_stop, tokens.")
    data: dict[str, Any] = Field(
        description="mfs_core.events.StepEvent.to_dict(): counts, max_step_value and stop_epsilon (nats), "
        "output_tokens so far, committed reasoning, survivors with F and V (nats)."
    )

    @classmethod
    def class_name(cls) -> str:
        """Name of the event class."""
        return "MFSStepEvent"


class MFSStopEvent(BaseEvent):
    """The MFS search has stopped (``mfs_core.events.StopEvent``)."""

    summary: str = Field(description="One line: stop reason, steps, answer and its votes, tokens, seconds.")
    data: dict[str, Any] = Field(
        description="mfs_core.events.StopEvent.to_dict(): stop_reason, answer, vote_share, num_steps, tokens, seconds."
    )

    @classmethod
    def class_name(cls) -> str:
        """Name of the event class."""
        return "MFSStopEvent"


def to_instrumentation_event(event: DecodeEvent) -> MFSStepEvent | MFSStopEvent:
    """The instrumentation event for a decode event."""
    if isinstance(event, StepEvent):
        return MFSStepEvent(step=event.step.step, summary=step_summary(event), data=event.to_dict())
    return MFSStopEvent(summary=stop_summary(event), data=event.to_dict())
