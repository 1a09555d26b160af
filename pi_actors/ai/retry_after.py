"""What a server asks about retrying, and how that travels in an error message.

A provider that refuses a request for now (429, 503, 529 …) may say when to come back:
``retry-after-ms: <milliseconds>`` (OpenAI's header), else ``retry-after: <seconds>`` or
``retry-after: <HTTP-date>`` (RFC 9110 §10.2.3). The ``ai`` layer never retries by itself (it
keeps no state and never sleeps); it puts the server's answer into the error message of the
failed reply, where the caller's retry policy (``coding.retry``) reads it back:

- within the maximum: ``"<error> (the server asked to retry in 5 s)"`` — the retry waits that
  long instead of its own back-off;
- above the maximum (pi's ``retry.maxDelayMs``, default 60 s; 0 = no maximum): the request
  fails with ``"Server requested a 3600 s retry delay, above the maximum of 60 s
  (retry.maxDelayMs): <error>"`` and is not retried, as pi fails it rather than wait.

Contract: :func:`parse_retry_after` (headers → milliseconds or None; never raises on hostile
values), :func:`describe_retry_after` (message + delay + maximum → message), and the readers
:func:`requested_delay_ms` / :func:`delay_exceeds_maximum` (message → what it says).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "parse_retry_after",
    "describe_retry_after",
    "requested_delay_ms",
    "delay_exceeds_maximum",
]

DEFAULT_MAX_RETRY_DELAY_MS = 60000
# A delay longer than this (a year) is treated as absurd rather than computed with.
_ABSURD_MS = 365 * 24 * 3600 * 1000

_ASKED = re.compile(r"\(the server asked to retry in (\d+(?:\.\d+)?) s\)")
_TOO_LONG = re.compile(r"^Server requested a \d+(?:\.\d+)? s retry delay, above the maximum of ")


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_retry_after(headers: Mapping[str, Any] | None, now: float | None = None) -> int | None:
    """The delay the server asks for, in milliseconds (0 for a date in the past), or None when
    it asks nothing (or nothing readable). ``headers`` is any mapping with case-insensitive
    lookup or lower-case keys (httpx's ``Headers``); ``now`` is the wall-clock time
    (``time.time()``) an HTTP-date is measured from."""
    if not headers:
        return None
    try:
        raw_ms = headers.get("retry-after-ms")
        raw = headers.get("retry-after")
    except Exception:
        return None
    if isinstance(raw_ms, str):
        value = _number(raw_ms)
        if value is not None:
            return _clamp(value)
    if not isinstance(raw, str) or not raw.strip():
        return None
    value = _number(raw)
    if value is not None:
        return _clamp(value * 1000)
    import email.utils  # (here: the email package is ~0.1 s of every CLI's and actor's start-up)

    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    try:
        target = when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
    return _clamp((target - (time.time() if now is None else now)) * 1000)


def _clamp(ms: float) -> int | None:
    if ms != ms:
        return None
    return int(min(max(ms, 0), _ABSURD_MS))


def _seconds(ms: int) -> str:
    if ms % 1000 == 0:
        return f"{ms // 1000} s"
    return f"{ms / 1000:.3f}".rstrip("0") + " s"


def describe_retry_after(message: str, delay_ms: int, max_ms: int) -> str:
    """``message`` with the server's requested delay added (module docstring)."""
    if max_ms > 0 and delay_ms > max_ms:
        return (
            f"Server requested a {_seconds(delay_ms)} retry delay, above the maximum of "
            f"{_seconds(max_ms)} (retry.maxDelayMs): {message}"
        )
    return f"{message} (the server asked to retry in {_seconds(delay_ms)})"


def requested_delay_ms(error_message: str | None) -> int | None:
    """The delay an error message says the server asked for (see :func:`describe_retry_after`)."""
    if not isinstance(error_message, str):
        return None
    found = _ASKED.findall(error_message)
    if not found:
        return None
    return int(round(float(found[-1]) * 1000))


def delay_exceeds_maximum(error_message: str | None) -> bool:
    """Whether an error message says the server asked for a delay above the maximum."""
    return isinstance(error_message, str) and _TOO_LONG.match(error_message) is not None
