"""The search trace of one decode as a self-contained HTML page (``mfs ask --trace-html``).

The page has no external assets (inline CSS, no script, no fonts or images to fetch): the
result's summary, the vote over the completed paths, a table of the steps (pruning
threshold, ``c_prune``, ``max V`` against ``ε_stop``) and the search tree: each candidate
under the beam it extends (``StepTrace.beam_sources``), marked selected, pruned, finished
or rolled out, with its step log-prob, ``F``, ``V`` and deficit. Collapsible with the
browser's own ``<details>``.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

from mfs_core.types import Candidate, DecodeResult, StepTrace

__all__ = ["render_trace_html", "write_trace_html"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:24px 0 8px}
.summary{display:flex;flex-wrap:wrap;gap:8px 24px;margin:8px 0}
.summary div{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:6px 10px}
.summary b{display:block;font-size:11px;color:#5b6473;font-weight:600;text-transform:uppercase}
.question,.answer-text{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 12px;white-space:pre-wrap}
table{border-collapse:collapse;background:#fff} th,td{border:1px solid #dde1e7;padding:3px 8px;text-align:right}
th{background:#f0f2f5;font-weight:600} td.l,th.l{text-align:left}
tr.chosen td{background:#e7f6ea;font-weight:600}
.converged{color:#1a7f37;font-weight:600}
.legend span{margin-right:14px}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:22px;border-left:1px dashed #c6ccd5}
ul.tree{padding-left:4px;border:none}
li.cand{margin:3px 0}
.node{display:inline-block;border:1px solid #c6ccd5;border-radius:5px;padding:2px 8px;background:#fff;max-width:900px}
.node .t{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap}
.node .n{color:#5b6473;font-size:12px;margin-left:8px}
.badge{display:inline-block;font-size:11px;font-weight:600;border-radius:3px;padding:0 5px;margin-right:6px;color:#fff}
.selected>.node,.selected>details>summary>.node{border:2px solid #1a7f37}
.selected .badge.s{background:#1a7f37}
.pruned>.node{background:#f3f4f6;color:#8a919c;border-style:dotted}
.pruned .badge.p{background:#9aa1ab}
.finished>.node,.finished>details>summary>.node{border-color:#0b5cad;background:#eef5fd}
.finished .badge.f{background:#0b5cad}
.scored .badge.r{background:#8250df}
.rollout{color:#5b6473;font-size:12px;margin:2px 0 0 22px;font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap}
summary{cursor:pointer}
"""


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    value = round(value, 3) + 0.0  # no "-0.000"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _node(cand: Candidate, step: int, index: int) -> tuple[str, str, str]:
    """CSS classes, box (badges, text, numbers) and data attributes of one candidate."""
    kinds = []
    badges = []
    if cand.selected:
        kinds.append("selected")
        badges.append('<span class="badge s">selected</span>')
    if cand.finished:
        kinds.append("finished")
        badges.append('<span class="badge f">finished</span>')
    if cand.pruned:
        kinds.append("pruned")
        badges.append('<span class="badge p">pruned</span>')
    if cand.step_value is not None:
        kinds.append("scored")
        badges.append('<span class="badge r">rolled out</span>')
    numbers = f"logp/tok {_fmt(cand.step_logprob)}"
    if cand.foresight_quality is not None and not cand.finished:
        numbers += f" · F {_fmt(cand.foresight_quality)}"
    if cand.step_value is not None:
        numbers += f" · V {_fmt(cand.step_value, signed=True)}"
    if cand.deficit is not None:
        numbers += f" · D {_fmt(cand.deficit)}"
    text = html.escape(cand.text) if cand.text.strip() else "<i>(empty)</i>"
    box = f'<span class="node">{"".join(badges)}<span class="t">{text}</span><span class="n">{numbers}</span></span>'
    classes = " ".join(["cand", *kinds])
    return classes, box, f'data-step="{step}" data-index="{index}"'


def _order(step: StepTrace, indices: Sequence[int]) -> list[int]:
    """Selected first, then by step value (rolled out), then pruned ones by score."""
    return sorted(
        indices,
        key=lambda k: (
            not step.candidates[k].selected,
            step.candidates[k].step_value is None,
            -(step.candidates[k].step_value or 0.0),
            -step.candidates[k].step_logprob,
        ),
    )


def _subtree(steps: Sequence[StepTrace], t: int, indices: Sequence[int]) -> str:
    """``<ul>`` of step ``t``'s candidates ``indices`` and, under each beam, its children."""
    if t >= len(steps) or not indices:
        return ""
    step = steps[t]
    nxt = steps[t + 1] if t + 1 < len(steps) else None
    items = []
    for k in _order(step, indices):
        cand = step.candidates[k]
        classes, box, data = _node(cand, t, k)
        children: list[int] = []
        if nxt is not None and step.beam_sources:
            beams = [b for b, source in enumerate(step.beam_sources) if source == k]
            children = [j for j, c in enumerate(nxt.candidates) if c.beam_index in beams]
        rollout = ""
        if cand.rollout:
            rollout = f'<div class="rollout">⤷ rollout: {html.escape(cand.rollout)}</div>'
        if children:
            inner = _subtree(steps, t + 1, children)
            items.append(f'<li class="{classes}" {data}><details open><summary>{box}</summary>{rollout}{inner}</details></li>')
        else:
            items.append(f'<li class="{classes}" {data}>{box}{rollout}</li>')
    return f'<ul class="{"tree" if t == 0 else ""}">{"".join(items)}</ul>'


