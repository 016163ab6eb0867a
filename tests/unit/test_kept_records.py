"""docs/benchmarks.md's Qwen GSM8K tables against the records kept in benchmarks/results/.

Each row's accuracy, 95% Wilson interval, output tokens per question, wall seconds, each hundred's
counts and `mfs`'s paired counts with their exact McNemar p are recomputed from ``records.jsonl``, read
by the report's ``load_run`` and summed by its functions (:func:`mfs_core.bench.report.summarize`,
:func:`mfs_core.bench.report.paired_comparisons`), so a table cannot drift from the records behind it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mfs_core.bench.curve import curve_records
from mfs_core.bench.report import paired_comparisons, summarize
from tests.unit.test_issue35_report import _report_module

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
BENCHMARKS = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")

# a table's first header cell in docs/benchmarks.md -> the run folders its rows are computed from
TABLES = {
    "method (GSM8K test 200-299, kept records)": ("issue43-qwen",),
    "method (GSM8K test 200-399, kept records)": ("issue43-qwen", "issue43-qwen-300"),
    "method (GSM8K test 200-499, kept records)": ("issue43-qwen", "issue43-qwen-300", "issue43-qwen-400"),
}
# a run folder -> the column of a pooled table that holds its hundred's correct answers
HUNDREDS = {"issue43-qwen": "200-299", "issue43-qwen-300": "300-399", "issue43-qwen-400": "400-499"}
# a row's first cell -> the method label of its records
LABELS = {
    "greedy CoT": "cot", "SC T = 0.5, k = 16": "sc-t0.5", "`mfs` (M = N = 4)": "mfs", "`mfs` (M = N = 2)": "mfs-m2",
    "ESC (w = 4, ≤ 16)": "esc", "DeepConf online (≤ 16)": "deepconf", "`mfs-paper`": "mfs-paper",
    "SC T = 0.7, k = 16": "sc", "φ-Decoding": "phi",
}


# the φ paragraph's name for a method -> its records' label
PHI_COMPARED = {"SC at T = 0.7": "sc", "SC at T = 0.5": "sc-t0.5", "DeepConf": "deepconf", "ESC": "esc",
                "greedy CoT": "cot", "`mfs`": "mfs",
                "`mfs-paper`": "mfs-paper", "`mfs` at M = N = 2": "mfs-m2"}
_NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()
# a column of SC at the k spending a method's tokens -> the records' label of that SC curve
SC_COLUMNS = {"SC T = 0.5 at its tokens: acc · only it / only SC · p": "sc-t0.5",
              "SC T = 0.7 at its tokens: acc · only it / only SC · p": "sc"}


def _records(*folders: str) -> list[dict]:
    """The folders' records, read (and pooled) by the report's own ``load_run``."""
    return _report_module().load_run(*(RESULTS / folder for folder in folders))[0]


def _assert_p(cell: str, p_value: float, label: str) -> None:
    """The exact McNemar p as rounded in a table cell (``0.039``, ``1.0``, ``< 0.001``)."""
    if cell == "< 0.001":
        assert p_value < 0.001, label
        return
    decimals = len(cell.partition(".")[2])
    assert abs(float(cell) - p_value) <= 0.5 * 10 ** -decimals + 1e-12, label  # exact halves (5/8) either way


def _table(first_header_cell: str) -> dict[str, dict[str, str]]:
    """``{row label: {column header: cell}}`` of the Markdown table whose header starts with the cell."""
    lines = BENCHMARKS.split(f"\n| {first_header_cell} |", 1)[1].split("\n\n", 1)[0].splitlines()
    header = [first_header_cell] + [c.strip() for c in lines[0].strip().strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


@pytest.mark.parametrize("first_header_cell", sorted(TABLES))
def test_every_row_is_recomputed_from_the_kept_records(first_header_cell):
    records = _records(*TABLES[first_header_cell])
    rows = _table(first_header_cell)
    assert set(rows) <= set(LABELS) and "`mfs` (M = N = 4)" in rows
    pairs = {c.other: c for c in paired_comparisons(records, "mfs")}
    for label, cells in rows.items():
        method = LABELS[label]
        summary = summarize(records, [method])[0]
        accuracy = (f"{100 * summary.accuracy:.1f} ({100 * summary.accuracy_low:.1f}-"
                    f"{100 * summary.accuracy_high:.1f})")
        assert cells["accuracy % (95% CI)"] == accuracy, label
        assert cells["output tokens/q"] == f"{summary.mean_output_tokens:,.0f}", label
        if "wall s/q" in cells:  # seconds of the method's decodes per question (16 in flight)
            assert cells["wall s/q"] == f"{summary.wall_seconds / summary.questions:.1f}", label
        for folder in TABLES[first_header_cell]:
            if (column := HUNDREDS[folder]) in cells:  # the pooled table: each hundred's correct answers
                part = summarize(_records(folder), [method])[0]
                assert cells[column] == f"{part.correct}/{part.questions}", label
        if method != "mfs":
            pair = pairs[method]
            counts, p_value = cells["`mfs` only / other only · p"].split(" · ")
            assert counts == f"{pair.only_method} / {pair.only_other}", label
            _assert_p(p_value, pair.p_value, label)
        for column, curve in SC_COLUMNS.items():  # SC at the k spending the method's tokens, paired
            if not cells.get(column):
                continue
            k, sc_row, sc_pair = _report_module().curve_match(records, "gsm", method, summary.mean_output_tokens,
                                                              curve)
            matched, counts, p_value = cells[column].split(" · ")
            assert matched == f"k = {k}: {100 * sc_row.accuracy:.1f}%", (label, column)
            assert counts == f"{sc_pair.only_method} / {sc_pair.only_other}", (label, column)
            _assert_p(p_value, sc_pair.p_value, label)


def test_readme_quotes_the_pooled_records():
    """README's Qwen sentence: each method's correct answers over GSM8K test 200-499 and ESC against `mfs`."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"\(\[300 held-out questions\]\[qwen43\]\) `mfs` answered (\d+) \(CoT (\d+)\), ESC (\d+) "
                       r"\((\d+) / (\d+), p (?:= )?(< 0\.001|[\d.]+)\), DeepConf (\d+), SC "
                       r"at k = 16 (\d+) \(T = 0\.5\) and (\d+) \(T = 0\.7\)\.", readme)
    assert quoted, "README's Qwen sentence changed shape"
    records = _records(*TABLES["method (GSM8K test 200-499, kept records)"])
    methods = ["mfs", "cot", "esc", "deepconf", "sc-t0.5", "sc"]
    correct = {row.method: row.correct for row in summarize(records, methods)}
    assert all(row.questions == 300 for row in summarize(records, list(correct)))
    esc = next(c for c in paired_comparisons(records, "mfs") if c.other == "esc")
    # ESC's pair is quoted as "only it / only mfs"
    mfs, cot, esc_correct, only_esc, only_mfs, p_value, deepconf, cool, warm = quoted.groups()
    assert [int(mfs), int(cot), int(esc_correct), int(deepconf), int(cool), int(warm)] == [
        correct["mfs"], correct["cot"], correct["esc"], correct["deepconf"], correct["sc-t0.5"], correct["sc"]]
    assert (int(only_mfs), int(only_esc)) == (esc.only_method, esc.only_other)
    _assert_p(p_value, esc.p_value, "README")


