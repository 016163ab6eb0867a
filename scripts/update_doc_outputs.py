"""Rewrite the output blocks of README.md and docs/*.md from what their code prints.

Usage (from the repository root)::

    python -m scripts.update_doc_outputs                 # every file
    python -m scripts.update_doc_outputs docs/langchain.md
    python -m scripts.update_doc_outputs --check         # change nothing; exit 1 if an output is stale

Then review ``git diff``: the new outputs must still be right answers. See
:mod:`scripts.doc_outputs` for the convention; the tests compare the same outputs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from scripts.doc_outputs import DOCS, ROOT, updated_text


def main(argv: list[str] | None = None) -> int:
    """Update (or with ``--check`` only compare) the output blocks; the exit status is 1 when stale."""
    parser = argparse.ArgumentParser(prog="python -m scripts.update_doc_outputs", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md and docs/*.md)")
    parser.add_argument("--check", action="store_true", help="only report stale outputs; write nothing")
    args = parser.parse_args(argv)
    stale = False
    for path in [p.resolve() for p in args.files] or DOCS:
        start = time.perf_counter()
        text, changed = updated_text(path)
        took = time.perf_counter() - start
        name = path.relative_to(ROOT)
        if not changed:
            print(f"{name}: up to date ({took:.1f} s)")
            continue
        stale = True
        print(f"{name}: {'stale' if args.check else 'updated'} output of {', '.join(changed)} ({took:.1f} s)")
        if not args.check:
            path.write_text(text, encoding="utf-8")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
