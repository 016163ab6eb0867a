"""Errors live in mfs_core.errors, the vLLM server launcher outside the backends, install hints
name the real distribution; the old import paths keep working (issue 36 item 5)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mfs_core
import mfs_core.backends
import mfs_core.backends.base
import mfs_core.errors

ROOT = Path(mfs_core.__file__).parent


def test_errors_live_in_errors_and_keep_their_old_import_path() -> None:
    for name in ("ContextWindowError", "BackendOutputError", "GenerateTimeoutError"):
        assert getattr(mfs_core.backends.base, name) is getattr(mfs_core.errors, name)
        assert getattr(mfs_core.errors, name).__module__ == "mfs_core.errors"
    assert mfs_core.backends.ContextWindowError is mfs_core.errors.ContextWindowError
    assert issubclass(mfs_core.errors.ContextWindowError, ValueError)


def test_no_module_outside_the_backends_imports_from_them_for_an_error() -> None:
    for path in ROOT.rglob("*.py"):
        if "backends" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "mfs_core.backends.base":
                assert not {a.name for a in node.names} & {"ContextWindowError", "BackendOutputError", "GenerateTimeoutError"}, path


def test_the_vllm_server_launcher_is_no_backend_and_its_old_path_works() -> None:
    from mfs_core.backends.vllm_serve import VLLMServer, server_command
    from mfs_core.vllm_server import VLLMServer as launcher, server_command as command

    assert (VLLMServer, server_command) == (launcher, command)
    assert not (ROOT / "backends" / "vllm_serve.py").read_text().count("subprocess")  # only the re-export


def test_install_hints_name_the_distribution() -> None:
    for path in ROOT.rglob("*.py"):
        assert not re.search(r'pip install "mfs\[', path.read_text()), path
