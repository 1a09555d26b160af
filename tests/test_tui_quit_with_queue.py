"""Quitting the TUI while messages wait in the queue (issue 18, item 1): nothing typed is
lost silently. pi 0.73.1 exits and drops them (they survive only in its editor history);
here each one still queued is printed below the TUI, as typed, and none is sent.

The real ``pi-actors`` in a tmux pane (``_tmux.Pane``) against the scripted LLM server."""

from __future__ import annotations

import shutil

import pytest

from pi_actors.testing.scripted_server import Reply

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


async def test_quitting_with_queued_messages_prints_each_unsent_message_and_sends_none(scripted, pane):
    scripted.script.append(Reply(text="Working on it slowly", hang_after_start=True))
    scripted.script.append(Reply(text="never asked for"))
    await pane.start()
    await pane.type("start a long job")
    await pane.keys("Enter")
    await pane.wait_for("Working on it slowly", "esc to abort")
    await pane.type("steer this way")
    await pane.keys("Enter")
    await pane.type("and follow up later")
    await pane.keys("Escape", "Enter")  # Alt+Enter: a follow-up
    await pane.wait_for("Steering: steer this way", "Follow-up: and follow up later")

    await pane.keys("C-c", "C-c")  # quit, with the run still going and both queued
    screen = await pane.wait_for(pane.exit_marker, timeout=30)
    tail = screen[screen.index("Not sent (queued when you quit)") :]
    assert "2 messages" in tail.splitlines()[0], screen
    assert tail.index("Steering: steer this way") < tail.index("Follow-up: and follow up later") < tail.index(pane.exit_marker), screen
    assert "Traceback" not in screen
    # Neither reached the model: the only request is the first prompt's.
    assert len(scripted.requests) == 1
    assert "steer this way" not in str(scripted.requests[0]["body"]["messages"])
