"""What ``mfs ask`` shows of a search: the live view, one line per finished step as the
decode runs, and the trace files written after it (:func:`write_traces`).

A :class:`LiveView` is an event callback (:data:`mfs_core.events.EventCallback`): pass it
as ``on_event`` to :meth:`mfs_core.engine.MFSEngine.decode`. It prints through ``rich``:
styled on a terminal, plain lines (no colour codes, no wrapping) when the output is a file
or a pipe.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from mfs_core.events import DecodeEvent, StepEvent, step_summary, stop_summary
from mfs_core.types import DecodeResult

__all__ = ["LiveView", "write_traces"]


class LiveView:
    """Prints each decode event as one line (plus the reasoning it commits, dimmed).

    Args:
        console: where to print; default a ``rich`` console on standard error, so standard
            output keeps only the answer.
        show_committed: also print the reasoning that became shared by every live beam at
            each step, indented under the step line (default True).

    Example:
        >>> engine.decode([question], on_event=LiveView())  # doctest: +SKIP
        step 0: 16 sampled, 11 pruned, 5 rolled out, 4 beams; max V +0.021 > ε_stop 1e-06; 213 tokens
    """

    def __init__(self, console: Console | None = None, *, show_committed: bool = True) -> None:
        """See the class docstring."""
        self.console = console if console is not None else Console(stderr=True, highlight=False)
        self.show_committed = show_committed
        self._committed: dict[int, str] = {}

    def __call__(self, event: DecodeEvent) -> None:
        """Print ``event``; called on the thread that decodes (``MFSEngine.decode(on_event=...)``)."""
        if isinstance(event, StepEvent):
            value, epsilon = event.max_step_value, event.stop_epsilon
            style = "green" if value is not None and epsilon is not None and value <= epsilon else "cyan"
            self.console.print(Text(step_summary(event), style=style), soft_wrap=True)
            shown = self._committed.get(event.index, "")
            if self.show_committed and len(event.committed) > len(shown) and event.committed.startswith(shown):
                for line in event.committed[len(shown) :].splitlines():
                    self.console.print(Text(f"    │ {line}", style="dim"), soft_wrap=True)
                self._committed[event.index] = event.committed
        else:
            self.console.print(Text(stop_summary(event), style="bold"), soft_wrap=True)


def write_traces(result: DecodeResult, question: str, *, html_path: Path | None, png_path: Path | None) -> None:
    """Write the HTML search tree and the deficit plot of ``result`` where asked.

    Raises:
        OSError: a file cannot be written.
        ImportError: ``png_path`` given without matplotlib (``pip install "mfs-decoding[bench]"``).
        ValueError: ``png_path`` given for a decode without pruning data (no steps).
    """
    if html_path is not None:
        from mfs_core.trace_html import write_trace_html

        write_trace_html(result, str(html_path), question=question)
    if png_path is not None:
        from mfs_core.trace_plot import plot_deficits

        plot_deficits(result, png_path)
