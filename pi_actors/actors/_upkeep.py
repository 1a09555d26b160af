"""The coordinator's upkeep between runs: auto-retry, auto-compaction, manual compaction.

The policies are the coding layer's (``coding.retry``, ``coding.compaction``); this module
drives them against the live session, in pi's order (pi's packages/coding-agent, docs/architecture.md §7):

* after a run ends, a retryable provider error is retried with backoff
  (``auto_retry_start`` … ``auto_retry_end``), cancellable by ``abort`` / ``abort_retry``;
* otherwise the compaction check runs: over the threshold → compact; a context overflow →
  compact and continue the run once; a second overflow → the "recovery failed" message;
* ``compact(instructions)`` is the manual ``/compact``.

Summaries are requested from the session's model through the provider actor (the
coordinator's stream function), with pi's prompts and token limits. Session events
(``auto_retry_*``, ``compaction_start``/``compaction_end`` with pi 0.73's ``reason``) are plain dicts in pi's shapes, given to ``emit``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ..ai import types as T
from ..ai.abort import AbortSignal
from ..coding import compaction as C
from ..coding.retry import AutoRetry, RetrySettings
from ..protocol import coordinator as P
from ..runtime import RemoteError

__all__ = ["Upkeep"]

SessionEmit = Callable[[dict[str, Any]], Awaitable[None]]


class Upkeep:
    def __init__(self, coordinator: Any, *, compaction: C.CompactionSettings | None = None, retry: RetrySettings | None = None) -> None:
        self.c = coordinator
        self.compaction_settings = compaction or C.CompactionSettings()
        self.retry = AutoRetry(retry or RetrySettings())
        self.overflow_attempted = False
        self._compaction_signal: AbortSignal | None = None
        #: Manual compactions under way (from their start event to their end event).
        self.manual_compactions = 0

    # -- hooks from the coordinator ----------------------------------------------------------

    def on_event(self, event: Any) -> dict[str, Any] | None:
        """Watch each AgentEvent; returns a session event to emit after it, if any."""
        if C.resets_overflow_flag(event.type, getattr(event, "message", None)):
            self.overflow_attempted = False
        if event.type == "message_end" and isinstance(event.message, T.AssistantMessage):
            return self.retry.on_assistant_end(event.message)
        return None

    def cancel(self) -> None:
        """``abort`` / ``abort_retry``: end a retry wait, stop a compaction's summary."""
        self.retry.cancel()
        if self._compaction_signal is not None:
            self._compaction_signal.abort("compaction cancelled")

    async def after_run(self, emit: SessionEmit, run_again: Callable[[], Awaitable[None]]) -> None:
        """Retry and compaction checks after a run; may run the agent again (``run_again``)."""
        while True:
            last = self._last_assistant()
            if last is None:
                return
            window = self.c.agent.state.model.context_window if self.c.agent.state.model else 0
            step = self.retry.plan(last, context_window=window)
            if step.event is not None:
                await emit(step.event)
            if step.action == "retry":
                self._drop_failed_reply()
                cancelled = await self.retry.wait(step.delay_ms)
                if cancelled is not None:
                    await emit(cancelled)
                    return
                await run_again()
                continue
            if not await self._check_compaction(last, emit, after_run=True):
                return
            await run_again()

    async def before_prompt(self, emit: SessionEmit) -> None:
        """pi checks the last reply before a new prompt too (stale usage is ignored)."""
        last = self._last_assistant()
        if last is not None:
            await self._check_compaction(last, emit, after_run=False)

    # -- compaction --------------------------------------------------------------------------

    async def _check_compaction(self, last: T.AssistantMessage, emit: SessionEmit, *, after_run: bool) -> bool:
        """Compact if the decision says so; True when the run should continue (overflow).

        This runs before every prompt and after every run, so its usual answer ("nothing to
        do") must not cost a walk of the session: it is first decided without the branch
        (a compaction entry on the branch can only turn a decision into "none", see
        :func:`~pi_actors.coding.compaction.decide_auto_compaction`); the branch is read from
        the store only when that first answer is to compact."""
        decision = self._decide(last, [], after_run=after_run)
        if decision.action == "none":
            return False
        branch = await self._branch_entries()
        decision = self._decide(last, branch, after_run=after_run)
        if decision.action == "none":
            return False
        if decision.action == "overflow_failed":
            await emit(
                {"type": "compaction_end", "reason": "overflow", "aborted": False, "willRetry": False, "errorMessage": C.OVERFLOW_RECOVERY_FAILED}
            )
            return False
        will_retry = decision.will_retry
        if decision.action == "overflow" and will_retry:
            self.overflow_attempted = True
            self._drop_failed_reply()
        reason = decision.action
        await emit({"type": "compaction_start", "reason": reason})
        try:
            result = await self._compact(branch, None)
        except C.CompactionCancelled:
            await emit({"type": "compaction_end", "reason": reason, "aborted": True, "willRetry": False})
            return False
        except (C.CompactionError, RemoteError) as exc:
            message = C.auto_compaction_error_message(decision.action, exc)
            await emit({"type": "compaction_end", "reason": reason, "aborted": False, "willRetry": False, "errorMessage": message})
            return False
        if result is None:
            await emit({"type": "compaction_end", "reason": reason, "aborted": False, "willRetry": False})
            return False
        await emit({"type": "compaction_end", "reason": reason, "result": result, "aborted": False, "willRetry": will_retry})
        if will_retry:
            # The transcript was rebuilt from the file, failed reply included: drop it again.
            self._drop_failed_reply()
        return will_retry or self.c.agent.has_queued_messages()

    def _decide(self, last: T.AssistantMessage, branch: list[dict[str, Any]], *, after_run: bool) -> C.CompactionDecision:
        return C.decide_auto_compaction(
            last,
            model=self.c.agent.state.model,
            branch_entries=branch,
            overflow_attempted=self.overflow_attempted,
            settings=self.compaction_settings,
            messages=self.c.agent.state.messages,
            after_run=after_run,
        )

    async def compact(self, instructions: str | None, emit: SessionEmit | None = None) -> P.CompactResult:
        """Manual compaction (``/compact [instructions]``); returns pi's result shape.
        Raises RemoteError with pi's texts (``Already compacted``, ``Nothing to compact…``,
        ``Compaction cancelled``, ``Summarization failed: …``). With ``emit``, pi 0.73's
        ``compaction_start``/``compaction_end`` (``reason: "manual"``) frame it, the end
        event saying ``Compaction failed: <text>`` when it fails (not when it is aborted)."""

        async def end(**fields: Any) -> None:
            if emit is not None:
                await emit({"type": "compaction_end", "reason": "manual", **fields})

        if emit is not None:
            await emit({"type": "compaction_start", "reason": "manual"})
        self.manual_compactions += 1
        try:
            branch = await self._branch_entries()
            try:
                result = await self._compact(branch, instructions)
            except C.CompactionCancelled:
                raise RemoteError("cancelled", "Compaction cancelled") from None
            except C.CompactionError as exc:
                raise RemoteError("compaction_failed", str(exc)) from None
            if result is None:
                reason = C.compaction_unavailable_reason(branch, self.compaction_settings) or C.NOTHING_TO_COMPACT
                raise RemoteError("nothing_to_compact", reason)
        except RemoteError as exc:
            if exc.code == "cancelled":
                await end(aborted=True, willRetry=False)
            else:
                await end(aborted=False, willRetry=False, errorMessage=f"Compaction failed: {exc.message}")
            raise
        finally:
            self.manual_compactions -= 1
        await end(result=result, aborted=False, willRetry=False)
        return msgspec.convert(result, P.CompactResult)

    @property
    def is_compacting(self) -> bool:
        """A manual or automatic compaction is under way (pi's ``isCompacting``)."""
        return self.manual_compactions > 0 or self._compaction_signal is not None

    async def _compact(self, branch: list[dict[str, Any]], instructions: str | None) -> dict[str, Any] | None:
        """Summarize, append the compaction entry, reload the transcript; None if there is
        nothing to compact."""
        preparation = C.prepare_compaction(branch, self.compaction_settings)
        if preparation is None:
            return None
        model = self.c.agent.state.model
        if model is None:
            raise C.CompactionError("No model selected")
        replaced = await self._extension_compaction(preparation, instructions)
        self._compaction_signal = signal = AbortSignal()
        try:
            result = replaced or await C.compact(
                preparation,
                model,
                self.c.stream_fn,
                api_key=None,  # the provider actor holds the keys
                custom_instructions=instructions,
                signal=signal,
                settings=self.compaction_settings,
                session_id=self.c.session_id,
            )
        finally:
            self._compaction_signal = None
        entry = {"type": "compaction", **result.entry_fields()}
        await self.c.store.call("append_entry", {"entry": entry})
        self.c.session = await self.c.store.call("context")
        self.c.load_context(self.c.session)
        return {
            "summary": result.summary,
            "firstKeptEntryId": result.first_kept_entry_id,
            "tokensBefore": result.tokens_before,
            "details": result.details,
        }

    async def _extension_compaction(self, preparation: Any, instructions: str | None) -> C.CompactionResult | None:
        """``session_before_compact``: an extension may cancel the compaction (raises
        CompactionCancelled) or give its summary instead of the model's."""
        hooks = getattr(self.c, "extensions", None)
        if hooks is None:
            return None
        verdict = await hooks.before_compact(preparation, instructions)
        if not verdict:
            return None
        if verdict.get("cancel"):
            raise C.CompactionCancelled()
        summary = (verdict.get("compaction") or {}).get("summary")
        if not isinstance(summary, str):
            return None
        return C.CompactionResult(
            summary=summary, first_kept_entry_id=preparation.first_kept_entry_id, tokens_before=preparation.tokens_before
        )

    # -- helpers -----------------------------------------------------------------------------

    async def _branch_entries(self) -> list[dict[str, Any]]:
        """The current branch, root to leaf, read from the store (the whole tree crosses
        the link: only for a compaction, never per turn). Logged as ``session_tree_read``."""
        tree = await self.c.store.call("entries")
        self.c.log.event("session_tree_read", session=self.c.session_id, entries=len(tree["entries"]), why="compaction")
        by_id = {e["id"]: e for e in tree["entries"] if isinstance(e.get("id"), str)}
        path: list[dict[str, Any]] = []
        current = by_id.get(tree.get("leafId"))
        while current is not None and len(path) <= len(by_id):
            path.append(current)
            current = by_id.get(current.get("parentId"))
        return path[::-1]

    def _last_assistant(self) -> T.AssistantMessage | None:
        for message in reversed(self.c.agent.state.messages):
            if isinstance(message, T.AssistantMessage):
                return message
        return None

    def _drop_failed_reply(self) -> None:
        messages = self.c.agent.state.messages
        if messages and isinstance(messages[-1], T.AssistantMessage) and messages[-1].stop_reason in ("error", "aborted"):
            self.c.agent.replace_messages(messages[:-1])
