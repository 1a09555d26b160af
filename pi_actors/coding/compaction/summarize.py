"""Summarizing a prepared compaction with an LLM (pi spec §3.6, ``compact`` / ``generateSummary``).

LLM calls go through a push-style stream function,
``await stream_fn(model, context, options, emit) -> AssistantMessage``, which never raises
(errors arrive as stopReason ``error``/``aborted``). ``options`` is a
:class:`pi_actors.ai.StreamOptions`, so ``pi_actors.ai.stream_simple`` can serve as
``stream_fn`` directly, and any stream function reading the attributes ``api_key``,
``signal``, ``reasoning``, ``max_tokens``, ``temperature``, ``session_id`` works too.

- History summary: system prompt :data:`SUMMARIZATION_SYSTEM_PROMPT`, one user message
  ``<conversation>…</conversation>`` (+ ``<previous-summary>``) + instructions;
  ``max_tokens = floor(0.8 × reserve_tokens)``; ``reasoning="high"`` only for reasoning
  models. Error → :class:`CompactionError` ``Summarization failed: {message}``.
- Split turn: the history summary (or ``No prior history.`` with nothing before the turn) and
  the turn-prefix summary run concurrently; the prefix is sent as the raw converted messages
  followed by :data:`TURN_PREFIX_SUMMARIZATION_PROMPT` (no system prompt, no reasoning,
  ``max_tokens = floor(0.5 × reserve_tokens)``; error → ``Turn prefix summarization failed:
  …``). Merged as ``{history}\\n\\n---\\n\\n**Turn Context (split turn):**\\n\\n{prefix}``.
- A summary is the reply's text blocks joined by ``\\n``; the file lists are appended.
- An abort (reply ``aborted``, or ``signal`` aborted when a call returns) raises
  :class:`CompactionCancelled` (``Compaction cancelled``), a :class:`CompactionError`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from ...ai.abort import AbortSignal
from ...ai.options import StreamOptions
from ...ai.types import AssistantMessage, Context, Model, TextContent, Usage, UserMessage, now_ms
from .fileops import compute_file_lists, format_file_operations
from .messages import to_llm
from .prepare import CompactionPreparation
from .prompts import (
    NO_PRIOR_HISTORY,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    serialize_conversation,
    summarization_prompt,
)
from .tokens import CompactionSettings

__all__ = [
    "CompactionError",
    "CompactionCancelled",
    "CompactionResult",
    "StreamFn",
    "reply_text",
    "generate_summary",
    "generate_turn_prefix_summary",
    "compact",
]

StreamFn = Callable[[Model, Context, Any, Callable[[Any], Awaitable[None]]], Awaitable[AssistantMessage]]


class CompactionError(Exception):
    """Summarization failed; ``str(exc)`` is the user-facing text."""


class CompactionCancelled(CompactionError):
    """The summarization was aborted through its signal."""

    def __init__(self, message: str = "Compaction cancelled") -> None:
        super().__init__(message)


@dataclass
class CompactionResult:
    """What a ``compaction`` entry records: ``details`` is ``{"readFiles", "modifiedFiles"}``."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: dict = field(default_factory=lambda: {"readFiles": [], "modifiedFiles": []})

    def entry_fields(self) -> dict:
        """The compaction entry's own fields in pi's JSON names (``fromHook`` false)."""
        return {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "details": self.details,
            "fromHook": False,
        }


async def _discard(_event: Any) -> None:
    pass


def reply_text(message: AssistantMessage) -> str:
    """The text blocks of a reply joined by ``\\n``."""
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


async def call_llm(stream_fn: StreamFn, model: Model, context: Context, options: StreamOptions) -> AssistantMessage:
    """One summarizer call with the events discarded; a raising stream function (a broken
    contract) gives an ``error`` reply carrying the exception text instead."""
    try:
        return await stream_fn(model, context, options, _discard)
    except Exception as exc:  # a stream function breaking its never-raise contract
        return AssistantMessage(
            content=[], api=model.api, provider=model.provider, model=model.id, usage=Usage(),
            stop_reason="error", timestamp=now_ms(), error_message=str(exc) or type(exc).__name__,
        )


def _check(reply: AssistantMessage, signal: AbortSignal | None, prefix: str) -> str:
    if reply.stop_reason == "aborted" or (signal is not None and signal.aborted):
        raise CompactionCancelled()
    if reply.stop_reason == "error":
        raise CompactionError(f"{prefix}: {reply.error_message or 'Unknown error'}")
    return reply_text(reply)


