"""A tool's partial results are asked of the pool only when someone reads them.

``-p`` asks for the reply's ``message_end`` events only: nobody reads ``tool_execution_update``,
so the coordinator's ``run_tool`` says ``updates: false`` and the pool streams no chunk. A UI
that takes every event (rpc mode, the TUI's prompt call) or a subscriber still gets the bash
output as it comes.

In-process parts over real socketpairs: the real provider actor against the scripted server,
the real session store, and a stand-in tool pool that records what it was asked and streams
one partial result unless told not to.
"""

from __future__ import annotations

from typing import Any

import trio
from support.coordinator import open_wired_coordinator

from pi_actors.actors.session_store import SessionStore
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


class _Pool:
    """A stand-in tool pool: records each ``run_tool``'s arguments; streams the partial result
    ``partial`` unless the call says ``updates: false``, then answers ``done``."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, call: Any) -> Any:
        if call.method != "run_tool":
            return None
        self.asked.append(dict(call.args))
        if call.args.get("updates", True):
            await call.send_chunk({"content": [{"type": "text", "text": "partial"}]})
        return {"content": [{"type": "text", "text": "done"}], "details": None, "isError": False}


def _script(scripted: Any, runs: int) -> None:
    for _ in range(runs):
        scripted.script.extend([
            Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo 1"})]),
            Reply(text="all done"),
        ])  # fmt: skip


async def _prompt(ui: Any, **extra: Any) -> list[dict[str, Any]]:
    told: list[dict[str, Any]] = []
    async with ui.open_call("prompt", {"text": "go", **extra}) as call:
        async for event in call:
            told.append(event)
        await call.result()
    return told


def _update_texts(events: list[dict[str, Any]]) -> list[str]:
    return ["".join(b.get("text", "") for b in e["partialResult"]["content"]) for e in events if e["type"] == "tool_execution_update"]


async def test_print_mode_asks_the_pool_for_no_partial_results_and_a_ui_that_reads_them_gets_them(scripted, tmp_path):
    _script(scripted, 2)
    pool = _Pool()
    with trio.fail_after(60):
        async with open_wired_coordinator(scripted, tmp_path, pool, SessionStore()) as ui:
            # -p: only the message ends are streamed to it.
            quiet = await _prompt(ui, types=["message_end"])
            assert pool.asked[-1].get("updates") is False
            assert [e["type"] for e in quiet] == ["message_end"] * 4
            # A UI that reads every event: the pool streams, the UI sees the bash output.
            told = await _prompt(ui)
            assert pool.asked[-1].get("updates", True) is True
            assert _update_texts(told) == ["", "partial"]  # pi's first empty update, then the output


async def test_a_subscriber_gets_the_partial_results_of_a_print_mode_run(scripted, tmp_path):
    _script(scripted, 1)
    pool = _Pool()
    with trio.fail_after(60):
        async with open_wired_coordinator(scripted, tmp_path, pool, SessionStore()) as ui, trio.open_nursery() as nursery:
            seen: list[dict[str, Any]] = []
            subscribed = trio.Event()

            async def subscribe() -> None:
                async with ui.open_call("subscribe", {}) as call:
                    async for chunk in call:
                        if "snapshot" in chunk:
                            subscribed.set()
                        else:
                            seen.append(chunk["event"])

            nursery.start_soon(subscribe)
            await subscribed.wait()
            await _prompt(ui, types=["message_end"])
            assert pool.asked[-1].get("updates", True) is True
            nursery.cancel_scope.cancel()
    assert "partial" in _update_texts(seen)
