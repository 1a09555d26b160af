"""Extensions in the interactive TUI as a person sees them: the real ``pi-actors`` in tmux
with an extension that asks ``ctx.ui.confirm`` from a ``tool_call`` hook, sets a status line
and binds keys (one of them a built-in key, which stays built-in), and the status-line
example of examples/extensions/."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

_STATUS_LINE = Path(__file__).resolve().parent.parent / "examples" / "extensions" / "status_line.py"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

_EXTENSION = textwrap.dedent(
    """
    def register(pi):
        async def on_session_start(event, ctx):
            await ctx.ui.set_status("gate", "gate: armed")

        async def gate(event, ctx):
            if event["toolName"] != "bash":
                return None
            if await ctx.ui.confirm("Allow this command?", event["input"]["command"]):
                return None
            return {"block": True, "reason": "denied at the gate"}

        async def greet(ctx):
            await ctx.ui.set_status("gate", "gate: greeting")
            name = await ctx.ui.input("Your name?", "a name")
            await ctx.ui.notify(f"hello {name}")

        pi.on("session_start", on_session_start)
        pi.on("tool_call", gate)
        pi.register_shortcut("ctrl+x", greet)
        pi.register_shortcut("ctrl+t", greet)  # Ctrl+T is the TUI's own: not bound
    """
)


async def test_an_extension_asks_in_the_live_area_shows_its_status_and_answers_its_key(scripted, env, pane):
    ext = env.work / "gate_ext.py"
    ext.write_text(_EXTENSION)
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo passed-$((20+1))"})]),
        Reply(text="First done."),
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo never-run"})]),
        Reply(text="Second done."),
    ]
    await pane.start("-e", str(ext), "-e", str(_STATUS_LINE))
    # The status set at session_start (before the TUI was up) is under the footer; the
    # built-in key is kept, with pi's one-line warning.
    # (The warning names the extension's path, so where its lines wrap depends on the path.)
    screen = await pane.wait_until(
        lambda s: "gate: armed turns: 0 tool calls: 0" in s and "conflicts with built-in shortcut. Skipping." in " ".join(s.split())
    )
    assert "Extension shortcut 'ctrl+t' from" in " ".join(screen.split())

    # (a) The tool_call hook's confirm opens in the live area; Enter on "Yes" lets it run.
    await pane.type("run the first")
    await pane.keys("Enter")
    screen = await pane.wait_for("Allow this command?", "echo passed-$((20+1))", "→ Yes")
    await pane.keys("Enter")
    screen = await pane.wait_for_answer("First done.", "turns: 2 tool calls: 1")  # the example's widget
    assert "passed-21" in screen

    # Esc dismisses the question: pi's answer for cancel, so the gate blocks the call.
    await pane.type("run the second")
    await pane.keys("Enter")
    await pane.wait_for("Allow this command?", "echo never-run")
    await pane.keys("Escape")
    screen = await pane.wait_for_answer("Second done.")
    assert "denied at the gate" in screen and "never-run\n" not in screen.replace("echo never-run", "")

    # (b, c) The extension's key runs its handler in the host while nothing runs: it sets
    # the status and asks for a line of text, answered with Enter.
    await pane.keys("C-x")
    screen = await pane.wait_for("Your name?", "gate: greeting")
    await pane.type("Ada")
    await pane.keys("Enter")
    await pane.wait_for("hello Ada")
    # Ctrl+T is still the TUI's own.
    await pane.keys("C-t")
    await pane.wait_for("Thinking blocks: hidden")
