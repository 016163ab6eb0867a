"""LockstepScheduler.close: an idle worker thread is gone when close returns.

`mfs ask` exited with 134 ("terminate called without an active exception") on about half of its runs
when the exit hook's close left the idle worker unwinding beside the interpreter's teardown.
"""

from __future__ import annotations

from scripted import ScriptedBackend, continuation

from mfs_core.engine.lockstep import LockstepScheduler
from tests.request_rounds import rounds


def test_close_returns_after_the_idle_worker_left() -> None:
    closed = []
    backend = ScriptedBackend(lambda request: [continuation("x", num_tokens=request.max_tokens)] * request.n)
    backend.close = lambda: closed.append(True)
    scheduler = LockstepScheduler(backend)
    [future] = scheduler.submit([rounds("q0", 2, 5)])
    assert future.result(10).output_tokens == 10
    worker = scheduler._worker
    assert worker is not None and worker.is_alive()  # idle, waiting up to 30 s for the next decode
    scheduler.close()
    assert not worker.is_alive() and closed == [True]
