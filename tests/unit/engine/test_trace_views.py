"""The trace views: the HTML page (static checks), figure 2's deficits, the live view's lines."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from mfs_core import MFSEngine
from mfs_core.live import LiveView
from mfs_core.martingale import width_prune
from mfs_core.trace_html import render_trace_html
from mfs_core.trace_plot import plot_deficits, step_deficits
from mfs_core.types import Candidate, DecodeResult, StepTrace
from tests.engine_decodes import SETTINGS
from tests.synthetic_search import searched
from tests.three_step_model import synthetic_model


def test_html_page_is_self_contained_and_shows_every_candidate():
    result = searched()
    page = render_trace_html(result, question="question 3?")
    assert not re.search(r"https?://|<script|<link|\bsrc=|@import|url\(", page)
    total = sum(len(s.candidates) for s in result.steps)
    assert page.count('<li class="cand') == total
    assert len(re.findall(r'<li class="cand[^"]*\bpruned', page)) == sum(s.num_pruned for s in result.steps)
    assert len(re.findall(r'<li class="cand[^"]*\bselected', page)) == sum(
        sum(c.selected for c in s.candidates) for s in result.steps
    )
    assert '<tr class="chosen"><td class=l>7</td>' in page
    # Every candidate of step t+1 sits under the beam it extends (nested <details> per step).
    assert page.count("<details open>") == sum(len(set(s.beam_sources)) for s in result.steps[:-1])


def test_html_escapes_model_text():
    step = StepTrace(step=0, candidates=[Candidate(beam_index=0, text="<script>x</script>", step_logprob=-0.1, step_tokens=1)])
    result = DecodeResult(text="a < b", answer=None, vote_share=0.0, stop_reason="max_steps", prompt_tokens=1,
                          output_tokens=1, flops=0.0, steps=[step])
    page = render_trace_html(result)
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page and "a &lt; b" in page


def test_step_deficits_are_best_score_minus_score_over_unfinished_candidates():
    candidates = [
        Candidate(beam_index=0, text="a", step_logprob=-0.1, step_tokens=1, selected=True),
        Candidate(beam_index=0, text="b", step_logprob=-0.3, step_tokens=1, pruned=True),
        Candidate(beam_index=0, text="c", step_logprob=-0.2, step_tokens=1, pruned=True),
        Candidate(beam_index=0, text="d", step_logprob=-0.05, step_tokens=1, finished=True),
    ]
    # μ = -0.2, σ = 0.0816..., λ1 = 0.8: threshold -0.1347, c_prune = -0.1 + 0.1347 = 0.0347
    pruning = width_prune([-0.1, -0.3, -0.2], 0.8)
    assert pruning.c_prune == pytest.approx(0.0347, abs=1e-4) and pruning.keep.tolist() == [True, False, False]
    step = StepTrace(step=0, candidates=candidates, c_prune=0.0347)
    result = DecodeResult(text="", answer=None, vote_share=0.0, stop_reason="max_steps", prompt_tokens=0,
                          output_tokens=0, flops=0.0, steps=[step, StepTrace(step=1, candidates=candidates[3:])])
    [(t, deficits, pruned, selected, c_prune)] = step_deficits(result)
    assert t == 0 and deficits == pytest.approx([0.0, 0.2, 0.1]) and c_prune == 0.0347
    assert pruned == [False, True, True] and selected == [True, False, False]
    assert all((d > c_prune) == p for d, p in zip(deficits, pruned))


def test_plot_deficits_writes_a_png(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    path = plot_deficits(searched(), tmp_path / "figure" / "deficits.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = image.imread(path).shape
    assert width > 600 and height > 600
    empty = DecodeResult(text="", answer=None, vote_share=0.0, stop_reason="greedy", prompt_tokens=0,
                         output_tokens=0, flops=0.0, method="cot")
    with pytest.raises(ValueError, match=r"nothing to plot: the decode \(cot, 0 steps\)"):
        plot_deficits(empty, tmp_path / "x.png")


def test_live_view_prints_one_line_per_step_and_the_committed_reasoning():
    out = io.StringIO()
    view = LiveView(Console(file=out, width=40, color_system=None))
    events = []
    result = MFSEngine(synthetic_model(), SETTINGS.model_copy(update={"early_stopping": False})).decode(
        ["question 3?"], on_event=lambda e: (events.append(e), view(e))
    )[0]
    lines = out.getvalue().splitlines()
    step_lines = [line for line in lines if line.startswith("step ")]
    assert len(step_lines) == len(result.steps)
    assert all(len(line) > 40 for line in step_lines[:1])  # no wrapping at the console width
    assert lines[-1].startswith(f"stop: {result.stop_reason} after {len(result.steps)} steps; answer 7")
    committed = [line[len("    │ "):] for line in lines if line.startswith("    │ ")]
    assert "\n".join(committed) + "\n" == events[-2].committed
