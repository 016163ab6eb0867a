"""Every exception the library defines derives from :class:`mfs_core.MFSError`,
and keeps the built-in base it had, so ``except ValueError`` in users' code still catches it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import mfs_core
from mfs_core import MFSError

PACKAGES = ("mfs_core", "langchain_mfs", "llamaindex_mfs")
SKIP = {"mfs_core.serve.app": {"_Disconnected", "_Stopped"}}  # private control flow inside the server, never raised to a caller


def _library_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages([str(Path(root.__file__).parent)], prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (inspect.isclass(value) and issubclass(value, BaseException) and not issubclass(value, Warning)
                        and value.__module__ == info.name and name not in SKIP.get(info.name, ())):
                    found[f"{info.name}.{name}"] = value
    return found


def test_every_library_exception_is_an_mfs_error() -> None:
    exceptions = _library_exceptions()
    assert len(exceptions) >= 14  # errors.py's five (MFSError included), the backends', the tools', CLI and server
    assert [name for name, cls in exceptions.items() if not issubclass(cls, MFSError)] == []


@pytest.mark.parametrize(("path", "base"), [
    ("mfs_core.errors.ContextWindowError", ValueError),
    ("mfs_core.errors.GenerateTimeoutError", TimeoutError),
    ("mfs_core.errors.DecodeTimeoutError", TimeoutError),
    ("mfs_core.errors.ServerUnreachableError", RuntimeError),
    ("mfs_core.errors.MissingLogprobsError", RuntimeError),
    ("mfs_core.tools.rendering.ToolsNotSupportedError", NotImplementedError),
    ("mfs_core.grammar.GrammarUnavailableError", ImportError),
])
def test_each_keeps_its_built_in_base(path: str, base: type[BaseException]) -> None:
    module, name = path.rsplit(".", 1)
    assert issubclass(getattr(importlib.import_module(module), name), base)


def test_a_bad_setting_is_caught_as_an_mfs_error_and_as_pydantics() -> None:
    from pydantic import ValidationError

    with pytest.raises(MFSError, match="step_beam_size") as caught:
        mfs_core.MFSSettings(step_beam_size=0)
    assert isinstance(caught.value, ValidationError) and "\n" not in str(caught.value)
