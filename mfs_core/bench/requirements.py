"""What ``mfs bench`` needs beyond the engine, checked before anything is decoded.

A run that decodes for an hour and then fails to build its table (scipy missing) wastes the
hour: :func:`check_bench_dependencies` names every missing package of the ``bench`` extra the
run will use, in one line, before the model loads.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

__all__ = ["INSTALL_HINT", "check_bench_dependencies", "missing_bench_dependencies"]

INSTALL_HINT = 'pip install -e ".[bench]" in the clone (or "mfs-decoding[bench]")'
"""The command that installs the ``bench`` extra (the package installs from a clone)."""


def missing_bench_dependencies(methods: Iterable[str], *, plot: bool, progress: bool) -> list[str]:
    """The distributions a run would import and cannot, in a fixed order.

    Args:
        methods: the run's method labels (``phi`` and its variants cluster with scikit-learn).
        plot: the run writes PNG plots (matplotlib).
        progress: the run shows a progress bar (tqdm).

    Returns:
        Distribution names among scipy (the paired tests of the table, always), scikit-learn,
        matplotlib and tqdm whose import package is not installed; empty when none is missing.
    """
    needed = {"scipy": "scipy"}
    if any(label.startswith("phi") for label in methods):
        needed["scikit-learn"] = "sklearn"
    if plot:
        needed["matplotlib"] = "matplotlib"
    if progress:
        needed["tqdm"] = "tqdm"
    return [name for name, module in needed.items() if importlib.util.find_spec(module) is None]


def check_bench_dependencies(methods: Iterable[str], *, plot: bool, progress: bool) -> None:
    """Raise before decoding when a package the run needs is missing.

    Raises:
        ImportError: one line naming the missing distributions and :data:`INSTALL_HINT`
            (``--no-plot`` / ``--no-progress`` drop matplotlib / tqdm).
    """
    missing = missing_bench_dependencies(methods, plot=plot, progress=progress)
    if missing:
        msg = f"mfs bench needs {', '.join(missing)}, not installed: {INSTALL_HINT}"
        raise ImportError(msg)
