"""A scripted backend that dies under its engine, as the vLLM backend reports a dead engine core.

:class:`DyingBackend` answers every request "3 + 4 = 7" and the boxed 7 until :meth:`DyingBackend.die` is
called; from then on every ``generate`` call raises what vLLM raises, and ``dead_reason`` says why (``REASON``
by default). It can also hold its calls until it dies, so a test can kill it with decodes in flight.
``SETTINGS`` is the small search the tests decode it with.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from mfs_core import MFSSettings
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation

__all__ = ["REASON", "SETTINGS", "DyingBackend"]

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)
REASON = "vLLM's engine core died (EngineCore_DP0 exited with signal 9)"


def _answer(request: GenerationRequest) -> list[Continuation]:
    return [continuation("3 + 4 = 7\nThe answer is: \\boxed{7}.<end_of_reasoning>", mean_logprob=-0.1)] * request.n


class DyingBackend(ScriptedBackend):
    """A scripted backend that can die (``dead_reason``, as the vLLM backend reports it) and can hold its calls.

    Attributes:
        attempts: ``generate`` calls made, failed ones included.
        entered: set once a held call has started.
    """

    def __init__(self, hold: bool = False) -> None:
        super().__init__(_answer)
        self.dead_reason: str | None = None
        self.closed = False
        self.attempts = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def die(self, reason: str = REASON) -> None:
        self.dead_reason = reason
        self.release.set()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        self.attempts += 1
        self.entered.set()
        self.release.wait(10)
        if self.dead_reason is not None:
            raise RuntimeError("EngineDeadError: EngineCore encountered an issue")  # what vLLM raises
        return super().generate(requests)

    def close(self) -> None:
        self.closed = True
