"""Stop a benchmark run gracefully: SIGTERM finishes the questions in flight and starts no more.

A search on a CPU can take half an hour per question with 16 in flight, so killing a run
throws away up to 16 half-finished searches. Under :func:`drain_on_sigterm`, the first
SIGTERM (``kill PID``, sent to the Python process alone, not its group, so vLLM's engine
process keeps serving) sets a :class:`threading.Event` that :func:`~mfs_core.bench.runner.run_bench`
checks before it starts a question: the questions in flight finish and are recorded, the
run returns, and a rerun resumes from the records. A second SIGTERM exits at once
(``SystemExit``, so ``finally`` blocks still close the engine). Ctrl-C is left alone: a
terminal sends SIGINT to the whole process group, vLLM's engine process included, so it
cannot drain; it aborts as before. This mirrors how servers (uvicorn, gunicorn) treat
SIGTERM: stop accepting, finish what is running.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["drain_on_sigterm"]

logger = logging.getLogger(__name__)


@contextmanager
def drain_on_sigterm(stop: threading.Event | None = None) -> Iterator[threading.Event]:
    """Within the block, the first SIGTERM sets the yielded event; a second one exits.

    Signal handlers can only be installed from the main thread; elsewhere the event is
    yielded without a handler (it can still be set by the caller).

    Args:
        stop: the event to set (default: a new one).

    Yields:
        The event, for ``run_bench(stop=...)``.

    Raises:
        SystemExit: status 143 (128 + SIGTERM), on a second SIGTERM inside the block.
    """
    stop = stop if stop is not None else threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise SystemExit(128 + signum)
        stop.set()
        logger.warning("SIGTERM: starting no more questions; the ones in flight finish and are recorded "
                       "(a second SIGTERM exits now)")

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