def test_the_300_question_sentence_quotes_the_pooled_records():
    """docs' sentence under the 200-499 table: ESC's margin over `mfs` and CoT, with its paired counts."""
    text = " ".join(BENCHMARKS.split())
    quoted = re.search(r"level with greedy decoding \((\d+) against (\d+)\) at ([\d.]+) times its tokens, and ESC "
                       r"answers (\d+) more than `mfs` \((\d+) / (\d+), p < 0\.001\) and (\d+) more than CoT "
                       r"\((\d+) / (\d+), p < 0\.001\)", text)
    assert quoted, "the 300-question sentence changed shape"
    records = _records(*TABLES["method (GSM8K test 200-499, kept records)"])
    rows = {row.method: row for row in summarize(records, ["mfs", "cot", "esc"])}
    assert all(row.questions == 300 for row in rows.values())
    mfs, cot, ratio, over_mfs, esc_mfs, mfs_esc, over_cot, esc_cot, cot_esc = quoted.groups()
    assert (int(mfs), int(cot)) == (rows["mfs"].correct, rows["cot"].correct)
    assert ratio == f"{rows['mfs'].mean_output_tokens / rows['cot'].mean_output_tokens:.1f}"
    assert int(over_mfs) == rows["esc"].correct - rows["mfs"].correct
    assert int(over_cot) == rows["esc"].correct - rows["cot"].correct
    pairs = {c.other: c for c in paired_comparisons(records, "esc")}
    for other, only_esc, only_other in (("mfs", esc_mfs, mfs_esc), ("cot", esc_cot, cot_esc)):
        assert (int(only_esc), int(only_other)) == (pairs[other].only_method, pairs[other].only_other), other
        assert pairs[other].p_value < 0.001, other


