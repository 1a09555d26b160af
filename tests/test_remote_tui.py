"""``pi-actors attach URL`` on a terminal: the TUI against a session on a server (issue 8 #4).

The real ``pi-actors attach`` runs in a tmux pane against a real ``Server`` on 127.0.0.1;
``server.disconnect_clients()`` is the network cut.
"""

from __future__ import annotations

import shutil

import pytest
import trio
from conftest import CLI

from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


async def _new_session(server) -> str:
    async with connect(server.url, token="tok") as peer:
        return (await peer.call("create", {}))["sessionId"]


async def test_attach_on_a_terminal_shows_the_tui_prompts_and_renders_other_clients_runs(server, scripted, pane):
    scripted.script += [
        Reply(text="Answer with **bold** words."), Reply(text="Reply to the other client."), Reply(text="Back to this one."),
    ]
    sid = await _new_session(server)
    await pane.start_argv([CLI, "attach", server.url, "--token", "tok", "--session", sid], ready="(scripted) scripted-model")
    screen = await pane.screen()
    assert f"session {sid}" in screen  # the footer names the remote session
    await pane.type("first question")
    await pane.keys("Enter")
    screen = await pane.wait_for("Answer with bold words.")
    assert "› first question" in screen and "**bold**" not in screen
    # Another client of the same session prompts: its run shows in this TUI, once.
    with trio.fail_after(30):
        async with connect(server.url, token="tok") as peer:
            other = await RemoteSession.attach(peer, sid)
            await other.call("prompt", {"text": "from the other client"})
    screen = await pane.wait_for("› from the other client", "Reply to the other client.")
    assert screen.count("Reply to the other client.") == 1
    # That run is over: Enter here starts a new run (not a steer of a finished one).
    await pane.type("my turn again")
    await pane.keys("Enter")
    await pane.wait_for("› my turn again", "Back to this one.")


async def test_attach_tui_reconnects_reattaches_and_reprints_the_transcript(server, scripted, pane):
    scripted.script += [Reply(text="Before the cut."), Reply(text="After the cut.")]
    sid = await _new_session(server)
    await pane.start_argv([CLI, "attach", server.url, "--token", "tok", "--session", sid], ready="(scripted) scripted-model")
    await pane.type("one")
    await pane.keys("Enter")
    await pane.wait_for("Before the cut.")
    server.disconnect_clients()
    await pane.wait_for("disconnected", "Re-attached; the session has 2 messages:")
    # The transcript is printed again below the notice, from the new snapshot.
    screen = await pane.wait_until(lambda s: "Re-attached" in s and "Before the cut." in s.split("Re-attached", 1)[1])
    assert "› one" in screen.split("Re-attached", 1)[1]
    await pane.type("two")
    await pane.keys("Enter")
    await pane.wait_for("After the cut.")


async def test_attach_tui_prompt_in_flight_at_a_cut_fails_as_outcome_unknown_and_is_not_resent(server, scripted, pane):
    scripted.script += [Reply(text="never finished", chunks=4, hang_after_start=True), Reply(text="fresh answer")]
    sid = await _new_session(server)
    await pane.start_argv([CLI, "attach", server.url, "--token", "tok", "--session", sid], ready="(scripted) scripted-model")
    await pane.type("hang please")
    await pane.keys("Enter")
    await pane.wait_for("› hang please", "never finished")  # streaming, then the model hangs
    server.disconnect_clients()
    # The prompt fails here as "outcome unknown"; on the server the cut cancelled the call,
    # so its run ended aborted — the re-attached TUI reprints exactly that from the snapshot.
    await pane.wait_for("outcome of the call is unknown", "Re-attached; the session has 2 messages:")
    await pane.wait_for("Operation aborted")
    assert len(scripted.requests) == 1  # nothing was re-sent
    await pane.type("again")
    await pane.keys("Enter")
    await pane.wait_for("fresh answer")


async def test_attach_to_an_unknown_session_on_a_terminal_is_a_clear_error(server, pane):
    await pane.start_argv(
        [CLI, "attach", server.url, "--token", "tok", "--session", "no-such-session"], ready=pane.exit_marker
    )
    screen = await pane.screen()
    assert "Error:" in screen and "no-such-session" in screen and "Traceback" not in screen
