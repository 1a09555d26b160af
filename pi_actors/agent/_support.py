"""Small helpers shared by the loop modules."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["SinkFailed", "error_text", "call_maybe_async"]


class SinkFailed(Exception):
    """The caller's sink raised; carried out of the loop and re-raised as the original."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def error_text(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


async def call_maybe_async(fn: Any, *args: Any) -> Any:
    """Call a sync-or-async callback."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