def test_what_the_300_questions_show_quotes_the_records():
    """docs' "What the 300 questions show": each hundred's counts, the voting methods' pairs, savings and stops."""
    flat = " ".join(BENCHMARKS.split())
    text = flat[flat.index("**What the 300 questions show**"):][:2500]
    records = _records(*TABLES["method (GSM8K test 200-499, kept records)"])
    methods = {"CoT": "cot", "`mfs`": "mfs", "ESC": "esc", "DeepConf": "deepconf", "SC at T = 0.5": "sc-t0.5",
               "SC at T = 0.7": "sc", "`mfs` at M = N = 2": "mfs-m2"}
    hundreds = re.search(r"repeats the first two for every method \((.+?)\)", text)
    assert hundreds, "the per-hundred sentence changed shape"
    for quoted in hundreds.group(1).split("; "):  # "CoT 25, 25, 29"
        name, *counts = re.fullmatch(r"(.+) (\d+), (\d+), (\d+)", quoted).groups()
        expected = [summarize(_records(folder), [methods[name]])[0].correct
                    for folder in TABLES["method (GSM8K test 200-499, kept records)"]]
        assert [int(c) for c in counts] == expected, name
    pairs = {(a, c.other): c for a in ("sc-t0.5", "esc", "deepconf") for c in paired_comparisons(records, a)}
    quoted = re.search(r"ESC against DeepConf (\d+) / (\d+), p = ([\d.]+)\) and each is above greedy decoding "
                       r"\(SC at k = 16 (\d+) / (\d+) at T = 0\.5 and (\d+) / (\d+) at T = 0\.7, ESC (\d+) / (\d+), "
                       r"p < 0\.001; DeepConf (\d+) / (\d+), p = ([\d.]+)\)", text)
    assert quoted, "the voting methods' sentence changed shape"
    esc_dc, dc_esc, p_esc_dc, sc_cot, cot_sc, warm_cot, cot_warm, esc_cot, cot_esc, dc_cot, cot_dc, p_dc_cot = (
        quoted.groups())
    warm = next(iter(paired_comparisons(curve_records(records, "gsm", [16], "sc")
                                        + [r for r in records if r["method"] == "cot"], "sc@16")))
    assert (int(warm_cot), int(cot_warm)) == (warm.only_method, warm.only_other) and warm.p_value < 0.001
    quoted_pairs = {("esc", "deepconf"): (esc_dc, dc_esc), ("sc-t0.5", "cot"): (sc_cot, cot_sc),
                    ("esc", "cot"): (esc_cot, cot_esc), ("deepconf", "cot"): (dc_cot, cot_dc)}
    for (method, other), (only_it, only_other) in quoted_pairs.items():
        pair = pairs[(method, other)]
        assert (int(only_it), int(only_other)) == (pair.only_method, pair.only_other), (method, other)
    assert pairs[("sc-t0.5", "cot")].p_value < 0.001 and pairs[("esc", "cot")].p_value < 0.001
    _assert_p(p_esc_dc, pairs[("esc", "deepconf")].p_value, "ESC against DeepConf")
    _assert_p(p_dc_cot, pairs[("deepconf", "cot")].p_value, "DeepConf against CoT")
    tokens = {method: summarize(records, [method])[0].mean_output_tokens for method in ("mfs", "esc", "deepconf")}
    at_tokens = {(method, curve): _report_module().curve_match(records, "gsm", method, tokens[method], curve)
                 for method in tokens for curve in ("sc-t0.5", "sc")}
    below = re.search(r"below self-consistency at its own tokens \(SC at T = 0\.5, k = (\d+), ([\d.]+)%: "
                      r"(\d+) / (\d+), p = ([\d.]+); at T = 0\.7, k = (\d+), ([\d.]+)%: (\d+) / (\d+), "
                      r"p = ([\d.]+)\)", text)
    level = re.search(r"ESC against SC at its tokens (\d+) / (\d+) at T = 0\.5 and (\d+) / (\d+) at T = 0\.7, DeepConf "
                      r"(\d+) / (\d+) and (\d+) / (\d+),", text)
    assert below and level, "the sentences on SC at its tokens changed shape"
    for curve, quoted_match in (("sc-t0.5", below.groups()[:5]), ("sc", below.groups()[5:])):
        k, sc_row, sc_pair = at_tokens[("mfs", curve)]
        assert quoted_match[:4] == (str(k), f"{100 * sc_row.accuracy:.1f}", str(sc_pair.only_method),
                                    str(sc_pair.only_other)), curve
        _assert_p(quoted_match[4], sc_pair.p_value, curve)
    expected_level = [at_tokens[(method, curve)][2] for method, curve in (
        ("esc", "sc-t0.5"), ("esc", "sc"), ("deepconf", "sc-t0.5"), ("deepconf", "sc"))]
    assert [int(count) for count in level.groups()] == [
        count for pair in expected_level for count in (pair.only_method, pair.only_other)]
    assert all(pair.p_value >= 0.05 for pair in expected_level)
    rows = {row.method: row for row in summarize(records, ["esc", "deepconf", "sc-t0.5"])}
    saving = re.search(r"ESC and DeepConf spend (\d+)% and (\d+)% fewer tokens than SC at k = 16 \(T = 0\.5\)", text)
    assert saving, "the savings sentence changed shape"
    for method, quoted_percent in zip(("esc", "deepconf"), saving.groups(), strict=True):
        fewer = 100 * (1 - rows[method].mean_output_tokens / rows["sc-t0.5"].mean_output_tokens)
        assert int(quoted_percent) == round(fewer), method
    stops = re.search(r"ESC on (\d+) of 300 questions, DeepConf on (\d+)\).+?stopped it on (\d+) of the 300 "
                      r"questions, after ([\d.]+) steps on average", text)
    assert stops, "the stops sentence changed shape"

    def _stopped(method: str, reason: str) -> int:
        return sum(r["method"] == method and r.get("stop_reason") == reason for r in records)

    mfs_steps = [r["steps"] for r in records if r["method"] == "mfs"]
    assert [int(stops.group(1)), int(stops.group(2)), int(stops.group(3))] == [
        _stopped("esc", "unanimous_window"), _stopped("deepconf", "consensus"), _stopped("mfs", "converged")]
    assert stops.group(4) == f"{sum(mfs_steps) / len(mfs_steps):.2f}" and len(mfs_steps) == 300