async def generate_summary(
    messages: list[Any],
    model: Model,
    stream_fn: StreamFn,
    *,
    reserve_tokens: int,
    api_key: str | None,
    signal: AbortSignal | None = None,
    custom_instructions: str | None = None,
    previous_summary: str | None = None,
    session_id: str | None = None,
) -> str:
    """The structured summary of ``messages`` (session/agent messages, dicts or Structs)."""
    conversation = serialize_conversation(to_llm(messages))
    prompt = summarization_prompt(conversation, previous_summary, custom_instructions)
    context = Context(
        system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
        messages=[UserMessage(content=[TextContent(text=prompt)], timestamp=now_ms())],
    )
    options = StreamOptions(
        api_key=api_key,
        signal=signal,
        max_tokens=math.floor(0.8 * reserve_tokens),
        reasoning="high" if model.reasoning else None,
        session_id=session_id,
    )
    return _check(await call_llm(stream_fn, model, context, options), signal, "Summarization failed")


async def generate_turn_prefix_summary(
    messages: list[Any],
    model: Model,
    stream_fn: StreamFn,
    *,
    reserve_tokens: int,
    api_key: str | None,
    signal: AbortSignal | None = None,
    session_id: str | None = None,
) -> str:
    """The short summary of the kept turn's prefix (raw messages + the turn-prefix prompt)."""
    llm_messages = to_llm(messages)
    llm_messages.append(UserMessage(content=[TextContent(text=TURN_PREFIX_SUMMARIZATION_PROMPT)], timestamp=now_ms()))
    options = StreamOptions(
        api_key=api_key, signal=signal, max_tokens=math.floor(0.5 * reserve_tokens), session_id=session_id
    )
    reply = await call_llm(stream_fn, model, Context(messages=llm_messages), options)
    return _check(reply, signal, "Turn prefix summarization failed")


async def compact(
    preparation: CompactionPreparation,
    model: Model,
    stream_fn: StreamFn,
    *,
    api_key: str | None,
    custom_instructions: str | None = None,
    signal: AbortSignal | None = None,
    settings: CompactionSettings | None = None,
    session_id: str | None = None,
) -> CompactionResult:
    """Summarize ``preparation`` with ``model``; raises :class:`CompactionError` (module doc).

    ``settings`` defaults to the preparation's; only ``reserve_tokens`` is read here.
    """
    reserve = (settings or preparation.settings).reserve_tokens

    if preparation.is_split_turn and preparation.turn_prefix_messages:
        results: dict[str, str | BaseException] = {}

        async def run(key: str, fn: Callable[[], Awaitable[str]]) -> None:
            try:
                results[key] = await fn()
            except CompactionError as exc:
                results[key] = exc

        async def history() -> str:
            if not preparation.messages_to_summarize:
                return NO_PRIOR_HISTORY
            return await generate_summary(
                preparation.messages_to_summarize, model, stream_fn, reserve_tokens=reserve, api_key=api_key,
                signal=signal, session_id=session_id,
                custom_instructions=custom_instructions, previous_summary=preparation.previous_summary,
            )

        async def prefix() -> str:
            return await generate_turn_prefix_summary(
                preparation.turn_prefix_messages, model, stream_fn, reserve_tokens=reserve, api_key=api_key,
                signal=signal, session_id=session_id,
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "history", history)
            nursery.start_soon(run, "prefix", prefix)
        failures = [r for r in (results["history"], results["prefix"]) if isinstance(r, CompactionError)]
        if failures:
            raise next((f for f in failures if isinstance(f, CompactionCancelled)), failures[0])
        summary = f"{results['history']}\n\n---\n\n**Turn Context (split turn):**\n\n{results['prefix']}"
    else:
        summary = await generate_summary(
            preparation.messages_to_summarize, model, stream_fn, reserve_tokens=reserve, api_key=api_key,
            signal=signal, session_id=session_id,
            custom_instructions=custom_instructions, previous_summary=preparation.previous_summary,
        )

    read_files, modified_files = compute_file_lists(preparation.file_ops)
    summary += format_file_operations(read_files, modified_files)
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        details={"readFiles": read_files, "modifiedFiles": modified_files},
    )
