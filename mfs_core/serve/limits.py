"""What one request may ask for and how much work the server admits at once.

Two guards, both set by the operator (:class:`~mfs_core.serve.config.ServerSettings`):

* **per request**: the largest ``step_beam_size``, ``num_rollouts``, ``num_samples``, ``max_steps``
  and ``max_tokens`` a request may set (the server's own settings always pass), and ``max_n``;
  a request above one gets a 400 that names the limit (:func:`check_request`);
* **in total**: admission by work, not by count (:class:`Admission`): each decode counts its
  worst-case output tokens (:meth:`~mfs_core.decoders.DecoderSpec.worst_case_tokens`), and a
  request whose decodes would take the work in flight over ``work_budget`` (or the decodes over
  ``queue_size``) waits its turn with a 429 and a ``Retry-After`` estimated from the decodes
  seen; one that could never fit (alone over the budget or the queue) gets a 400, so clients
  that retry 429s do not retry it forever.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from mfs_core.decoders import decoder_spec
from mfs_core.serve.config import ServerSettings
from mfs_core.serve.schemas import RequestError, ServeCall
from mfs_core.settings import MFSSettings

__all__ = ["Admission", "RequestLimits", "check_request", "request_work"]

_LIMITED = (("step_beam_size", "limit_step_beam_size"), ("num_rollouts", "limit_num_rollouts"),
            ("num_samples", "limit_num_samples"), ("max_steps", "limit_max_steps"),
            ("max_answer_tokens", "limit_max_tokens"))
"""Each limited setting and the :class:`ServerSettings` field (and ``--flag``) that limits it."""


@dataclass(frozen=True)
class RequestLimits:
    """The largest value of each limited setting a request may ask for.

    Attributes:
        maxima: setting name -> its largest allowed value: the operator's limit, or the server's own
            setting where that is larger (a request that changes nothing always passes).
        flags: setting name -> the server flag that sets its limit (named in refusals).
    """

    maxima: dict[str, int]
    flags: dict[str, str]

    @classmethod
    def from_config(cls, config: ServerSettings, base: MFSSettings) -> RequestLimits:
        """The limits of ``config`` over the server's own settings ``base``."""
        maxima = {name: max(getattr(config, limit), getattr(base, name)) for name, limit in _LIMITED}
        flags = {name: "--" + limit.replace("_", "-") for name, limit in _LIMITED}
        return cls(maxima, flags)


def check_request(call: ServeCall, limits: RequestLimits) -> None:
    """Refuse a request whose settings ask for more than ``limits`` allow.

    Raises:
        RequestError: 400 naming the field, the value asked for and the limit
            (``max_answer_tokens`` is named ``max_tokens``, the OpenAI field that sets it).
    """
    for name, maximum in limits.maxima.items():
        value = getattr(call.settings, name)
        if value > maximum:
            shown = "max_tokens" if name == "max_answer_tokens" else name
            raise RequestError(400, f"{shown}={value} is more than this server allows; allowed: 1 <= {shown} <= "
                               f"{maximum} (the operator's {limits.flags[name]})", param=shown)


def request_work(call: ServeCall) -> tuple[int, int]:
    """``(decodes, worst-case output tokens)`` of ``call``: ``n`` decodes per prompt, each counted at
    :meth:`~mfs_core.decoders.DecoderSpec.worst_case_tokens` of its settings (tokens)."""
    decodes = call.n * max(1, len(call.prompts))
    return decodes, decodes * decoder_spec(call.method).worst_case_tokens(call.settings)


class Admission:
    """The decodes and the worst-case tokens in flight, against ``queue_size`` and the work budget.

    Changed on the server's event loop only (no lock). ``Retry-After`` is an estimate from
    the decodes seen: the mean wall time of the finished ones (an exponential mean), or, before
    any finished, twice the age of the oldest running one (it has run that long unfinished),
    between 1 and 600 seconds.

    Args:
        queue_size: most decodes at once.
        work_budget: most worst-case output tokens at once (tokens).
    """

    def __init__(self, queue_size: int, work_budget: int) -> None:
        self.queue_size = queue_size
        self.work_budget = work_budget
        self.decodes = 0
        self.work = 0
        self.mean_seconds: float | None = None
        self._started: list[float] = []  # start times of the requests in flight (monotonic seconds)

    def admit(self, decodes: int, work: int) -> float:
        """Reserve ``decodes`` decodes and ``work`` tokens; the start time to give back to :meth:`release`.

        Raises:
            RequestError: 400 when the request alone exceeds the queue or the budget (it could never be
                admitted); 429 with ``Retry-After`` when the decodes in flight leave no room now.
        """
        if decodes > self.queue_size or work > self.work_budget:
            what = (f"{decodes} decodes, more than queue_size={self.queue_size}" if decodes > self.queue_size else
                    f"up to {work:,} output tokens, more than the server's work budget of {self.work_budget:,}")
            raise RequestError(400, f"this request can never be admitted: it needs {what}; ask for fewer choices "
                               "(n), a smaller search (step_beam_size, num_rollouts, max_steps) or fewer max_tokens")
        if self.decodes + decodes > self.queue_size or self.work + work > self.work_budget:
            wait = self.retry_after()
            raise RequestError(
                429, f"the server is busy: {self.decodes} decodes and up to {self.work:,} tokens in flight, this "
                f"request needs {decodes} and {work:,} (queue_size {self.queue_size}, work budget "
                f"{self.work_budget:,}); retry after {wait} s", kind="rate_limit_error",
                headers={"Retry-After": str(wait)},
            )
        self.decodes += decodes
        self.work += work
        started = time.monotonic()
        self._started.append(started)
        return started

    def release(self, decodes: int, work: int) -> None:
        """Give back ``decodes`` decodes and ``work`` tokens (a decode that ended, or one never started)."""
        self.decodes -= decodes
        self.work -= work

    def finished(self, started: float) -> None:
        """The request started at ``started`` (:meth:`admit`) has no decode left in flight."""
        try:
            self._started.remove(started)
        except ValueError:
            pass

    def observe(self, seconds: float) -> None:
        """A decode finished after ``seconds`` of wall time (fed into the ``Retry-After`` estimate)."""
        self.mean_seconds = seconds if self.mean_seconds is None else 0.8 * self.mean_seconds + 0.2 * seconds

    def retry_after(self) -> int:
        """Seconds a refused client should wait, in [1, 600] (see the class docstring)."""
        if self.mean_seconds is not None:
            estimate = self.mean_seconds
        elif self._started:
            estimate = 2.0 * (time.monotonic() - min(self._started))
        else:
            estimate = 1.0
        return min(600, max(1, math.ceil(estimate)))