def test_the_300_question_curve_and_smaller_search_quote_the_records():
    """docs' sentences under the 200-499 table: `mfs` at M = N = 2 against CoT, and SC's curve over the 300."""
    flat = " ".join(BENCHMARKS.split())
    records = _records(*TABLES["method (GSM8K test 200-499, kept records)"])
    smaller = re.search(r"`mfs` at M = N = 2, answers (\d+) of 300, below CoT by (\d+) / (\d+) \(p = ([\d.]+)\) at "
                        r"([\d.]+) times its tokens", flat)
    assert smaller, "the smaller search's sentence changed shape"
    rows = {row.method: row for row in summarize(records, ["mfs-m2", "cot"])}
    pair = next(c for c in paired_comparisons(records, "mfs-m2") if c.other == "cot")
    assert int(smaller.group(1)) == rows["mfs-m2"].correct and rows["mfs-m2"].questions == 300
    assert (int(smaller.group(2)), int(smaller.group(3))) == (pair.only_method, pair.only_other)
    _assert_p(smaller.group(4), pair.p_value, "mfs-m2 against CoT")
    assert smaller.group(5) == f"{rows['mfs-m2'].mean_output_tokens / rows['cot'].mean_output_tokens:.1f}"
    curves = {}
    for temperature, sc_curve in (("0.5", "sc-t0.5"), ("0.7", "sc")):
        curve = re.search(rf"Self-consistency's curve at T = {re.escape(temperature)} over the 300: k = 1, 2, 4, 8, 16 "
                          r"answer ([\d., ]+)% at ([\d, ]+) output tokens per question", flat)
        assert curve, f"the 300-question curve sentence at T = {temperature} changed shape"
        points = [p.summary for p in _report_module().curve_table(records, "gsm", [sc_curve]) if p.sc_curve == sc_curve]
        assert [p.method for p in points] == [f"{sc_curve}@{k}" for k in (1, 2, 4, 8, 16)]
        assert all(p.questions == 300 for p in points)
        assert curve.group(1) == ", ".join(f"{100 * p.accuracy:.1f}" for p in points)
        assert curve.group(2) == ", ".join(f"{p.mean_output_tokens:,.0f}" for p in points)
        curves[sc_curve] = [p.accuracy for p in points]
    assert ("The cooler T = 0.5, chosen on 96 tuning questions, votes better at k = 1-4 and worse at k = 8 and 16"
            in flat)
    assert [cool > warm for cool, warm in zip(curves["sc-t0.5"], curves["sc"], strict=True)] == [True] * 3 + [False] * 2
    temperatures = next(iter(paired_comparisons(curve_records(records, "gsm", [16], "sc")
                                                + curve_records(records, "gsm", [16], "sc-t0.5"), "sc@16")))
    assert "neither temperature is significantly ahead" in flat and temperatures.p_value >= 0.05
    single = re.search(r"greedy decoding is above a single sample at T = 0\.7 \((\d+) / (\d+), p = ([\d.]+);", flat)
    assert single, "the greedy against one sample sentence changed shape"
    pair = next(iter(paired_comparisons([r for r in records if r["method"] == "cot"]
                                        + curve_records(records, "gsm", [1], "sc"), "cot")))
    assert (int(single.group(1)), int(single.group(2))) == (pair.only_method, pair.only_other)
    _assert_p(single.group(3), pair.p_value, "greedy against one sample at T = 0.7")


