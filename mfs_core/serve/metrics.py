"""Prometheus metrics of ``mfs serve`` (``GET /metrics``), one registry per app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ServerMetrics"]


class ServerMetrics:
    """The server's counters, in their own registry (two apps in one process never clash).

    Attributes:
        requests: ``mfs_requests_total{endpoint, status}``, every answered request.
        rejected: ``mfs_rejected_total{reason}``, requests refused (``queue_full``, ``auth``,
            ``bad_request``, ``too_large``, ``shutting_down``).
        queue_depth: ``mfs_queue_depth``, decodes admitted and not yet finished.
        decodes: ``mfs_decodes_total{outcome}`` (``ok``, ``failed``, ``abandoned``).
        prompt_tokens / completion_tokens / reasoning_tokens: ``mfs_*_tokens_total``, as in ``usage``.
        decode_seconds: ``mfs_decode_seconds``, wall seconds per decode (histogram).
        backend_errors: ``mfs_backend_errors_total{error}``, decodes that failed, by the exception's class
            (``BackendDeadError``, ``ServerUnreachableError``, ...).
        backend_failures: ``mfs_backend_failures_total{kind}``, times the backend stopped serving:
            ``dead`` (vLLM's engine core died, a fatal device error, closed) or ``unavailable`` (every
            HTTP replica down past its retry budget).
        backend_up: ``mfs_backend_up``, 1 while the backend serves, 0 while it is dead or reloading.
        backend_reloads: ``mfs_backend_reloads_total{outcome}``, in-process reload attempts (``ok``,
            ``failed``; ``on_backend_death="reload"``).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("mfs_requests", "Requests answered.", ["endpoint", "status"], registry=r)
        self.rejected = Counter("mfs_rejected", "Requests refused, by reason.", ["reason"], registry=r)
        self.queue_depth = Gauge("mfs_queue_depth", "Decodes admitted and not finished.", registry=r)
        self.decodes = Counter("mfs_decodes", "Decodes ended, by outcome.", ["outcome"], registry=r)
        self.prompt_tokens = Counter("mfs_prompt_tokens", "Prompt tokens of answered requests.", registry=r)
        self.completion_tokens = Counter("mfs_completion_tokens", "Tokens the searches sampled.", registry=r)
        self.reasoning_tokens = Counter("mfs_reasoning_tokens", "Sampled tokens not in the answers.", registry=r)
        self.decode_seconds = Histogram(
            "mfs_decode_seconds", "Wall seconds per decode.", registry=r,
            buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 600),
        )
        self.backend_errors = Counter("mfs_backend_errors", "Decodes failed, by exception class.", ["error"], registry=r)
        self.backend_failures = Counter("mfs_backend_failures", "Times the backend stopped serving, by kind.", ["kind"],
                                        registry=r)
        self.backend_up = Gauge("mfs_backend_up", "1 while the backend serves, 0 while dead or reloading.", registry=r)
        self.backend_up.set(1)
        self.backend_reloads = Counter("mfs_backend_reloads", "In-process reload attempts, by outcome.", ["outcome"],
                                       registry=r)
