"""The HTML trace in a real headless browser (Chromium from the system packages).

Skips when no ``chromium`` is installed (``.ci/run`` installs it where it can). The page is
opened from a file with networking features off; the test reads back the DOM Chromium
parsed and its screenshot.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from mfs_core.trace_html import write_trace_html
from tests.synthetic_search import searched

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"),
]

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1280,1400",
]

SELECTED_GREEN = (0x1A, 0x7F, 0x37)  # the border of a selected candidate (trace_html._CSS)
PRUNED_GREY = (0x9A, 0xA1, 0xAB)  # the "pruned" badge


def test_chromium_renders_the_search_tree(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    result = searched()
    page = tmp_path / "trace.html"
    shot = tmp_path / "trace.png"
    write_trace_html(result, str(page), question="question 3?")
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # The DOM Chromium built holds the whole tree: every candidate, pruned ones marked, the vote.
    assert len(re.findall(r'<li class="cand', dom)) == sum(len(s.candidates) for s in result.steps)
    assert len(re.findall(r'<li class="cand[^"]*\bpruned', dom)) == sum(s.num_pruned for s in result.steps)
    assert re.search(r'<table id="vote">.*<tr class="chosen"><td class="l">7</td>', dom, re.S)
    assert "<title>MFS search trace</title>" in dom
    # The screenshot shows the page with its inline style applied: the selected beams'
    # green borders and the grey "pruned" badges are on screen.
    pixels = (image.imread(shot)[:, :, :3] * 255).round().astype(int)
    assert pixels.shape[1] == 1280

    def count(rgb):
        return int(((abs(pixels - rgb) <= 2).all(axis=2)).sum())

    assert count(SELECTED_GREEN) > 200 and count(PRUNED_GREY) > 200