def test_the_mfs_paper_paragraph_quotes_the_records():
    """docs' `mfs-paper` paragraph (GSM8K test 200-299): its row, stops, steps and pairs (φ's: the φ table)."""
    flat = " ".join(BENCHMARKS.split())
    text = flat[flat.index("**The paper's MFS, `mfs-paper`, on 200-299**"):][:1600]
    records = _records("issue43-qwen")
    rows = {row.method: row for row in summarize(records, ["mfs-paper", "mfs"])}
    paper = rows["mfs-paper"]
    head = re.search(r"answered \*\*(\d+)/(\d+)\*\* \(([\d.]+)-([\d.]+)%\) at ([\d,]+) output tokens and ([\d.]+) s "
                     r"per question \(16 in flight\), ([\d.]+) times the default `mfs`'s tokens", text)
    assert head, "the paragraph's first sentence changed shape"
    assert head.groups() == (str(paper.correct), str(paper.questions), f"{100 * paper.accuracy_low:.1f}",
                             f"{100 * paper.accuracy_high:.1f}", f"{paper.mean_output_tokens:,.0f}",
                             f"{paper.wall_seconds / paper.questions:.1f}",
                             f"{paper.mean_output_tokens / rows['mfs'].mean_output_tokens:.1f}")
    stops = re.search(r"convergence on (\d+) questions, reached `max_steps` on (\d+) and a full finished pool on "
                      r"(\d+), after ([\d.]+) steps on average \(the default: ([\d.]+)\)", text)
    assert stops, "the stops sentence changed shape"
    mine = [r for r in records if r["method"] == "mfs-paper"]
    reasons = [sum(r["stop_reason"] == reason for r in mine) for reason in ("converged", "max_steps",
                                                                            "finished_pool_full")]
    assert [int(n) for n in stops.groups()[:3]] == reasons and sum(reasons) == len(mine) == 100
    for method, quoted in (("mfs-paper", stops.group(4)), ("mfs", stops.group(5))):
        steps = [r["steps"] for r in records if r["method"] == method]
        assert quoted == f"{sum(steps) / len(steps):.2f}", method
    pairs = {c.other: c for c in paired_comparisons(records, "mfs-paper")}
    names = {"greedy CoT": "cot", "the default `mfs`": "mfs", "ESC": "esc", "DeepConf": "deepconf"}
    for name, method in names.items():
        quoted = re.search(rf"against {re.escape(name)} (\d+) / (\d+) \(p = ([\d.]+)\)", text)
        assert quoted, name
        assert (int(quoted.group(1)), int(quoted.group(2))) == (pairs[method].only_method, pairs[method].only_other)
        _assert_p(quoted.group(3), pairs[method].p_value, name)
    sc = re.search(r"against SC at T = 0\.5 at k = (\d+) \(([\d.]+)%, fewer tokens than its own\) (\d+) / (\d+) "
                   r"\(p = ([\d.]+)\)", text)
    assert sc, "the SC sentence changed shape"
    k, sc_row, sc_pair = _report_module().curve_match(records, "gsm", "mfs-paper", paper.mean_output_tokens, "sc-t0.5")
    assert sc.groups()[:4] == (str(k), f"{100 * sc_row.accuracy:.1f}", str(sc_pair.only_method),
                               str(sc_pair.only_other))
    assert sc_row.mean_output_tokens < paper.mean_output_tokens
    _assert_p(sc.group(5), sc_pair.p_value, "SC")


def _assert_t07_curve(text: str, records: list[dict]) -> None:
    """A T = 0.7 paragraph's curve (accuracy, counts, tokens at k = 1-16), seconds, and T = 0.7 against T = 0.5 at
    k = 16, recomputed from the hundred's records."""
    curve = re.search(r"k = 1, 2, 4, 8, 16 answer ([\d.]+), ([\d.]+), ([\d.]+), ([\d.]+), \*\*([\d.]+)%\*\* "
                      r"\((\d+), (\d+), (\d+), (\d+), (\d+) of (\d+)\) at ([\d,]+), ([\d,]+), ([\d,]+), ([\d,]+), "
                      r"([\d,]+) output tokens per question and ([\d.]+) s per question", text)
    assert curve, "the T = 0.7 curve sentence changed shape"
    ks = (1, 2, 4, 8, 16)
    points = summarize(curve_records(records, "gsm", ks, "sc"), [f"sc@{k}" for k in ks])
    assert curve.groups()[:16] == (*(f"{100 * point.accuracy:.1f}" for point in points),
                                   *(str(point.correct) for point in points), str(points[0].questions),
                                   *(f"{point.mean_output_tokens:,.0f}" for point in points))
    sc = summarize(records, ["sc"])[0]
    assert curve.group(17) == f"{sc.wall_seconds / sc.questions:.1f}"
    versus = re.search(r"against T = 0\.5 at k = 16 \(([\d.]+)%\), question by question: (\d+) / (\d+) "
                       r"\(p = ([\d.]+)\)", text)
    assert versus, "the T = 0.7 against T = 0.5 sentence changed shape"
    pool = curve_records(records, "gsm", [16], "sc") + curve_records(records, "gsm", [16], "sc-t0.5")
    pair = next(iter(paired_comparisons(pool, "sc@16")))
    cooler = summarize(pool, ["sc-t0.5@16"])[0]
    assert versus.groups()[:3] == (f"{100 * cooler.accuracy:.1f}", str(pair.only_method), str(pair.only_other))
    _assert_p(versus.group(4), pair.p_value, "T = 0.7 against T = 0.5")


