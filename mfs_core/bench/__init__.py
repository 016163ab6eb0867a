"""The benchmark harness: datasets, scoring, the runner, the results table and plot.

Modules: :mod:`~mfs_core.bench.datasets` (the six paper sets and the demo held-out set),
:mod:`~mfs_core.bench.prompts` (the φ-Decoding release's few-shot prompts),
:mod:`~mfs_core.bench.scoring` (the MFS release's corrected scoring),
:mod:`~mfs_core.bench.runner` (resumable side-by-side runs), :mod:`~mfs_core.bench.report`
and :mod:`~mfs_core.bench.plot`, and :mod:`~mfs_core.bench.cli` (``mfs bench``). Importing
this package loads none of them.
"""

__all__: list[str] = []
