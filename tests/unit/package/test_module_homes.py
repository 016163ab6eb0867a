"""Errors live in mfs_core.errors, the vLLM server launcher outside the backends, install hints
name the real distribution; no module is kept as a former home that only re-exports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mfs_core
import mfs_core.backends
import mfs_core.backends.base
import mfs_core.errors

ROOT = Path(mfs_core.__file__).parent


def test_errors_live_in_errors_only() -> None:
    for name in ("ContextWindowError", "BackendOutputError", "GenerateTimeoutError"):
        assert getattr(mfs_core.errors, name).__module__ == "mfs_core.errors"
        assert not hasattr(mfs_core.backends.base, name) and not hasattr(mfs_core.backends, name)  # no second home
    assert issubclass(mfs_core.errors.ContextWindowError, ValueError)


def test_no_module_outside_the_backends_imports_from_them_for_an_error() -> None:
    for path in ROOT.rglob("*.py"):
        if "backends" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "mfs_core.backends.base":
                assert not {a.name for a in node.names} & {"ContextWindowError", "BackendOutputError", "GenerateTimeoutError"}, path


def test_the_vllm_server_launcher_is_no_backend_and_no_shim_is_left() -> None:
    from mfs_core.vllm_server import VLLMServer, server_command  # noqa: F401

    assert not (ROOT / "backends" / "vllm_serve.py").exists() and not (ROOT / "tools" / "grammar.py").exists()


def test_install_hints_name_the_distribution() -> None:
    for path in ROOT.rglob("*.py"):
        assert not re.search(r'pip install "mfs\[', path.read_text()), path
