"""``mfs serve``: MFS behind an OpenAI-compatible HTTP endpoint that streams the search.

Needs the ``serve`` extra (``pip install "mfs-decoding[serve]"``: Starlette, uvicorn,
prometheus-client). :func:`create_app` builds the ASGI app around an engine; :func:`run`
loads the engine from settings and serves it until SIGTERM / SIGINT (graceful: open
responses get ``shutdown_timeout`` seconds, then the backend is closed). See docs/serve.md.
"""

from __future__ import annotations

import logging
import time

from mfs_core.serve.config import ServerSettings
from mfs_core.settings import MFSSettings

__all__ = ["ServerSettings", "create_app", "run"]

logger = logging.getLogger("mfs_core.serve")


def create_app(*args, **kwargs):  # noqa: ANN002, ANN003 - re-export without importing Starlette eagerly
    """:func:`mfs_core.serve.app.create_app` (imported on first use)."""
    from mfs_core.serve.app import create_app as build

    return build(*args, **kwargs)


def run(settings: MFSSettings, config: ServerSettings | None = None, *, log_level: str = "info") -> None:
    """Load the model of ``settings`` and serve it until the process is told to stop.

    Args:
        settings: the engine's settings (each request may change the search's fields).
        config: where to listen, the key and the limits (default ``ServerSettings()``).
        log_level: uvicorn's log level (``"warning"`` keeps the access log quiet).

    Raises:
        ImportError: the ``serve`` extra is not installed.
        OSError / ValueError: the model cannot be loaded, the port cannot be bound.
    """
    import uvicorn

    from mfs_core.engine import MFSEngine

    config = config if config is not None else ServerSettings()
    start = time.perf_counter()
    engine = MFSEngine.from_settings(settings)
    logger.info("model %r loaded in %.2f s", settings.model, time.perf_counter() - start)
    app = create_app(engine, config)
    server = uvicorn.Server(uvicorn.Config(
        app, host=config.host, port=config.port, log_level=log_level, lifespan="on",
        timeout_graceful_shutdown=config.shutdown_timeout,  # type: ignore[arg-type] - a float works (asyncio.wait_for)
    ))
    server.run()
