"""The process-wide registry of shared backends, reference-counted by open engines.

Engines built from settings with the same backend fields (:meth:`MFSSettings.backend_key`,
``scheduling`` among them) share one scheduler, and so one loaded model. Each open
:class:`~mfs_core.engine.MFSEngine` counts itself in (:func:`count_in`) and out
(:func:`count_out`); the scheduler and its backend close with the last engine out, and the next
:func:`shared_scheduler` for those settings loads the model again. A dead backend (vLLM's engine core
exited, a fatal device error: ``Scheduler.dead_reason``) is dropped at the next
:func:`shared_scheduler` for its settings, which loads a fresh one; the engines that still hold the
dead one raise :class:`~mfs_core.errors.BackendDeadError` and close it with the last of them. Backends still open at
interpreter exit are closed by :func:`close_shared_at_exit`.
"""

from __future__ import annotations

import atexit
import logging
import threading

from mfs_core.backends import Backend, create_backend
from mfs_core.engine.continuous import ContinuousScheduler
from mfs_core.engine.lockstep import LockstepScheduler
from mfs_core.engine.scheduler import Scheduler
from mfs_core.settings import MFSSettings

__all__ = ["close_shared_at_exit", "count_in", "count_out", "make_scheduler", "shared_scheduler"]

logger = logging.getLogger(__name__)

SCHEDULERS: dict[tuple, Scheduler] = {}
"""The shared schedulers by :meth:`MFSSettings.backend_key`."""
LOCK = threading.RLock()
"""Guards :data:`SCHEDULERS` and every scheduler's ``engines`` count."""


def make_scheduler(backend: Backend, scheduling: str) -> Scheduler:
    """The scheduler of ``backend`` for ``MFSSettings.scheduling`` (``"lockstep"`` or ``"continuous"``).

    Raises:
        TypeError: ``"continuous"`` with a backend that is not an
            :class:`~mfs_core.backends.base.AsyncBackend`.
    """
    return ContinuousScheduler(backend) if scheduling == "continuous" else LockstepScheduler(backend)


def shared_scheduler(settings: MFSSettings) -> Scheduler:
    """The shared scheduler of ``settings``' backend; loads the backend (``create_backend``) when none is open
    or the open one is dead (``Scheduler.dead_reason``).

    Call it holding :data:`LOCK` until the new engine has counted itself in (:func:`count_in`),
    so that a close elsewhere cannot end the scheduler in between.

    Raises:
        OSError / ImportError: the model or the backend's dependencies are missing.
        TypeError: as :func:`make_scheduler`.
    """
    key = settings.backend_key()
    with LOCK:
        scheduler = SCHEDULERS.get(key)
        if scheduler is not None and scheduler.dead_reason is not None:
            # its engines still hold it (and close it with the last of them); new ones get a fresh backend
            logger.warning("the shared backend of %r is dead (%s); loading a fresh one", settings.model,
                           scheduler.dead_reason)
            del SCHEDULERS[key]
            scheduler = None
        if scheduler is None:
            scheduler = make_scheduler(create_backend(settings), settings.scheduler)
            SCHEDULERS[key] = scheduler
            atexit.unregister(close_shared_at_exit)  # to the end of the list: it runs first at exit
            atexit.register(close_shared_at_exit)
        return scheduler


def count_in(scheduler: Scheduler) -> None:
    """One more open engine on ``scheduler``."""
    with LOCK:
        scheduler.engines += 1


def count_out(scheduler: Scheduler) -> None:
    """One engine fewer on ``scheduler``; the last one out closes it (and its backend) and unregisters it."""
    with LOCK:
        scheduler.engines -= 1
        if scheduler.engines > 0:
            return
        for key, shared in list(SCHEDULERS.items()):
            if shared is scheduler:
                del SCHEDULERS[key]
    scheduler.close()


def close_shared_at_exit() -> None:
    """At interpreter exit, close every shared backend still open (its engines were never closed).

    Registered again after each shared backend is made (:func:`shared_scheduler`), so it runs
    before the exit hooks of what the backend imported (atexit runs the last registered
    first): vLLM's engine-core process is a non-daemon ``multiprocessing.Process``, which
    ``multiprocessing``'s own exit hook would otherwise wait for forever.
    """
    with LOCK:
        schedulers = list(SCHEDULERS.values())
        SCHEDULERS.clear()
    for scheduler in schedulers:
        try:
            scheduler.close()
        except Exception:  # noqa: BLE001 - the others must still close
            logger.warning("closing a backend at exit failed", exc_info=True)
