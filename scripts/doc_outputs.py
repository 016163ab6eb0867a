"""Run the code blocks of README.md and docs/*.md and hold their shown outputs true.

The convention, in the Markdown files:

* A ```` ```python ```` block runs, alone, in a fresh namespace. A block that prints is
  followed by its output: a line ``<!-- output -->`` and a ```` ```text ```` block holding
  exactly what it prints. ```` ```python no-run ```` blocks are shown only (they need a GPU,
  a server or a hosted model); ```` ```python slow ```` blocks run in the slow tests only;
  ```` ```python tool-model ```` blocks run once the bundled demo model's chat template
  renders tools.
* A ```` ```bash ```` block followed by ``<!-- output -->`` runs too: each of its lines is
  an ``mfs ...`` command, run in-process through the CLI. Other bash blocks (installs,
  servers) are shown only.
* A block flagged ``serve`` (```` ```python serve ````, ```` ```bash serve ````) talks to
  ``mfs serve``: it runs against one server started for the run (:data:`SERVE_ARGS`, on a
  free loopback port, stopped at exit), with :data:`SERVE_ADDRESS` in its code replaced by
  that server's address; a bash ``serve`` block's lines (``curl ...``) run in ``bash``.
* Wall-clock seconds (``wall time 0.17 s``) differ from run to run: they are compared as
  ``<seconds>``, as are those of the search's stop line (``726 tokens; 0.17 s]``);
  everything else is compared character for character.

Every block runs on the bundled demo model on the CPU (``MFS_DEVICE=cpu``, offline), so the
outputs depend only on the code, the seeds it sets and the checkpoint. After a change that
moves them (a new checkpoint, a decoder change), regenerate and review the diff::

    python -m scripts.update_doc_outputs          # rewrites the output blocks
    git diff README.md docs/

``tests/integration/test_doc_outputs.py`` runs every block and compares.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DOCS",
    "OUTPUT_MARKER",
    "ROOT",
    "Block",
    "blocks",
    "normalise",
    "run_block",
    "runnable_blocks",
    "updated_text",
]

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTPUT_MARKER = "<!-- output -->"
ENVIRONMENT = {"MFS_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
"""Set while a block runs (and restored after): the demo model on the CPU, nothing downloaded."""

SERVE_ADDRESS = "127.0.0.1:8000"
"""The address ``serve`` blocks name (``mfs serve``'s default); replaced by the test server's."""
SERVE_ARGS = ("--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "3")
SERVE_ENV = {"MFS_SERVER_API_KEY": "sk-local"}
"""The ``mfs serve`` command docs/serve.md shows: ``MFS_SERVER_API_KEY=sk-local mfs serve --step-beam-size 2 ...``."""

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_OUTPUT_GAP = re.compile(rf"\A\s*{re.escape(OUTPUT_MARKER)}\s*\Z")
_SECONDS = re.compile(r"(wall time(?: including model load:)?|tokens;) \d+(?:\.\d+)? s")


@dataclass
class Block:
    """One fenced code block of a Markdown file.

    Attributes:
        path: the file.
        line: 1-based line of its opening fence.
        lang: the info string's first word (``python``, ``bash``, ``text``).
        flags: the info string's other words (``no-run``, ``slow``).
        code: the block's content (ends with a newline unless empty).
        span: character offsets of the whole block, fences included.
        output: the ``<!-- output -->`` block that follows it, if any.
    """

    path: Path
    line: int
    lang: str
    flags: set[str]
    code: str
    span: tuple[int, int]
    output: Block | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """``docs/langchain.md:27``: where the block is, for test ids and messages."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        """Whether the block is run: python unless ``no-run``; bash only with an output block."""
        if "no-run" in self.flags:
            return False
        if "tool-model" in self.flags and not _demo_model_renders_tools():
            return False
        return self.lang == "python" or (self.lang == "bash" and self.output is not None)


@functools.lru_cache(maxsize=1)
def _demo_model_renders_tools() -> bool:
    """Whether the bundled demo model's chat template renders tools (``python tool-model`` blocks run then)."""
    from tests.tool_model import demo_model_renders_tools

    return demo_model_renders_tools()


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """The code blocks of ``path`` (output blocks attached to the block they follow)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    found: list[Block] = []
    for match in _FENCE.finditer(text):
        info = match.group(1).split()
        block = Block(
            path=path, line=text.count("\n", 0, match.start()) + 1, lang=info[0] if info else "",
            flags=set(info[1:]), code=match.group(2), span=(match.start(), match.end()),
        )
        previous = found[-1] if found else None
        if (
            previous is not None and block.lang == "text" and previous.lang != "text"
            and _OUTPUT_GAP.match(text[previous.span[1] : block.span[0]])
        ):
            previous.output = block
            continue
        found.append(block)
    return found


def runnable_blocks(paths: list[Path] | None = None) -> Iterator[Block]:
    """Every block that runs, in file order."""
    for path in paths or DOCS:
        yield from (block for block in blocks(path) if block.runs)


def normalise(text: str) -> str:
    """``text`` with wall-clock seconds replaced by ``<seconds>`` (the only part that varies)."""
    return _SECONDS.sub(r"\1 <seconds> s", text)


@contextlib.contextmanager
def _isolated() -> Iterator[None]:
    """Fix the environment for a block and undo what it changes in global state."""
    saved_env = dict(os.environ)
    os.environ.update(ENVIRONMENT)
    for name in [key for key in os.environ if key.upper().startswith("MFS_") and key not in ENVIRONMENT]:
        del os.environ[name]  # a block sees no MFS_* setting but those it sets itself
    restore_llama_index = _save_llama_index()
    root = logging.getLogger()
    saved_logging = (list(root.handlers), root.level)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        restore_llama_index()
        root.handlers[:] = saved_logging[0]
        root.setLevel(saved_logging[1])


def _save_llama_index():  # noqa: ANN202 - returns a restore function
    """LlamaIndex's global ``Settings`` and root dispatcher handlers, to restore after a block."""
    try:
        from llama_index.core import Settings
        from llama_index.core.instrumentation import get_dispatcher
    except ImportError:
        return lambda: None
    dispatcher = get_dispatcher()
    handlers = list(dispatcher.event_handlers)
    saved = (Settings._llm, Settings._callback_manager)

    def restore() -> None:
        dispatcher.event_handlers[:] = handlers
        Settings._llm, Settings._callback_manager = saved

    return restore


_SERVER: list = []


def serve_address() -> str:
    """``host:port`` of the ``mfs serve`` the ``serve`` blocks run against (started on first use)."""
    if not _SERVER:
        import atexit

        from tests.serve_process import serve_process

        context = serve_process(SERVE_ARGS, SERVE_ENV)
        _SERVER.append(context.__enter__())
        atexit.register(context.__exit__, None, None, None)
    return _SERVER[0].url.removeprefix("http://")


def run_block(block: Block) -> str:
    """Run ``block`` alone and return what it printed to stdout.

    Python blocks are executed in a fresh namespace (``__name__ == "__main__"``); bash blocks
    run each ``mfs ...`` line through :data:`mfs_core.cli.app`. Tracebacks point at the
    Markdown file's own line numbers.

    Raises:
        Whatever the block raises; ``RuntimeError`` for a bash line that is not an ``mfs``
        command or that exits with a non-zero status.
    """
    source = block.code.replace(SERVE_ADDRESS, serve_address()) if "serve" in block.flags else block.code
    with _isolated():
        if block.lang == "python":
            code = compile("\n" * block.line + source, str(block.path), "exec")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, {"__name__": "__main__"})  # noqa: S102 - our own documentation
            return out.getvalue()
        if "serve" in block.flags:
            return _run_shell(block, source)
        return _run_commands(block)


