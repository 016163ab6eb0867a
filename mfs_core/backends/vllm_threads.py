"""Where vLLM's CPU build runs its model on a machine of one or two CPUs: every CPU, not one of two.

vLLM's CPU build binds its worker's OpenMP threads itself (``VLLM_CPU_OMP_THREADS_BIND``, default ``"auto"``;
``vllm/utils/ompmultiprocessing.py``, read in vLLM 0.32.0): one thread per physical core of the NUMA node, less
``reserve_cpu_num`` cores (one per worker on x86 and Arm) left to the engine-core process. On a 2-CPU machine that
runs the model's forward passes on one core and leaves the other to the engine core's scheduling loop. Measured on
Qwen2.5-Coder-0.5B-Instruct, 2 cores, bfloat16, continuous scheduling, in pairs of runs one right after the other
(docs/results.md, "vLLM's CPU worker on both CPUs against vLLM's own thread binding", generated from the kept runs;
``experiments/benchmarks/qwen_speed.py --parts speed,batch``): with the worker on both CPUs, greedy decoding at 32
rows gave more output tokens/s in every counted pair, and so did 12 MFS decodes (M = N = 2).

So, on vLLM's CPU build, when ``VLLM_CPU_OMP_THREADS_BIND`` is unset and this process may run on at most
:data:`MAX_CPUS` CPUs, the library sets it to all of them before vLLM starts an engine (its processes inherit the
environment). A value the user set is never changed; on larger machines vLLM's own binding stands (it reserves
one core of many).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

__all__ = ["MAX_CPUS", "OMP_BIND_VARIABLE", "bind_cpu_threads", "cpu_thread_environment", "omp_binding"]

OMP_BIND_VARIABLE = "VLLM_CPU_OMP_THREADS_BIND"
"""vLLM's variable for the CPUs its worker's OpenMP threads are bound to."""
MAX_CPUS = 2
"""Most CPUs a machine may have for the library to bind vLLM's worker to all of them (measured on 2)."""


def omp_binding(cpus: Collection[int], environ: Mapping[str, str]) -> str | None:
    """The ``VLLM_CPU_OMP_THREADS_BIND`` value that binds vLLM's CPU worker to every CPU of ``cpus``.

    Args:
        cpus: the CPU ids this process may run on (``os.sched_getaffinity(0)``).
        environ: the environment the engine will inherit.

    Returns:
        ``"0,1"``-style ids in ascending order (vLLM's ``parse_id_list`` format); None when ``environ`` already sets
        the variable, ``cpus`` is empty, or it has more than :data:`MAX_CPUS` CPUs. E.g. ``omp_binding({1, 0}, {})``
        is ``"0,1"``; ``omp_binding({0, 1, 2, 3}, {})`` is None.
    """
    if OMP_BIND_VARIABLE in environ or not cpus or len(cpus) > MAX_CPUS:
        return None
    return ",".join(str(cpu) for cpu in sorted(cpus))


def _process_cpus() -> set[int]:
    """The CPUs this process may run on (all of ``os.cpu_count()`` where affinity is not reported)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 0))  # pragma: no cover - macOS and Windows have no sched_getaffinity


def cpu_thread_environment() -> dict[str, str]:
    """``{"VLLM_CPU_OMP_THREADS_BIND": ...}`` for a process (a ``vllm serve`` replica) started from this one on
    vLLM's CPU build, by :func:`omp_binding` over this process's CPUs and environment; ``{}`` where it binds nothing."""
    value = omp_binding(_process_cpus(), os.environ)
    return {OMP_BIND_VARIABLE: value} if value is not None else {}


def bind_cpu_threads() -> str | None:
    """Set ``VLLM_CPU_OMP_THREADS_BIND`` in this process's environment by :func:`cpu_thread_environment`, before
    vLLM's CPU build starts an engine (its engine-core and worker processes inherit it).

    Returns:
        The value set, or None (the user's value, or a machine of more than :data:`MAX_CPUS` CPUs).
    """
    environment = cpu_thread_environment()
    os.environ.update(environment)
    return environment.get(OMP_BIND_VARIABLE)