def _assert_pairs_with_t07(text: str, records: list[dict], names: dict[str, str]) -> dict:
    """Each quoted "NAME [is] a / b at k = K (p = …)" against T = 0.7's curve at the k spending the method's tokens,
    recomputed from the records; returns {method: (k, SC row, pair)}."""
    pairs_07 = {}
    for name, method in names.items():
        found = re.search(rf"{re.escape(name)} (?:is )?(\d+) / (\d+) at k = (\d+) \(p (?:= )?([\d.]+|< 0\.001)\)", text)
        assert found, name
        tokens = summarize(records, [method])[0].mean_output_tokens
        k, _, sc_pair = pairs_07[method] = _report_module().curve_match(records, "gsm", method, tokens, "sc")
        assert found.groups()[:3] == (str(sc_pair.only_method), str(sc_pair.only_other), str(k)), name
        _assert_p(found.group(4), sc_pair.p_value, name)
    return pairs_07


def test_the_t07_paragraph_quotes_the_kept_sc_records():
    """docs' paragraph on SC at T = 0.7 with kept records (200-299): its curve, T = 0.7 against T = 0.5, and each
    search against T = 0.7's curve at its tokens."""
    flat = " ".join(BENCHMARKS.split())
    text = flat[flat.index("**Self-consistency at T = 0.7 with kept records**"):][:2000]
    records = _records("issue43-qwen")
    _assert_t07_curve(text, records)
    pairs_07 = _assert_pairs_with_t07(text, records, {"`mfs`": "mfs", "`mfs-paper`": "mfs-paper", "ESC": "esc",
                                                      "DeepConf": "deepconf"})
    assert "both MFS searches significantly below plain voting at T = 0.7, ESC and DeepConf level with it" in text
    below = re.search(r"`mfs` is level with greedy decoding and below every voting method at equal tokens "
                      r"\(significantly below ESC, p = ([\d.]+), and SC at T = 0\.7 at its tokens, "
                      r"p = ([\d.]+)\)", flat)
    assert below, "the sentence under the kept-records table changed shape"
    _assert_p(below.group(1), next(c for c in paired_comparisons(records, "mfs") if c.other == "esc").p_value, "ESC")
    _assert_p(below.group(2), pairs_07["mfs"][2].p_value, "SC at T = 0.7")
    assert all(pairs_07[m][2].p_value < 0.05 and pairs_07[m][2].only_method < pairs_07[m][2].only_other
               for m in ("mfs", "mfs-paper"))
    assert all(pairs_07[m][2].p_value >= 0.05 for m in ("esc", "deepconf"))


@pytest.mark.parametrize(("hundred", "pooled"), [("300-399", "200-399"), ("400-499", "200-499")])
def test_a_later_hundreds_t07_paragraph_quotes_the_records(hundred, pooled):
    """docs' paragraph on SC at T = 0.7 on 300-399 (400-499): its curve, T = 0.7 against T = 0.5 there and over
    200-399 (200-499), and each search against T = 0.7's curve at its tokens over the pooled questions."""
    flat = " ".join(BENCHMARKS.split())
    text = flat[flat.index(f"**Self-consistency at T = 0.7 on {hundred}**"):][:2500]
    folder = next(folder for folder, span in HUNDREDS.items() if span == hundred)
    _assert_t07_curve(text.split("Over the ")[0], _records(folder))
    records = _records(*TABLES[f"method (GSM8K test {pooled}, kept records)"])
    over = re.search(rf"Over the (\d+) questions of {pooled} \(the table above\), SC at T = 0\.7 and k = 16 answers "
                     r"(\d+) against T = 0\.5's (\d+) \((\d+) / (\d+), p = ([\d.]+)\)", text)
    assert over, "the pooled T = 0.7 sentence changed shape"
    pool = curve_records(records, "gsm", [16], "sc") + curve_records(records, "gsm", [16], "sc-t0.5")
    pair = next(iter(paired_comparisons(pool, "sc@16")))
    warm, cool = summarize(pool, ["sc@16", "sc-t0.5@16"])
    assert over.groups()[:5] == (str(warm.questions), str(warm.correct), str(cool.correct), str(pair.only_method),
                                 str(pair.only_other))
    assert warm.questions == 100 * len(TABLES[f"method (GSM8K test {pooled}, kept records)"])
    _assert_p(over.group(6), pair.p_value, f"T = 0.7 against T = 0.5 over {pooled}")
    pairs_07 = _assert_pairs_with_t07(text[text.index("Over the "):], records, {
        "`mfs`": "mfs", "ESC": "esc", "DeepConf": "deepconf", "`mfs` at M = N = 2": "mfs-m2"})
    assert "as against T = 0.5's curve, `mfs` is significantly below plain voting, ESC and DeepConf level" in text
    mfs_pair = pairs_07["mfs"][2]
    assert mfs_pair.p_value < 0.05 and mfs_pair.only_method < mfs_pair.only_other
    assert all(pairs_07[m][2].p_value >= 0.05 for m in ("esc", "deepconf"))


