"""Health that tells the truth: ``mfs serve``'s watch over its backend, its probes and what it does
once the backend cannot serve.

The backend cannot serve once ``MFSEngine.dead_reason`` is set (vLLM's engine core died, the
transformers backend met a fatal device error, the backend was closed: for good) or the HTTP
backend's ``unavailable_reason`` is (every replica down past its retry budget). The
:class:`BackendWatch` reads both every ``health_interval`` seconds, and at once when a decode fails
or a probe or request comes in, and then, per ``on_backend_death``:

* ``"exit"`` (default): new requests get 503 with ``Retry-After``, the decodes in flight end with
  their error (a streamed one: an error event, then ``[DONE]``), and the process exits with a
  non-zero status within ``shutdown_timeout`` (:func:`mfs_core.serve.run` raises
  :class:`~mfs_core.errors.BackendDeadError`; ``mfs serve`` exits 2), for its supervisor to start it
  again: what vLLM's own server does (vLLM PR #21728 detects the dead engine core;
  ``vllm/entrypoints/launchers/launcher.py``'s ``watchdog_loop`` stops the server);
* ``"reload"``: the same refusal and draining, then the engine is built again in-process
  (``MFSEngine.from_settings``: the registry has dropped the dead backend, so the model loads
  afresh), at most ``reload_attempts`` times, ``reload_backoff`` seconds before the first and twice as
  long before each next (at most 60 s); every attempt is logged and shown by ``/health``; when none
  works, it exits as ``"exit"`` does.

Probes (Kubernetes' split): ``GET /health`` is liveness: 200 while the server serves or reloads, 503
with a one-line ``reason`` once it only waits to exit (or drains on SIGTERM); ``GET /ready`` is
readiness: 200 only while requests would be served, 503 (with ``Retry-After``) while reloading,
draining or dead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mfs_core.engine import MFSEngine
from mfs_core.errors import BackendDeadError
from mfs_core.serve.schemas import RequestError

__all__ = ["MAX_RELOAD_DELAY", "BackendWatch", "backend_failure"]

logger = logging.getLogger("mfs_core.serve")

MAX_RELOAD_DELAY = 60.0
"""Longest wait before one reload attempt (seconds)."""


def backend_failure(engine: MFSEngine) -> tuple[str, str] | None:
    """``(kind, reason)`` when ``engine``'s backend cannot serve, else None.

    ``kind`` is ``"dead"`` (``engine.dead_reason``: for good) or ``"unavailable"`` (the backend's
    ``unavailable_reason``: the HTTP replicas, which may come back); ``reason`` is one line.
    """
    reason = engine.dead_reason
    if reason is not None:
        return "dead", reason
    unavailable = getattr(engine.backend, "unavailable_reason", None)
    if isinstance(unavailable, str) and unavailable:
        return "unavailable", unavailable
    return None


class BackendWatch:
    """Watches the server's backend and acts once it cannot serve (see the module docstring).

    Args:
        server: the :class:`~mfs_core.serve.app.MFSServer` whose ``engine`` is watched (and replaced by a
            reload); typed ``Any`` so this module does not import the app that imports it.

    Attributes:
        state: ``"ready"``, ``"reloading"`` or ``"dead"`` (waiting to exit).
        reason: the last failure's one-line reason (None before any).
        attempt: the reload attempt under way or last made (0: none since the last failure).
        reloads: reloads that served again since the server started.
        exit_reason: set once the server decided to exit for its backend; :func:`mfs_core.serve.run`
            then raises :class:`BackendDeadError` with it.
        on_exit: called (on the loop) once the drain is over to stop the HTTP server (set by
            :func:`mfs_core.serve.run`; None: the app keeps answering 503 and logs why).
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self.state = "ready"
        self.reason: str | None = None
        self.attempt = 0
        self.reloads = 0
        self.exit_reason: str | None = None
        self.on_exit: Callable[[], None] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._handling = False

    # --- the watch ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start watching on the running loop (the app's lifespan)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = self._loop.create_task(self._watch(), name="mfs-backend-watch")

    async def stop(self) -> None:
        """Stop watching (the app's shutdown); a reload under way is cancelled."""
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def poke(self) -> None:
        """Look at the backend now (any thread: a decode just failed)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    def failure(self) -> tuple[str, str] | None:
        """The backend's failure while the server is ready (:func:`backend_failure`); None otherwise.

        Pokes the watch when there is one, so a probe or a request that sees it starts the reaction.
        """
        if self.state != "ready":
            return None
        found = backend_failure(self.server.engine)
        if found is not None:
            self.poke()
        return found

    async def _watch(self) -> None:
        interval = self.server.config.health_interval
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), interval)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if self.state != "ready" or self.server.closing or self._handling:
                continue
            found = backend_failure(self.server.engine)
            if found is not None:
                self._handling = True
                try:
                    await self._react(*found)
                finally:
                    self._handling = False

    async def _react(self, kind: str, reason: str) -> None:
        """The backend stopped serving: count it, then reload or drain and exit (``on_backend_death``)."""
        metrics, config = self.server.metrics, self.server.config
        metrics.backend_failures.labels(kind).inc()
        metrics.backend_up.set(0)
        self.reason = reason
        if config.on_backend_death == "reload":
            self.state = "reloading"
            logger.error("the backend cannot serve: %s; reloading it in-process (at most %d attempts)", reason,
                         config.reload_attempts)
            await self._settle()
            if await self._reload():
                return
            reason = f"{config.reload_attempts} reload attempt(s) failed; last: {self.reason}"
        await self._exit(reason)

    async def _settle(self) -> None:
        """Let the decodes in flight end with their errors (a dead backend fails them within a round), at most
        ``shutdown_timeout`` seconds; then abandon the rest (their clients get 503 error bodies)."""
        server = self.server
        loop = asyncio.get_running_loop()
        deadline = loop.time() + server.config.shutdown_timeout
        while server.in_flight and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if server.in_flight:
            await server.abandon_in_flight("the backend died")

    async def _reload(self) -> bool:
        """Build the engine again, at most ``reload_attempts`` times with doubling delays; True once one serves."""
        config, metrics = self.server.config, self.server.metrics
        for attempt in range(1, config.reload_attempts + 1):
            self.attempt = attempt
            delay = min(MAX_RELOAD_DELAY, config.reload_backoff * 2 ** (attempt - 1))
            logger.warning("reload attempt %d of %d in %.1f s", attempt, config.reload_attempts, delay)
            await asyncio.sleep(delay)
            try:
                engine = await asyncio.to_thread(_load_again, self.server.engine)
            except Exception as exc:  # noqa: BLE001 - any failure to load is one failed attempt
                metrics.backend_reloads.labels("failed").inc()
                self.reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                logger.error("reload attempt %d of %d failed: %s", attempt, config.reload_attempts, self.reason)
                continue
            self.server.use_engine(engine)
            self.reloads += 1
            self.state, self.attempt = "ready", 0
            metrics.backend_reloads.labels("ok").inc()
            metrics.backend_up.set(1)
            logger.warning("backend reloaded (attempt %d of %d; %d reload(s) since start); serving again", attempt,
                           config.reload_attempts, self.reloads)
            return True
        return False

    async def _exit(self, reason: str) -> None:
        """Drain (new requests 503, the decodes in flight end with their errors), then stop the server."""
        self.state, self.exit_reason = "dead", reason
        logger.error("the backend cannot serve: %s; draining for at most %s s, then exiting with a non-zero status "
                     "(a supervisor restarts mfs serve; on_backend_death='reload' reloads in-process instead)", reason,
                     self.server.config.shutdown_timeout)
        await self.server.drain()
        if self.on_exit is not None:
            self.on_exit()
        else:
            logger.error("no server process to stop (the app runs outside mfs_core.serve.run): /health answers 503")

    # --- what clients see --------------------------------------------------------------------------------------
    def refusal(self) -> RequestError | None:
        """The 503 a new request gets while the backend cannot serve (None: admit it)."""
        found = self.failure()
        if self.state == "ready" and found is None:
            return None
        reason = found[1] if found is not None else self.reason
        if self.state == "reloading" or (found is not None and self.server.config.on_backend_death == "reload"):
            return RequestError(503, f"the model backend is reloading ({reason}); retry shortly",
                                kind="service_unavailable", headers={"Retry-After": "5"})
        return self.dead_error(reason)

    def dead_error(self, reason: str | None) -> RequestError:
        """The 503 of a request whose backend died (under it, or before it came)."""
        return RequestError(503, f"the model backend cannot serve: {reason}; the server is restarting, retry on "
                            "another replica", kind="service_unavailable", headers={"Retry-After": "5"})

    def failed_decode(self, exc: BaseException) -> RequestError | None:
        """The 503 of a decode that failed because the backend stopped serving (None: the decode's own failure)."""
        self.poke()
        found = backend_failure(self.server.engine)
        if isinstance(exc, BackendDeadError):
            return self.dead_error(exc.reason)
        if found is not None:
            return self.dead_error(found[1])
        return None

    def liveness(self) -> tuple[int, dict[str, Any]]:
        """``GET /health``'s status and body fields: 503 once the server only waits to exit."""
        found = self.failure()
        if self.state == "dead" or (found is not None and self.server.config.on_backend_death == "exit"):
            return 503, {"status": "dead", "reason": self.reason if found is None else found[1]}
        if self.state == "reloading" or found is not None:
            return 200, {"status": "reloading", "reason": self.reason if found is None else found[1],
                         "attempt": self.attempt, "attempts": self.server.config.reload_attempts}
        return 200, {"status": "ok"}

    def readiness(self) -> tuple[int, dict[str, Any]]:
        """``GET /ready``'s status and body: 200 only while a request would be served."""
        _, body = self.liveness()
        if self.server.closing and body["status"] == "ok":
            body = {"status": "draining", "reason": "the server is shutting down"}
        return (200 if body["status"] == "ok" else 503), body


def _load_again(engine: MFSEngine) -> MFSEngine:
    """Close the dead ``engine`` and build it again from its settings (a worker thread).

    The new backend is asked ``check_health()`` when it has one (the HTTP backend: GET /models).

    Raises:
        Whatever loading the model raises (OSError, ImportError, RuntimeError, ...), or the health check's
        error (the new engine is closed first).
    """
    engine.close()  # its registry entry goes; vLLM's processes that are left are stopped
    fresh = MFSEngine.from_settings(engine.settings)
    check = getattr(fresh.backend, "check_health", None)
    if callable(check):
        try:
            check()
        except BaseException:
            fresh.close()
            raise
    return fresh