def _tree(steps: Sequence[StepTrace]) -> str:
    """The search tree; steps without ``beam_sources`` are shown as flat lists per step."""
    if not steps:
        return "<p>No deliberation steps (the decoder does not search).</p>"
    linked = all(s.beam_sources or not any(c.selected and not c.finished for c in s.candidates) for s in steps[:-1])
    if linked:
        return _subtree(steps, 0, range(len(steps[0].candidates)))
    parts = []
    for t, step in enumerate(steps):
        items = []
        for k in _order(step, range(len(step.candidates))):
            classes, box, data = _node(step.candidates[k], t, k)
            items.append(f'<li class="{classes}" {data}>{box}</li>')
        parts.append(f'<h3>step {t}</h3><ul class="tree">{"".join(items)}</ul>')
    return "".join(parts)


def _steps_table(steps: Sequence[StepTrace]) -> str:
    head = (
        "<tr><th>step</th><th>sampled</th><th>finished</th><th>pruned</th><th>rolled out</th><th>selected</th>"
        "<th>μ</th><th>σ</th><th>μ + λ1·σ</th><th>c_prune</th><th>max V</th><th>ε_stop</th><th class=l>test</th></tr>"
    )
    rows = []
    for step in steps:
        scored = sum(c.step_value is not None for c in step.candidates)
        verdict = ""
        if step.max_step_value is not None and step.stop_epsilon is not None:
            passed = step.max_step_value <= step.stop_epsilon
            verdict = '<span class="converged">max V ≤ ε_stop: converged</span>' if step.converged else (
                "max V ≤ ε_stop" if passed else "max V > ε_stop: go on")
        rows.append(
            f"<tr><td>{step.step}</td><td>{len(step.candidates)}</td><td>{sum(c.finished for c in step.candidates)}</td>"
            f"<td>{step.num_pruned}</td><td>{scored}</td><td>{sum(c.selected for c in step.candidates)}</td>"
            f"<td>{_fmt(step.mean_score)}</td><td>{_fmt(step.std_score)}</td><td>{_fmt(step.prune_threshold)}</td>"
            f"<td>{_fmt(step.c_prune)}</td><td>{_fmt(step.max_step_value, signed=True)}</td>"
            f"<td>{step.stop_epsilon if step.stop_epsilon is not None else '–'}</td><td class=l>{verdict}</td></tr>"
        )
    return f'<table id="steps">{head}{"".join(rows)}</table>'


def _vote_table(result: DecodeResult) -> str:
    answers = result.completion_answers or [None] * len(result.completions)
    counts = Counter(answers)
    total = len(answers) or 1
    best: dict[str | None, float] = {}
    for answer, quality in zip(answers, result.completion_qualities):
        best[answer] = max(best.get(answer, float("-inf")), quality)
    rows = []
    for answer, count in counts.most_common():
        chosen = ' class="chosen"' if answer == result.answer else ""
        label = html.escape(answer) if answer is not None else "<i>no answer</i>"
        rows.append(
            f"<tr{chosen}><td class=l>{label}</td><td>{count}</td><td>{count / total:.0%}</td>"
            f"<td>{_fmt(best.get(answer))}</td></tr>"
        )
    head = "<tr><th class=l>answer</th><th>paths</th><th>share</th><th>best F</th></tr>"
    return f'<table id="vote">{head}{"".join(rows)}</table>'


def render_trace_html(result: DecodeResult, *, question: str | None = None, title: str = "MFS search trace") -> str:
    """The page of one decode's search.

    Args:
        result: the decode (its ``steps`` give the tree; ``completion_answers`` the vote).
        question: the question to show at the top (optional).
        title: the page title.

    Returns:
        One HTML document (UTF-8 text) that loads nothing else.
    """
    summary = [
        ("answer", html.escape(str(result.answer))),
        ("vote share", f"{result.vote_share:.0%} of {len(result.completions)} paths"),
        ("stop reason", html.escape(result.stop_reason)),
        ("steps", str(len(result.steps))),
        ("tokens", f"{result.prompt_tokens} prompt · {result.output_tokens} output"),
        ("FLOPs (6·n·P)", f"{result.flops:.3e}"),
        ("wall time", f"{result.wall_seconds:.2f} s" if result.wall_seconds is not None else "–"),
        ("method", html.escape(result.method)),
    ]
    cards = "".join(f"<div><b>{name}</b>{value}</div>" for name, value in summary)
    question_html = f'<h2>Question</h2><div class="question">{html.escape(question)}</div>' if question else ""
    legend = (
        '<p class="legend"><span class="selected"><span class="badge s">selected</span>kept as a beam (or a finished path)</span>'
        '<span class="scored"><span class="badge r">rolled out</span>survived pruning, has F and V</span>'
        '<span class="pruned"><span class="badge p">pruned</span>score below μ + λ1·σ (deficit over c_prune)</span>'
        '<span class="finished"><span class="badge f">finished</span>closed its answer</span></p>'
        "<p>logp/tok: the step's mean log-prob (nats/token); F: foresight quality (nats/token); "
        "V = F − F(parent) (eq. 8); D = F_best − F (eq. 9).</p>"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><div class=\"summary\">{cards}</div>{question_html}"
        f'<h2>Chosen path</h2><div class="answer-text">{html.escape(result.text)}</div>'
        f"<h2>The vote</h2>{_vote_table(result)}"
        f"<h2>Steps</h2>{_steps_table(result.steps)}"
        f'<h2>Search tree</h2>{legend}<div id="tree">{_tree(result.steps)}</div>'
        "</body></html>\n"
    )


def write_trace_html(result: DecodeResult, path: str, *, question: str | None = None) -> None:
    """Write :func:`render_trace_html` to ``path`` (UTF-8).

    Raises:
        OSError: the file cannot be written.
    """
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_trace_html(result, question=question))
