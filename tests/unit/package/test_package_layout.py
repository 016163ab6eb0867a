"""What the installed package holds, and how its modules import each other.

* The import graph of ``mfs_core``, the adapters and ``experiments`` has no circle: every
  ``import`` statement counts, at module level or inside a function (a circle broken only by
  a deferred import is still one).
* The library never imports ``experiments/testbed/`` (the demo model's generators, training, evaluation
  and probe scripts), which is not installed.
* The wheel holds the library and the demo model's run-time files (weights, tokenizer, chat
  template, held-out set, model card) and no training or evaluation script.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ("mfs_core", "langchain_mfs", "llamaindex_mfs")
TESTBED_SCRIPTS = ("problems", "problems_v2", "formats", "train", "train_v2", "evaluate", "evaluate_formats", "slip_probe")
DEMO_RUNTIME_FILES = {
    "mfs_core/demo/__init__.py", "mfs_core/demo/MODEL_CARD.md", "mfs_core/demo/heldout.json",
    "mfs_core/demo/model/config.json", "mfs_core/demo/model/model.safetensors", "mfs_core/demo/model/tokenizer.json",
    "mfs_core/demo/model/tokenizer_config.json", "mfs_core/demo/model/chat_template.jinja",
    "mfs_core/demo/model/generation_config.json",
}


def _modules(packages: tuple[str, ...]) -> dict[str, Path]:
    modules = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the modules of ``packages`` it imports (any import statement, anywhere in it)."""
    modules = _modules(packages)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                # "from pkg import sub" imports the submodule pkg.sub when there is one
                targets = [known(f"{base}.{alias.name}") or known(base) for alias in node.names]
            else:
                continue
            graph[name] |= {target for target in targets if target and target != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_graph_reader_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_circular_imports() -> None:
    graph = _import_graph((*LIBRARY, "experiments"))
    assert "mfs_core.backends.transformers" in graph and "mfs_core.engine" in graph["mfs_core"]
    assert _circles(graph) == []


def test_the_library_never_imports_the_experiments() -> None:
    graph = _import_graph((*LIBRARY, "experiments"))
    for name, imported in graph.items():
        if not name.startswith("experiments"):
            assert not {other for other in imported if other.startswith("experiments")}, name
    assert not any((ROOT / "mfs_core" / "demo" / f"{script}.py").exists() for script in TESTBED_SCRIPTS)


def test_package_discovery_leaves_the_experiments_out() -> None:
    """The packages setuptools finds with pyproject.toml's rules (what the wheel installs)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from setuptools import find_namespace_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = find_namespace_packages(str(ROOT), **config["packages"]["find"])
    assert {"mfs_core", "mfs_core.demo", "mfs_core.backends", "langchain_mfs", "llamaindex_mfs"} <= set(found)
    assert not [name for name in found if name.split(".")[0] not in LIBRARY], found
    data = config["package-data"]["mfs_core"]
    assert {"demo/model/*", "demo/*.json", "demo/*.md"} <= set(data)


def _wheel_files(tmp_path: Path) -> set[str]:
    """Build the wheel from a clean copy of the checkout, offline; its file names."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".venv",
                                    "bench-results", ".whl", ".pytest_cache")
    shutil.copytree(ROOT, source, ignore=ignore)
    out = tmp_path / "wheel"
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index",
               "--quiet", "-w", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=tmp_path)
    (wheel,) = out.glob("mfs_decoding-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


@pytest.mark.slow
def test_the_wheel_holds_the_library_and_the_model_but_no_script(tmp_path: Path) -> None:
    pytest.importorskip("wheel")
    files = _wheel_files(tmp_path)
    tops = {name.split("/")[0] for name in files if not name.split("/")[0].endswith(".dist-info")}
    assert tops == set(LIBRARY)
    assert DEMO_RUNTIME_FILES <= files
    assert "mfs_core/models.py" in files and "mfs_core/backends/transformers.py" in files
    assert sorted(name for name in files if name.startswith("mfs_core/demo/") and name.endswith(".py")) == [
        "mfs_core/demo/__init__.py"]
    for script in TESTBED_SCRIPTS:
        assert not [name for name in files if name.endswith(f"/{script}.py")], script
    assert not [name for name in files if name.startswith(("experiments/", "tests/", "scripts/"))]


def _room(module: str) -> str:
    """The folder (``mfs_core.engine``) or top-level module (``mfs_core.types``) a module belongs to."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "mfs_core" else parts[0]


def test_no_circle_between_folders() -> None:
    """Folders and top-level modules import one way: the engine package, the
    tools, the decoders and the backends form no loop, even through modules that import each
    other without a circle file by file."""
    rooms: dict[str, set[str]] = {}
    for module, imported in _import_graph(LIBRARY).items():
        rooms.setdefault(_room(module), set()).update(
            _room(other) for other in imported if _room(other) != _room(module))
    for imported in list(rooms.values()):
        for other in imported:
            rooms.setdefault(other, set())
    assert _circles(rooms) == []
    assert "mfs_core.engine" in rooms["mfs_core.call"] and "mfs_core.tools" not in rooms["mfs_core.engine"]
    assert not rooms["mfs_core.grammar"] - {"mfs_core.errors", "mfs_core.types"}  # at the bottom, beside types
    assert "mfs_core.tools" not in rooms["mfs_core.decoders"] | rooms["mfs_core.backends"]
