"""Where ``MFS_*`` settings come from: the environment and ``.env`` files, read as pydantic-settings reads them.

Kept apart from :mod:`mfs_core.settings` (the model and its fields): the names it reads, the
names it leaves to other readers, and the warning for an ``MFS_*`` name that is no setting.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Container
from pathlib import Path
from typing import Any

from mfs_core.errors import closest

__all__ = ["ENV_PREFIX", "UnknownSettingWarning", "environment_sources", "warn_unknown_env"]

ENV_PREFIX = "MFS_"
_NOT_SETTINGS = frozenset({"MFS_DATA_DIR", "MFS_TEST_CACHE"})
"""``MFS_*`` environment variables that are no setting but are read elsewhere: the benchmarks' and tests' data
folder, and the folder the packaged-model tests keep their converted checkpoints in (tests/packaged_models.py)."""
_NOT_SETTING_PREFIXES = ("MFS_SERVER_",)
"""Prefixes of ``MFS_*`` variables read elsewhere: ``mfs serve``'s own (:class:`mfs_core.serve.ServerSettings`)."""


class UnknownSettingWarning(UserWarning):
    """An ``MFS_*`` environment variable or ``.env`` entry names no setting (it is ignored)."""


def environment_sources(env_file: Any = ".env") -> dict[str, str]:
    """Where each ``MFS_*`` name of the environment and of ``env_file`` comes from.

    Args:
        env_file: the ``.env`` path (or paths) pydantic-settings reads; None: none.

    Returns:
        Upper-case variable name -> ``"MFS_X"`` (the environment, which wins) or
        ``"MFS_X in .env"``; names that are no setting included (see :func:`setting_sources`).
    """
    found: dict[str, str] = {}
    files = env_file if isinstance(env_file, (list, tuple)) else [env_file] if env_file else []
    for path in files:
        path = Path(path).expanduser()
        if path.is_file():
            from dotenv import dotenv_values  # pydantic-settings' own .env reader

            for key in dotenv_values(path):
                if key.upper().startswith(ENV_PREFIX):
                    found[key.upper()] = f"{key.upper()} in {path}"
    for key in os.environ:
        if key.upper().startswith(ENV_PREFIX):
            found[key.upper()] = key.upper()
    return found


def warn_unknown_env(env_file: Any, fields: Container[str]) -> None:
    """Warn (:class:`UnknownSettingWarning`) for each ``MFS_*`` name of the environment or
    ``env_file`` that names none of ``fields`` (lower-case setting names) and is not read
    elsewhere; the message names the closest setting."""
    for name, origin in sorted(environment_sources(env_file).items()):
        field = name[len(ENV_PREFIX):].lower()
        if field in fields or name in _NOT_SETTINGS or name.startswith(_NOT_SETTING_PREFIXES):
            continue
        guess = closest(field, fields)
        hint = f"; did you mean {ENV_PREFIX}{guess.upper()}?" if guess else ""
        where = f" ({origin.split(' in ', 1)[1]})" if " in " in origin else ""
        warnings.warn(f"{name}{where} is not an MFS setting and is ignored{hint}", UnknownSettingWarning, stacklevel=3)
