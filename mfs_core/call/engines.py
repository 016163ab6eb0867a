"""Which engine decodes a front end's call: the one it was handed, or those it owns.

An adapter object (``ChatMFS``, ``MFSLLM``) holds one :class:`EngineSource`. Handed an engine, it
decodes every call whose backend settings (:attr:`MFSSettings.backend_settings`: what chooses, loads
and reaches the model) equal the engine's and refuses the others (:func:`check_engine`): it never
loads a second model. Without one it owns an engine per distinct backend settings, made on first use
on the process-wide shared backend (:meth:`MFSEngine.from_settings`, reference-counted) and closed
with it: engines are closed with their last owner, and the backend with its last engine.
"""

from __future__ import annotations

import threading
import weakref
from typing import TypeVar

from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings

__all__ = ["ClosesOnExit", "EngineSource", "check_engine", "engine_for"]

_Self = TypeVar("_Self", bound="ClosesOnExit")


class EngineSource:
    """The engines of one front-end object: an injected one, or those it made for itself.

    Args:
        injected: an engine to decode with (its owner closes it), or None: make engines as needed.
        owner: who holds this source, for messages (``"ChatMFS"``).

    :meth:`get` gives the engine for a call's settings. :meth:`close` closes the engines made here
    (never an injected one): each counts one engine out of its backend, which closes (the model
    unloads, vLLM's processes stop) with the last engine that shares it. :meth:`bind` makes that
    happen when the owner is garbage-collected or at interpreter exit (:func:`weakref.finalize`),
    so a dropped adapter frees its model and a script that exits does not wait on a live vLLM engine.
    """

    def __init__(self, injected: MFSEngine | None = None, *, owner: str = "engine_for") -> None:
        """See the class docstring.

        Raises:
            TypeError: ``injected`` is not an :class:`MFSEngine`.
        """
        if injected is not None and not isinstance(injected, MFSEngine):
            msg = f"engine must be an MFSEngine, got {type(injected).__name__}"
            raise TypeError(msg)
        self.injected = injected
        self.owner = owner
        self._engines: dict[tuple, MFSEngine] = {}
        self._lock = threading.Lock()

    def bind(self, owner: object) -> None:
        """Close the engines made here when ``owner`` is collected or the interpreter exits (``owner`` must
        support weak references; this object keeps no reference to it)."""
        weakref.finalize(owner, self.close)

    def get(self, settings: MFSSettings) -> MFSEngine:
        """The engine that decodes ``settings``: the injected one, else the one made here for their
        backend settings (the model loaded on first use).

        Raises:
            ValueError: the injected engine's backend settings differ from ``settings``' (:func:`check_engine`).
            FileNotFoundError / ImportError: the model or the backend's dependencies are missing.
        """
        if self.injected is not None:
            check_engine(self.injected, settings, self.owner)
            return self.injected
        key = settings.backend_key()
        with self._lock:
            engine = self._engines.get(key)
            if engine is None or engine.closed:
                engine = self._engines[key] = MFSEngine.from_settings(settings)
            return engine

    def close(self) -> None:
        """Close every engine made here (a no-op for those already closed); :meth:`get` makes new ones after."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()


def engine_for(settings: MFSSettings, engine: MFSEngine | None = None, *, owner: str = "engine_for") -> MFSEngine:
    """The engine that decodes with ``settings``: ``engine`` when given, else the shared one.

    An injected ``engine`` is used when its backend settings equal those of ``settings``, and refused
    otherwise (:func:`check_engine`). Without one, the engine shared by every caller with these backend
    settings (:meth:`MFSEngine.from_settings`, which loads the model on first use). Pass ``settings`` to
    the engine's decode call; the returned engine's own settings may differ in decoder fields.

    Raises:
        ValueError: ``engine``'s backend settings differ from ``settings``' (one line naming the fields).
        FileNotFoundError / ImportError: the model or the backend's dependencies are missing.
    """
    if engine is None:
        return MFSEngine.from_settings(settings)
    check_engine(engine, settings, owner)
    return engine


def check_engine(engine: MFSEngine, settings: MFSSettings, owner: str = "engine_for") -> None:
    """Refuse ``settings`` whose backend settings differ from the injected ``engine``'s.

    Args:
        engine: the engine handed to the front end.
        settings: what the front end (or one call) would decode with.
        owner: who got the engine, for the message (``"ChatMFS"``).

    Raises:
        ValueError: one line naming each differing field with the engine's and the given
            value (an API key shown as ``'**********'``), e.g. ``ChatMFS(engine=...): the engine's
            backend settings differ from this model's in max_retries (engine: 3, here: 5); ...``.
    """
    mine, given = engine.settings.backend_settings, settings.backend_settings
    if mine == given:
        return
    names = mine.differences(given)
    msg = (
        f"{owner}(engine=...): the engine's backend settings differ from this model's in {', '.join(names)} "
        f"(engine: {', '.join(mine.shown(n) for n in names)}; here: {', '.join(given.shown(n) for n in names)}); "
        "build the engine with them (MFSEngine.from_settings) or leave them out"
    )
    raise ValueError(msg)


class ClosesOnExit:
    """A front-end class whose ``with`` block closes its engines on exit: ``with ChatMFS(...) as chat:``.

    The front end defines :meth:`close` (closing its :class:`EngineSource`); this base only enters and exits.
    """

    def close(self) -> None:
        """Close the engines this object made (the front end's own :meth:`close`)."""
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