PHI_TABLE = "method (GSM8K test 200-299, φ's "


def test_the_phi_table_is_recomputed_on_phis_questions():
    """docs' φ table: every method on the questions φ ran (200-299), FLOPs over φ's and φ's pairs on them."""
    first = next(line for line in BENCHMARKS.splitlines() if line.startswith(f"| {PHI_TABLE}"))
    header_cell = first.split(" | ")[0].removeprefix("| ")
    records = _report_module().questions_of(_records("issue43-qwen"), "phi")
    asked = {r["index"] for r in records}
    assert header_cell == f"{PHI_TABLE}{len(asked)} questions)"
    labels = LABELS
    rows = _table(header_cell)
    assert set(rows) == set(labels)
    phi_flops = sum(r["flops"] for r in records if r["method"] == "phi")
    pairs = {c.other: c for c in paired_comparisons(records, "phi")}
    for label, cells in rows.items():
        method = labels[label]
        summary = summarize(records, [method])[0]
        assert summary.questions == len(asked), label
        assert cells["accuracy % (95% CI)"] == (f"{100 * summary.accuracy:.1f} ({100 * summary.accuracy_low:.1f}-"
                                                f"{100 * summary.accuracy_high:.1f})"), label
        assert cells["correct"] == f"{summary.correct}/{summary.questions}", label
        assert cells["output tokens/q"] == f"{summary.mean_output_tokens:,.0f}", label
        assert cells["FLOPs ÷ φ's"] == f"{summary.total_flops / phi_flops:.2f}", label
        if method == "phi":
            assert cells["φ only / other only · p"] == "", label
            continue
        counts, p_value = cells["φ only / other only · p"].split(" · ")
        assert counts == f"{pairs[method].only_method} / {pairs[method].only_other}", label
        _assert_p(p_value, pairs[method].p_value, label)


def _relation(count: int, other: int) -> str:
    """How ``count`` correct answers stand against ``other`` in the docs' words: "level with", "two above"."""
    gap = count - other
    return "level with" if gap == 0 else f"{_NUMBER_WORDS[abs(gap)]} {'above' if gap > 0 else 'below'}"


