"""``mfs serve``: MFS behind an OpenAI-compatible HTTP endpoint that streams the search.

Needs the ``serve`` extra (``pip install "mfs-decoding[serve]"``: Starlette, uvicorn,
prometheus-client). :func:`create_app` builds the ASGI app around an engine; :func:`run`
loads the engine from settings and serves it until SIGTERM / SIGINT (graceful: the first signal
drains, :meth:`~mfs_core.serve.app.MFSServer.drain`: new requests get 503 while open ones get
``shutdown_timeout`` seconds, the rest an error body; then the listener and the backend close;
a second signal exits at once). Once the backend cannot serve (vLLM's engine core died, a fatal
device error, every HTTP replica down), it drains the same way and exits with a non-zero status, or
reloads the backend in-process (``on_backend_death``, :mod:`mfs_core.serve.health`). See docs/serve.md.
"""

from __future__ import annotations

import logging
import time

from mfs_core.serve.config import ServerSettings
from mfs_core.settings import MFSSettings

__all__ = ["QueryStringFilter", "ServerSettings", "create_app", "run"]

logger = logging.getLogger("mfs_core.serve")


def create_app(*args, **kwargs):  # noqa: ANN002, ANN003 - re-export without importing Starlette eagerly
    """:func:`mfs_core.serve.app.create_app` (imported on first use)."""
    from mfs_core.serve.app import create_app as build

    return build(*args, **kwargs)


class QueryStringFilter(logging.Filter):
    """Drops the query string from uvicorn's access log lines (``POST /v1/models?key=... HTTP/1.1`` is logged as
    ``POST /v1/models?<query dropped> HTTP/1.1``): a client that sends a key or other secret in the URL must not
    find it in the server's logs. uvicorn's access record's arguments are ``(client, method, path, http
    version, status)``; other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (args[0], args[1], args[2].split("?", 1)[0] + "?<query dropped>", *args[3:])
        return True


def run(settings: MFSSettings, config: ServerSettings | None = None, *, log_level: str = "info") -> None:
    """Load the model of ``settings`` and serve it until the process is told to stop.

    Args:
        settings: the engine's settings (each request may change the search's fields).
        config: where to listen, the key and the limits (default ``ServerSettings()``).
        log_level: uvicorn's log level (``"warning"`` keeps the access log quiet).

    Raises:
        ImportError: the ``serve`` extra is not installed.
        OSError / ValueError: the model cannot be loaded, the port cannot be bound.
        BackendDeadError: the server stopped because its backend could not serve any more (after draining;
            ``on_backend_death``); ``mfs serve`` then exits with status 2, for a supervisor to restart it.
    """
    import uvicorn

    from mfs_core.engine import MFSEngine

    config = config if config is not None else ServerSettings()
    start = time.perf_counter()
    engine = MFSEngine.from_settings(settings)
    logger.info("model %r loaded in %.2f s", settings.model, time.perf_counter() - start)
    app = create_app(engine, config)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QueryStringFilter) for f in access.filters):
        access.addFilter(QueryStringFilter())
    server = _draining_server(uvicorn.Config(
        app, host=config.host, port=config.port, log_level=log_level, lifespan="on",
        timeout_graceful_shutdown=_CLOSE_SECONDS,  # the drain has ended every response; this only closes them
    ), app.state.mfs)
    watch = app.state.mfs.watch
    watch.on_exit = lambda: setattr(server, "should_exit", True)
    server.run()
    if watch.exit_reason is not None:
        from mfs_core.errors import BackendDeadError

        logger.error("exiting: the backend could not serve (%s)", watch.exit_reason)
        _exit_within(EXIT_GRACE_SECONDS, 2)
        raise BackendDeadError(watch.exit_reason, settings.model)


EXIT_GRACE_SECONDS = 10.0
"""Most seconds the interpreter's own teardown may take once the server stopped for a dead backend (measured:
up to 22 s on a loaded 2-core machine after vLLM's engine core was killed); past it the process ends with
``os._exit`` so its supervisor sees the exit."""


def _exit_within(seconds: float, status: int) -> None:
    """End the process with ``status`` if it is still alive ``seconds`` from now (a daemon thread)."""
    import os
    import threading

    def hard_exit() -> None:
        time.sleep(seconds)
        logger.error("the process did not end within %s s of the server's stop; exiting with status %d now",
                     seconds, status)
        logging.shutdown()
        os._exit(status)

    threading.Thread(target=hard_exit, name="mfs-exit-deadline", daemon=True).start()


_CLOSE_SECONDS = 5
"""Seconds uvicorn waits for connections to close once the drain is over (their responses have ended)."""


def _draining_server(uv_config, mfs):  # noqa: ANN001, ANN202 - uvicorn is imported lazily
    """A ``uvicorn.Server`` whose first SIGTERM / SIGINT drains ``mfs`` (:meth:`MFSServer.drain`) with the
    listener still open, then exits as uvicorn does; a second signal exits at once (uvicorn's own handling)."""
    import asyncio

    import uvicorn

    class DrainingServer(uvicorn.Server):
        draining = False
        loop: asyncio.AbstractEventLoop | None = None

        async def serve(self, sockets=None) -> None:  # noqa: ANN001
            self.loop = asyncio.get_running_loop()
            await super().serve(sockets)

        def handle_exit(self, sig, frame) -> None:  # noqa: ANN001 - a signal handler, on the loop's thread
            if self.draining or self.loop is None or self.loop.is_closed():
                super().handle_exit(sig, frame)
                return
            self.draining = True
            getattr(self, "_captured_signals", []).append(sig)  # re-raised once shut down, as uvicorn does
            logger.info("draining: new requests get 503 for up to %s s", mfs.config.shutdown_timeout)
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._drain()))

        async def _drain(self) -> None:
            try:
                await mfs.drain()
            finally:
                self.should_exit = True

    return DrainingServer(uv_config)
