"""The library's errors, and one-line error messages for bad settings and unknown names.

:class:`MFSError` is the root of every exception the library defines (``except MFSError``
catches any of them); each also keeps its built-in base (``ValueError``, ``RuntimeError``,
...), so ``except`` clauses written against those still work. :class:`ContextWindowError`,
:class:`BackendOutputError` (with :class:`MissingLogprobsError` and :class:`SingleSampleError`),
:class:`ServerRequestError` (with :class:`ServerUnreachableError`), :class:`BackendDeadError` and
:class:`GenerateTimeoutError` are raised by the backends and the engine.

The backends' errors::

    MFSError
    ├── ContextWindowError (ValueError)       a prompt does not fit the model
    ├── BackendOutputError (RuntimeError)     an answer that cannot be used (every backend)
    │   ├── MissingLogprobsError              ... because it has no per-token log-probs
    │   └── SingleSampleError                 ... because a server samples once per request
    ├── ServerRequestError (RuntimeError)     an HTTP request failed (refused, or past its retries)
    │   └── ServerUnreachableError            ... because nothing listens at any URL
    ├── BackendDeadError (RuntimeError)       the backend is gone for good
    └── GenerateTimeoutError (TimeoutError)   a generate call took too long

A pydantic ``ValidationError`` prints several lines per error and a documentation URL;
:func:`format_validation_error` turns it into one line that names each bad field, the value
given and the range the field allows (read from the field's constraints). :func:`closest`
and :func:`unknown_name_message` name the valid name a misspelled one was probably meant
to be (``difflib``). The CLI and the adapters share them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import BaseModel, ValidationError

__all__ = [
    "BackendDeadError", "BackendOutputError", "ContextWindowError", "DecodeTimeoutError", "GenerateTimeoutError", "MFSError",
    "MissingLogprobsError", "OneLineValidationError", "ServerRequestError", "ServerUnreachableError", "SingleSampleError",
    "allowed_range",
    "closest", "format_validation_error", "one_line", "unknown_name_message",
]


class MFSError(Exception):
    """The root of the library's exceptions: ``except MFSError`` catches any error mfs raises itself.

    Every subclass also derives from the built-in exception it was before this root existed
    (``ContextWindowError`` is a ``ValueError``, ``BackendOutputError`` a ``RuntimeError``, ...).
    Errors of the libraries underneath (pydantic, httpx, vLLM, torch) pass through unchanged,
    except pydantic's on settings, which become :class:`OneLineValidationError`.
    """


class ContextWindowError(MFSError, ValueError):
    """A prompt (plus its ``max_tokens``) does not fit the model's context window."""


class BackendOutputError(MFSError, RuntimeError):
    """A backend's answer to a ``generate`` call cannot be used: the one error for bad model output.

    Raised by the engine when a backend returns a shape the protocol does not allow (too few
    or too many results or continuations, a log-probability that is NaN or infinite), and by
    the backends themselves when what their model or server returned cannot be mapped onto
    continuations: vLLM's output without ``cumulative_logprob``, aborted or unfinished; an
    HTTP answer without a ``choices`` list, with the wrong number of choices, an unknown
    ``finish_reason`` or token ids that do not match its log-probs. The engine retries the
    decodes of such a round one at a time, so only the decode whose requests cause it fails.
    """


class MissingLogprobsError(BackendOutputError):
    """A model or server returned a completion without per-token log-probs (or, for DeepConf's
    ``top_logprobs``, without the top log-probs of every token): MFS cannot score it."""


class SingleSampleError(BackendOutputError):
    """A server answered a request with ``n`` > 1 with one choice, or refused ``n`` > 1.

    The HTTP backend with ``server_n="auto"`` then sends such requests one per sample from
    then on; with ``server_n="yes"`` it is raised to the caller.
    """


class ServerRequestError(MFSError, RuntimeError):
    """An HTTP request to an OpenAI-compatible server failed: refused with a 4xx answer other
    than a too-long prompt, or still failing (timeouts, 408, 429, 5xx, malformed bodies) after
    the backend's ``max_retries`` retries. The message names the URLs and the last fault."""


class ServerUnreachableError(ServerRequestError):
    """Nothing listens at any URL a request may try (connection refused, or the host name does
    not resolve): raised at once, without waiting on retries."""


class BackendDeadError(MFSError, RuntimeError):
    """The engine's backend can no longer serve, for good: its model is gone.

    Raised by every call on an :class:`~mfs_core.engine.MFSEngine` (and on the LangChain and
    LlamaIndex models sharing its backend) once the backend died: vLLM's engine-core process
    exited (killed, out of memory, a crashed kernel), the transformers backend met a fatal
    device error (CUDA error, out of memory), or the backend was closed. Decodes in flight
    fail with it too (within their call's ``timeout``, never a hang). Such an engine cannot
    recover: close it and build a new one; the shared-backend registry has dropped the dead
    backend, so ``MFSEngine.from_settings`` (or a new ``ChatMFS`` / ``MFSLLM``) with the same
    settings loads a fresh one. A ``RuntimeError``, as the errors of a closed backend were.

    Args:
        reason: one line saying what died and how (e.g. ``"vLLM's engine core exited with
            signal 9"``).
        model: the model the backend served (named in the message), or None.

    Attributes:
        reason: as given.
        model: as given.
    """

    def __init__(self, reason: str, model: str | None = None) -> None:
        self.reason = reason
        self.model = model
        what = f"the backend of model {model!r}" if model else "the model backend"
        super().__init__(
            f"{what} is gone: {reason}. Every call on this engine, and on the LangChain / LlamaIndex models "
            "sharing it, fails from now on: close them and build a new one (MFSEngine.from_settings(...), or a "
            "new ChatMFS / MFSLLM with the same settings), which loads a fresh backend"
        )

    def __reduce__(self) -> tuple[type, tuple[str, str | None]]:
        return type(self), (self.reason, self.model)