def _run_shell(block: Block, source: str) -> str:
    """Run a bash ``serve`` block's lines in ``bash``; what they print to stdout."""
    import subprocess

    result = subprocess.run(["bash", "-c", source], capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        msg = f"{block.name}: exited with {result.returncode}: {result.stderr[-2000:]}"
        raise RuntimeError(msg)
    return result.stdout


def _run_commands(block: Block) -> str:
    from typer.testing import CliRunner

    from mfs_core.cli import app

    printed = []
    for line in block.code.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        argv = shlex.split(line, comments=True)
        if argv[0] != "mfs":
            msg = f"{block.name}: a run bash block holds only mfs commands, got {line!r}"
            raise RuntimeError(msg)
        result = CliRunner().invoke(app, argv[1:])
        if result.exit_code != 0:
            msg = f"{block.name}: {line!r} exited with {result.exit_code}: {result.output}"
            raise RuntimeError(msg) from result.exception
        printed.append(result.stdout)
    return "".join(printed)


def updated_text(path: Path, only: set[str] | None = None) -> tuple[str, list[str]]:
    """``path``'s text with each run block's output block rewritten from a fresh run.

    A block that prints gets an output block (added after it if missing); one that prints
    nothing loses its output block.

    Args:
        path: a Markdown file.
        only: block names (``docs/x.md:12``) to rerun; None: every runnable block.

    Returns:
        The new text and the names of the blocks whose output changed.
    """
    text = path.read_text(encoding="utf-8")
    edits: list[tuple[int, int, str]] = []
    changed = []
    for block in blocks(path, text):
        if not block.runs or (only is not None and block.name not in only):
            continue
        printed = run_block(block)
        if printed and not printed.endswith("\n"):
            printed += "\n"
        shown = block.output.code if block.output is not None else ""
        if normalise(printed) == normalise(shown):
            continue
        changed.append(block.name)
        if block.output is not None and printed:
            edits.append((block.output.span[0], block.output.span[1], f"```text\n{printed}```"))
        elif block.output is not None:
            edits.append((block.span[1], block.output.span[1], ""))
        else:
            edits.append((block.span[1], block.span[1], f"\n{OUTPUT_MARKER}\n```text\n{printed}```"))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text, changed
