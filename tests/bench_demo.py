"""The benchmark tests' question set and scripted answers: the demo held-out fixture and a script answering 7.

:func:`demo_set` loads tests/fixtures/demo_heldout.json (four questions; only the first one's gold
answer is 7). :func:`seven_script` is a :class:`tests.scripted.ScriptedBackend` script whose steps
are "x = 7" (2 tokens) and whose completions are "x = 7" and the boxed 7 (7 whitespace tokens), so
every method predicts 7.
"""

from __future__ import annotations

from pathlib import Path

from mfs_core.bench.datasets import load_dataset
from mfs_core.types import GenerationRequest
from tests.scripted import continuation

__all__ = ["demo_set", "seven_script"]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
END = "<end_of_reasoning>"


def seven_script(request: GenerationRequest) -> list:
    """Steps of 2 tokens; completions "x = 7" + the boxed 7 (7 whitespace tokens)."""
    if "\n" in request.stop:
        return [continuation("x = 7", mean_logprob=-0.1 * (i + 1), stop_reason="\n") for i in range(request.n)]
    return [continuation("x = 7\nThe answer is: \\boxed{7}.", mean_logprob=-0.5, stop_reason=END)] * request.n


def demo_set(limit: int | None = None):
    """The demo held-out fixture's questions (the first ``limit`` of them; None: all four)."""
    return load_dataset(str(FIXTURES / "demo_heldout.json"), kind="demo", limit=limit)