def test_the_phi_paragraph_quotes_the_records():
    """docs' sentences under the φ table: tokens range, φ against each method, FLOPs shares, sessions, stops."""
    flat = " ".join(BENCHMARKS.split())
    text = flat[flat.index("**φ-Decoding on GSM8K test 200-299**"):][:4000]
    records = _report_module().questions_of(_records("issue43-qwen"), "phi")
    phi = [r for r in records if r["method"] == "phi"]
    span = re.search(r"takes ([\d,]+)-([\d,]+) output tokens", text)
    assert span and span.groups() == (f"{min(r['output_tokens'] for r in phi):,}",
                                      f"{max(r['output_tokens'] for r in phi):,}")
    rows = {row.method: row for row in summarize(records, ["phi", *PHI_COMPARED.values()])}
    pairs = {c.other: c for c in paired_comparisons(records, "phi")}
    head = re.search(r"On these (\d+) φ answered (\d+): ", text)
    assert head and head.groups() == (str(len(phi)), str(rows["phi"].correct))
    for name, method in PHI_COMPARED.items():  # "two above greedy CoT (12; 8 / 6, p = 0.79)"
        found = re.search(rf"(level with|\w+ above|\w+ below) {re.escape(name)} \((\d+); (\d+) / (\d+), "
                          r"p = ([\d.]+|< 0\.001)\)", text)
        assert found, name
        assert found.groups()[:4] == (_relation(rows["phi"].correct, rows[method].correct), str(rows[method].correct),
                                      str(pairs[method].only_method), str(pairs[method].only_other)), name
        _assert_p(found.group(5), pairs[method].p_value, name)
    ratio = re.search(r"SC at T = 0\.7 \([^)]*\) at ([\d.]+) times its tokens", text)
    assert ratio and ratio.group(1) == f"{rows['phi'].mean_output_tokens / rows['sc'].mean_output_tokens:.1f}"
    assert ("No difference is significant" in text) == all(c.p_value >= 0.05 for c in pairs.values())
    verdict = re.search(r"φ is significantly above `mfs-paper` and `mfs` at M = N = 2 and (\w+) above the default "
                        r"`mfs` \(p = ([\d.]+)\), but it is not above the voting methods \(SC at T = 0\.7 and 0\.5, "
                        r"ESC and DeepConf within (\w+) questions either way, p ≥ ([\d.]+)\), which spend under a "
                        r"quarter of its FLOPs", text)
    assert verdict, "the sentence on what the φ table shows changed shape"
    assert all(pairs[m].p_value < 0.05 and rows["phi"].correct > rows[m].correct for m in ("mfs-paper", "mfs-m2"))
    assert verdict.group(1) == _relation(rows["phi"].correct, rows["mfs"].correct).split()[0]
    _assert_p(verdict.group(2), pairs["mfs"].p_value, "mfs")
    voting = ("sc", "sc-t0.5", "esc", "deepconf")
    assert max(abs(rows["phi"].correct - rows[m].correct) for m in voting) == _NUMBER_WORDS.index(verdict.group(3))
    assert all(pairs[m].p_value >= float(verdict.group(4)) for m in voting) and float(verdict.group(4)) >= 0.05
    assert not any(rows["phi"].correct > rows[m].correct and pairs[m].p_value < 0.05 for m in voting)
    assert all(sum(r["flops"] for r in records if r["method"] == m) < 0.25 * sum(r["flops"] for r in phi)
               for m in voting)
    shares = re.search(r"SC at k = 16 \(T = 0\.7 and 0\.5\), ESC and DeepConf spend ([\d.]+), ([\d.]+), ([\d.]+) "
                       r"and ([\d.]+) of φ's FLOPs", text)
    assert shares, "the FLOPs sentence changed shape"
    phi_flops = sum(r["flops"] for r in phi)
    assert shares.groups() == tuple(f"{sum(r['flops'] for r in records if r['method'] == m) / phi_flops:.2f}"
                                    for m in voting)
    # "the first 11 (6 right), session 16's 37 (8 right), ...": φ's records in file order, one run after another
    sessions = re.search(r"By session, in the order run: (.*?)\.", text)
    assert sessions, "the sessions sentence changed shape"
    start = 0
    for size, right in re.findall(r"(\d+) \((\d+) right\)", sessions.group(1)):
        chunk = phi[start:start + int(size)]
        assert (len(chunk), sum(r["correct"] for r in chunk)) == (int(size), int(right)), sessions.group(1)
        start += int(size)
    assert start == len(phi)
    stops = re.search(r"clustered convergence on (\d+) questions, at `max_steps` on (\d+) and with every beam "
                      r"finished on (\d+), after ([\d.]+) steps on average \(on the same questions `mfs` ([\d.]+), "
                      r"`mfs-paper` ([\d.]+)\)", text)
    assert stops, "the stops sentence changed shape"
    counts = [sum(r["stop_reason"] == reason for r in phi) for reason in ("cluster_converged", "max_steps",
                                                                          "all_finished")]
    assert [int(n) for n in stops.groups()[:3]] == counts and sum(counts) == len(phi)
    for method, quoted in (("phi", stops.group(4)), ("mfs", stops.group(5)), ("mfs-paper", stops.group(6))):
        steps = [r["steps"] for r in records if r["method"] == method]
        assert quoted == f"{sum(steps) / len(steps):.2f}", method


def test_readme_quotes_phis_records():
    """README's φ sentence: φ's and SC's correct answers and output tokens per question on the questions φ ran."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"On the first (\d+) φ-Decoding answered (\d+) \(([\d,]+) tokens/q\), "
                       r"SC at T = 0\.7 (\d+) \(([\d,]+)\)\.", readme)  # SC at k = 16
    assert quoted, "README's φ sentence changed shape"
    records = _report_module().questions_of(_records("issue43-qwen"), "phi")
    phi, sc = summarize(records, ["phi", "sc"])
    assert quoted.groups() == (str(phi.questions), str(phi.correct), f"{phi.mean_output_tokens:,.0f}", str(sc.correct),
                               f"{sc.mean_output_tokens:,.0f}")
