"""Reading a request's JSON body for ``mfs serve``: its size limit, duplicate keys, non-JSON numbers and
nesting depth refused with a one-line 400 (or 413) before any of it reaches the call layer."""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.requests import Request

from mfs_core.serve.schemas import RequestError

__all__ = ["MAX_JSON_DEPTH", "json_depth", "read_body"]

MAX_JSON_DEPTH = 32
"""Most levels of nested JSON arrays and objects a request body may have (a chat request needs about 8)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict, refusing a key given twice (``json.loads``' ``object_pairs_hook``).

    Raises:
        RequestError: 400 naming the key.
    """
    body: dict[str, Any] = {}
    for key, value in pairs:
        if key in body:
            raise RequestError(400, f"the request body gives the key {key!r} twice in one object", param=key)
        body[key] = value
    return body


def _no_constant(name: str) -> float:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, though Python's parser reads them)."""
    raise RequestError(400, f"the request body holds {name}, which is not a JSON number")


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when it overflows a float (``1e400``)."""
    value = float(text)
    if not math.isfinite(value):
        raise RequestError(400, f"the number {text[:40]} in the request body is out of range")
    return value


def json_depth(value: Any) -> int:
    """Levels of nested arrays and objects in a parsed JSON value (a scalar: 0), without recursion."""
    depth, level = 0, [value]
    while level:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            break
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return depth
        level = [child for c in containers for child in (c.values() if isinstance(c, dict) else c)]
    return depth


async def read_body(request: Request, limit: int) -> Any:
    """The JSON body of ``request``, at most ``limit`` bytes.

    Raises:
        RequestError: 413 for a larger body, 400 for a body that is not JSON (or nests deeper than
            :data:`MAX_JSON_DEPTH`).
    """
    length = request.headers.get("content-length", "")
    too_large = f"the request body is larger than this server's limit of {limit} bytes (max_body_bytes)"
    if length.isdigit() and int(length) > limit:
        raise RequestError(413, too_large)
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, too_large)
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an integer of over 4300 digits
        raise RequestError(400, f"the request body is not valid JSON: {str(exc)[:200]}") from None
    except RecursionError:
        body = None  # deeper than Python's parser goes: refused below
    if body is None and raw.strip() != b"null" or json_depth(body) > MAX_JSON_DEPTH:
        raise RequestError(400, f"the request body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    return body