class GenerateTimeoutError(MFSError, TimeoutError):
    """``backend.generate`` did not return within the decodes' ``generate_timeout`` (seconds)."""


class DecodeTimeoutError(MFSError, TimeoutError):
    """The caller's ``timeout`` (seconds) passed before its decodes finished; they were abandoned
    (:mod:`mfs_core.engine.waiting`). A ``TimeoutError``, so ``except TimeoutError`` catches it; a decode's
    own :class:`GenerateTimeoutError` is never reported as this."""


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name ``name`` most resembles (``difflib`` ratio >= 0.6), or None.

    A valid name that starts with ``name`` (``step_beam`` for ``step_beam_size``) wins.
    """
    valid = sorted(valid)
    prefixed = [candidate for candidate in valid if candidate.startswith(name) and name]
    if prefixed:
        return min(prefixed, key=len)
    matches = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_name_message(owner: str, names: Iterable[str], valid: Iterable[str], *, what: str = "argument") -> str:
    """``"MFSLLM got an unknown argument 'step_beam' (did you mean 'step_beam_size'?)"``.

    Args:
        owner: the class or command that got the names.
        names: the unknown names (at least one).
        valid: every name ``owner`` accepts.
        what: what a name is ("argument", "setting", "keyword argument").
    """
    valid = list(valid)
    parts = []
    for name in sorted(names):
        guess = closest(name, valid)
        parts.append(f"{name!r} (did you mean {guess!r}?)" if guess else repr(name))
    plural = "s" if len(parts) > 1 else ""
    return f"{owner} got an unknown {what}{plural} {', '.join(parts)}"


def allowed_range(model: type[BaseModel], field: str) -> str | None:
    """What ``model.<field>`` allows, from its constraints and type, e.g. ``"1 <= step_beam_size <= 1024"``.

    Returns None when the field has no bound and no fixed set of values.
    """
    info = model.model_fields.get(field)
    if info is None:
        return None
    low = high = None
    for meta in info.metadata:
        if isinstance(meta, Ge):
            low = f"{meta.ge} <= "
        elif isinstance(meta, Gt):
            low = f"{meta.gt} < "
        elif isinstance(meta, Le):
            high = f" <= {meta.le}"
        elif isinstance(meta, Lt):
            high = f" < {meta.lt}"
        elif isinstance(meta, MinLen):
            return f"a string of at least {meta.min_length} character(s)"
    if low or high:
        return f"{low or ''}{field}{high or ''}"
    choices = _literal_choices(info.annotation)
    if choices:
        return "one of " + ", ".join(repr(choice) for choice in choices)
    return None


def _literal_choices(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) is not None and str(get_origin(annotation)).endswith("Literal"):
        return get_args(annotation)
    for arg in get_args(annotation):  # Optional[Literal[...]]
        choices = _literal_choices(arg)
        if choices:
            return choices
    return ()


def format_validation_error(
    exc: ValidationError, model: type[BaseModel] | None = None, *, sources: dict[str, str] | None = None
) -> str:
    """One line for a pydantic ``ValidationError``: each bad field, its value and its range.

    Example: ``step_beam_size=0 (from MFS_STEP_BEAM_SIZE): Input should be greater than or
    equal to 1; allowed: 1 <= step_beam_size <= 1024``.

    Args:
        exc: the error pydantic raised.
        model: the model whose fields the errors name (their constraints give the allowed
            range); None: no range is added.
        sources: field -> where its value came from (e.g. an environment variable), shown
            beside the value.

    Returns:
        The errors joined by ``"; "``, without pydantic's URL, on one line.
    """
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error.get("loc", ()))
        message = str(error.get("msg", "invalid")).replace("\n", " ")
        message = message.removeprefix("Value error, ")
        field = str(error["loc"][0]) if error.get("loc") else ""
        if not loc:  # a model-level check (e.g. min_steps vs max_steps): its message names the fields
            parts.append(message)
            continue
        origin = f" (from {sources[field]})" if sources and field in sources else ""
        text = f"{loc}={error.get('input')!r}{origin}: {message}"
        allowed = allowed_range(model, field) if model is not None else None
        if allowed and error.get("type") not in {"literal_error", "string_too_short", "extra_forbidden"}:
            text += f"; allowed: {allowed}"
        parts.append(text)
    return "; ".join(parts)


class OneLineValidationError(MFSError, ValidationError):
    """A pydantic ``ValidationError`` whose ``str()`` is one line (:func:`format_validation_error`).

    Still a ``ValidationError`` (and so a ``ValueError``): ``errors()`` gives the details,
    ``except ValidationError`` catches it. Built by :func:`one_line`.
    """

    def __str__(self) -> str:
        return format_validation_error(self, getattr(self, "model", None), sources=getattr(self, "sources", None))


def one_line(
    exc: ValidationError, model: type[BaseModel] | None = None, *, sources: dict[str, str] | None = None
) -> OneLineValidationError:
    """``exc`` as a :class:`OneLineValidationError` naming each field, value and allowed range.

    Args:
        exc: the error pydantic raised.
        model: the model whose field constraints give the allowed ranges (the adapters pass
            :class:`~mfs_core.settings.MFSSettings`, whose field names they mirror).
        sources: field -> where its value came from, shown beside the value.
    """
    error = OneLineValidationError.from_exception_data(exc.title, exc.errors(), hide_input=False)
    error.model = model
    error.sources = sources
    return error
