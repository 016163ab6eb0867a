"""A bound on a test's wait: a hang fails the test instead of blocking the run."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def within(seconds: float, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a thread; fail the test if it is not done after ``seconds``.

    The bounds the tests give are generous (minutes, for seconds of work) so that a busy
    machine is not taken for a hang; every wait inside the backends has its own timeout anyway.
    """
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(fn).result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"no result within {seconds} s: a hang")
    finally:
        pool.shutdown(wait=False)
