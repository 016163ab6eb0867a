"""Fault injection around a scripted backend, for the reliability tests.

:class:`FaultyBackend` wraps the synthetic model of :mod:`tests.scripted` (whose
outputs depend only on the request, so a decode's result does not depend on what else is
in its batch) and lets a test break chosen ``generate`` calls or chosen requests: raise,
answer too few results or continuations, report NaN or infinite log-probs, hang, or kill
the worker thread.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence

from mfs_core import MFSEngine, MFSSettings
from mfs_core.types import Continuation, GenerationRequest
from tests.engine_decodes import QUESTIONS, SETTINGS, comparable
from tests.scripted import synthetic_model

__all__ = ["QUESTIONS", "SETTINGS", "FaultyBackend", "WorkerKilled", "comparable", "serial_results"]


class WorkerKilled(BaseException):  # noqa: N818 - it stands for a thread being killed
    """Escapes every ``except Exception``: stands in for the worker thread dying."""


def serial_results(questions: Sequence[str], settings: MFSSettings = SETTINGS) -> list[dict]:
    """Each question decoded alone on a fresh synthetic model: the answers to compare to."""
    return [comparable(MFSEngine(synthetic_model(), settings).decode([q])[0]) for q in questions]


class FaultyBackend:
    """The synthetic model with faults injected by ``fault(call_index, requests, outputs)``.

    Args:
        fault: called after the synthetic model answered call ``call_index`` (from 0) with
            ``outputs``; returns the outputs to hand back (possibly altered), or raises.
        before: called before the call is answered (e.g. to hang); optional.
        record: keep every call's requests in :attr:`calls` (off for memory tests; the
            call count is kept either way).

    Attributes:
        calls: the requests of every call, in order (faulty ones included).
    """

    def __init__(
        self,
        fault: Callable[[int, list[GenerationRequest], list[list[Continuation]]], object] | None = None,
        before: Callable[[int, list[GenerationRequest]], None] | None = None,
        *,
        record: bool = True,
    ) -> None:
        self._inner = synthetic_model()
        self._fault = fault
        self._before = before
        self._lock = threading.Lock()
        self.calls: list[list[GenerationRequest]] = []
        self.num_calls = 0
        self._record = record
        self.model_name = "faulty"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """The synthetic model's answer, passed through the fault."""
        requests = list(requests)
        with self._lock:
            index = self.num_calls
            self.num_calls += 1
            if self._record:
                self.calls.append(requests)
        if self._before is not None:
            self._before(index, requests)
        with self._lock:
            outputs = self._inner.generate(requests)
            self._inner.calls.clear()  # this wrapper records the calls itself
        return self._fault(index, requests, outputs) if self._fault is not None else outputs

    def prompts_after(self, call_index: int) -> list[str]:
        """Prompts of every request made after call ``call_index``."""
        return [r.prompt for call in self.calls[call_index + 1 :] for r in call]

    def count_tokens(self, text: str) -> int:
        """Whitespace tokens."""
        return self._inner.count_tokens(text)

    def apply_chat_template(self, messages):
        """The scripted template."""
        return self._inner.apply_chat_template(messages)

    @property
    def context_window(self) -> int:
        """4,096 tokens."""
        return self._inner.context_window

    @property
    def num_parameters(self) -> int:
        """1,000 parameters."""
        return self._inner.num_parameters


def with_logprob(cont: Continuation, value: float) -> Continuation:
    """``cont`` with ``logprob_sum`` replaced by ``value``."""
    return dataclasses.replace(cont, logprob_sum=value)
