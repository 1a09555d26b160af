"""The public client API (``pi_actors.client``), used as someone writing their own UI would:
against a real session server on 127.0.0.1, with only the names that package exports."""

from __future__ import annotations

import pytest
import trio

from pi_actors.client import (
    AgentEventRebuilder,
    ConnectionRefused,
    RemoteError,
    RemoteSession,
    attach,
    connect,
    open_or_create,
)
from pi_actors.testing.scripted_server import Reply


class View:
    """What a UI shows: the attachment, the snapshot, every event, the status lines."""

    def __init__(self) -> None:
        self.attachments: list[tuple[str, str]] = []
        self.snapshots: list[dict] = []
        self.events: list[dict] = []
        self.statuses: list[str] = []

    def attached(self, session_id: str, attachment_id: str) -> None:
        self.attachments.append((session_id, attachment_id))

    def snapshot(self, snapshot: dict) -> None:
        self.snapshots.append(snapshot)

    def event(self, event: dict) -> None:
        self.events.append(event)

    def status(self, text: str) -> None:
        self.statuses.append(text)


def answer_text(events: list[dict]) -> str:
    ends = [e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    return "".join(block.get("text", "") for block in ends[-1]["message"]["content"] if block.get("type") == "text")


async def test_attach_creates_a_session_runs_the_prompts_and_shows_every_event(scripted, server):
    scripted.script.append(Reply(text="Hello from the session.", chunks=3))
    view = View()
    send, receive = trio.open_memory_channel[str](1)
    await send.send("hi")
    await send.aclose()
    with trio.fail_after(60):
        session_id = await attach(server.url, token="tok", create={}, view=view, prompts=receive)
    assert [sid for sid, _ in view.attachments] == [session_id]
    assert len(view.snapshots) == 1
    # The deltas arrive stripped on the wire; the UI sees pi's full shapes again.
    updates = [e for e in view.events if e["type"] == "message_update"]
    assert updates and all("partial" in e["assistantMessageEvent"] for e in updates)
    assert answer_text(view.events) == "Hello from the session."


async def test_connect_open_or_create_and_a_remote_session_stream_a_prompt(scripted, server):
    scripted.script.append(Reply(text="Streamed answer.", chunks=4))
    rebuild = AgentEventRebuilder()
    events = []
    with trio.fail_after(60):
        async with connect(server.url, token="tok") as peer:
            session_id = await open_or_create(peer, None, {})
            session = await RemoteSession.attach(peer, session_id)
            assert session.session_id == session_id
            async with session.open_call("prompt", {"text": "go"}) as call:
                async for event in call:
                    events.append(rebuild.apply(event))
                await call.result()
    deltas = "".join(e["assistantMessageEvent"]["delta"] for e in events
                     if e["type"] == "message_update" and e["assistantMessageEvent"]["type"] == "text_delta")
    assert deltas == "Streamed answer." == answer_text(events)


async def test_a_wrong_token_is_refused_with_401_and_an_unknown_session_with_session_not_found(server):
    with pytest.raises(ConnectionRefused) as refused:
        async with connect(server.url, token="not-the-token"):
            pass
    assert refused.value.status == 401
    with pytest.raises(RemoteError) as unknown:
        await attach(server.url, token="tok", session_id="no-such-session", view=View(), retry_first=False)
    assert unknown.value.code == "session_not_found"
