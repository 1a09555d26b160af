"""The TUI's queue, re-rendering and rendering of replies and tools, as a person sees them
(issue 18, TUI items 1-3): the real ``pi-actors`` in a tmux pane (see ``_tmux.Pane``) against
the scripted LLM server, plus fast in-process checks of the Markdown rendering.

* Alt+Up pulls queued messages back into the editor; Esc during a run aborts it and puts
  every queued steering and follow-up message back into the editor, and none of them reaches
  the next, unrelated prompt.
* Ctrl+O re-renders tool output already on screen (expanded), Ctrl+T thinking blocks; the
  old rendering does not stay in the scrollback.
* Markdown as pi: single line breaks kept, link targets shown, tables boxed; a write call
  shows the content written, collapsed; a bash call ends with "Took N.Ns".
"""

from __future__ import annotations

import re
import shutil

import pytest
import trio
from conftest import actor_config
from hypothesis import given, settings
from hypothesis import strategies as st
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from pi_actors.actors import open_local_runtime
from pi_actors.cli.tui._markdown import PiMarkdown
from pi_actors.cli.tui.app import TuiApp
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def _editor(screen: str) -> str:
    """The editor's text on ``screen``: the lines between the last two rules."""
    lines = screen.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("────")]
    assert len(rules) >= 2, screen
    return "\n".join(line[2:].rstrip() for line in lines[rules[-2] + 1 : rules[-1]])


def _user_texts(request: dict) -> str:
    return str([m for m in request["body"]["messages"] if m["role"] == "user"])


@needs_tmux
async def test_alt_up_and_esc_put_queued_messages_back_in_the_editor_and_they_never_reach_the_next_prompt(scripted, pane):
    scripted.script.append(Reply(text="Working on it slowly", hang_after_start=True))
    scripted.script.append(Reply(text="Unrelated answer."))
    await pane.start()
    await pane.type("start a long job")
    await pane.keys("Enter")
    await pane.wait_for("Working on it slowly", "esc to abort")
    await pane.type("also do this")
    await pane.keys("Enter")
    await pane.type("and then that")
    await pane.keys("Escape", "Enter")  # Alt+Enter: a follow-up
    await pane.wait_for("Steering: also do this", "Follow-up: and then that", "alt+up to edit all queued messages")

    # Alt+Up: both back in the editor (steering first), the run goes on.
    await pane.keys("M-Up")
    screen = await pane.wait_for("Restored 2 queued messages to editor")
    await pane.wait_for_gone("Steering: also do this")
    screen = await pane.wait_for("esc to abort")
    assert _editor(screen) == "also do this\n\nand then that"

    # Sent again as one steering message, plus a follow-up; Esc aborts and restores both.
    await pane.keys("Enter")
    await pane.wait_for("Steering: also do this")
    await pane.type("follow me")
    await pane.keys("Escape", "Enter")
    await pane.wait_for("Follow-up: follow me")
    await pane.keys("Escape")
    screen = await pane.wait_for_answer("Operation aborted")
    screen = await pane.wait_until(lambda s: "follow me" in _editor(s) and "Follow-up:" not in s)
    assert _editor(screen) == "also do this\n\nand then that\n\nfollow me"
    assert "Restored" not in screen.split("Operation aborted")[1]  # Esc restores silently, as pi

    # The next, unrelated prompt carries none of them.
    await pane.keys("C-c")  # clears the editor
    await pane.wait_until(lambda s: _editor(s) == "")
    await pane.type("unrelated question")
    await pane.keys("Enter")
    await pane.wait_for_answer("Unrelated answer.")
    sent = _user_texts(scripted.requests[-1])
    assert "unrelated question" in sent
    assert "also do this" not in sent and "follow me" not in sent


@needs_tmux
async def test_ctrl_o_expands_tool_output_already_on_screen_and_tools_show_took_and_written_content(scripted, env, pane):
    verses = "".join(f"verse-{n:02d}\n" for n in range(1, 13))
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "printf 'out-%s\\n' $(seq 1 8)"})]))
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="write", arguments={"path": "poem.txt", "content": verses})]))
    scripted.script.append(Reply(text="All written."))
    await pane.start()
    await pane.type("run and write")
    await pane.keys("Enter")
    screen = await pane.wait_for_answer("All written.")
    # bash: the last 5 lines, pi's hint, and how long it took.
    assert "... (3 earlier lines, ctrl+o to expand)" in screen
    assert "out-8" in screen and "out-3" not in screen
    assert re.search(r"^  Took \d+\.\ds$", screen, re.M), screen
    # write: the content written, its first 10 lines.
    assert "write poem.txt" in screen and "verse-10" in screen and "verse-11" not in screen
    assert "... (2 more lines, 12 total, ctrl+o to expand)" in screen
    assert (env.work / "poem.txt").read_text() == verses

    await pane.keys("C-o")
    screen = await pane.wait_for("Tool output: expanded", "out-1", "verse-12")
    assert "ctrl+o to expand" not in screen and "out-3" in screen and "All written." in screen
    history = await pane.tmux("capture-pane", "-p", "-S", "-", "-t", "0")
    assert history.count("write poem.txt") == 1  # reprinted in place, not appended below
    assert "ctrl+o to expand" not in history

    await pane.keys("C-o")
    screen = await pane.wait_for("Tool output: collapsed", "... (3 earlier lines, ctrl+o to expand)")
    assert "out-1\n" not in screen and "verse-12" not in screen


@needs_tmux
async def test_markdown_keeps_line_breaks_shows_link_targets_and_boxes_tables_and_ctrl_t_hides_thinking_already_shown(scripted, pane):
    text = (
        "First line\nsecond line\n\nSee [the docs](https://example.com/docs) or <https://example.org>.\n\n"
        "| Name | Qty |\n|------|-----|\n| apple | 3 |\n| pear | 10 |\n"
    )
    scripted.script.append(Reply(thinking="Pondering the fruit table.", text=text))
    await pane.start()
    await pane.type("show me")
    await pane.keys("Enter")
    screen = await pane.wait_for_answer("│ pear  │ 10  │")
    lines = [line.rstrip() for line in screen.splitlines()]
    assert "First line" in lines and "second line" in lines  # a single newline is a line break
    assert "See the docs (https://example.com/docs) or https://example.org." in lines
    assert "https://example.org (" not in screen  # an autolink's target is shown once
    table = ["┌───────┬─────┐", "│ Name  │ Qty │", "├───────┼─────┤", "│ apple │ 3   │", "├───────┼─────┤", "│ pear  │ 10  │", "└───────┴─────┘"]
    start = lines.index(table[0])
    assert lines[start : start + len(table)] == table
    assert "Pondering the fruit table." in screen

    await pane.keys("C-t")
    screen = await pane.wait_for("Thinking blocks: hidden", "Thinking...")
    assert "Pondering the fruit table." not in screen  # the reply already shown, re-rendered
    assert "second line" in screen and "│ apple │ 3   │" in screen


async def test_clear_queue_answers_the_queued_texts_and_none_of_them_reaches_the_next_prompt(scripted, tmp_path):
    scripted.script += [Reply(text="slow answer", hang_after_start=True), Reply(text="fresh answer")]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        streaming = trio.Event()

        async def run() -> None:
            async with coordinator.open_call("prompt", {"text": "long job"}) as call:
                async for _event in call:
                    if scripted.requests:
                        streaming.set()
                await call.result()

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await streaming.wait()
                await coordinator.call("steer", {"text": "steer one"})
                await coordinator.call("follow_up", {"text": "follow one"})
                await coordinator.call("steer", {"text": "steer two"})
                assert (await coordinator.call("get_state"))["pendingMessageCount"] == 3
                queued = await coordinator.call("clear_queue")
                assert queued == {"steering": ["steer one", "steer two"], "followUp": ["follow one"]}
                assert await coordinator.call("clear_queue") == {"steering": [], "followUp": []}
                await coordinator.call("abort")
            await coordinator.call("prompt", {"text": "next question", "events": False})
    sent = _user_texts(scripted.requests[-1])
    assert "next question" in sent and "steer one" not in sent and "follow one" not in sent


class _Controller:
    """The UI's door to trio, recording what would be sent."""

    ui = None

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def submit(self, *cmd) -> None:
        self.sent.append(cmd)


@pytest.fixture
def tui(tmp_path):
    """A TuiApp not started (it prints straight to stdout), on a dummy terminal."""
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
        yield TuiApp(_Controller(), {"cwd": str(tmp_path), "agentDir": str(tmp_path), "model": {"provider": "p", "id": "m"}, "thinkingLevel": "off"})


def _plain(ansi: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", ansi)


def test_queued_messages_come_back_as_typed_before_the_draft_and_a_failed_call_keeps_them(tui, capsys):
    tui.queued = [("Steering", '<file name="/w/a.txt">\nA\n</file>\nlook at @a.txt', "look at @a.txt"), ("Follow-up", "then this", "then this")]
    tui.buffer.text = "my draft"
    tui.restore_queued(None, abort=False)  # clear_queue failed: its error is shown, nothing else changes
    assert len(tui.queued) == 2 and tui.buffer.text == "my draft"
    tui.restore_queued({"steering": ['<file name="/w/a.txt">\nA\n</file>\nlook at @a.txt'], "followUp": ["then this"]}, abort=False)
    assert tui.queued == []
    assert tui.buffer.text == "look at @a.txt\n\nthen this\n\nmy draft" and tui.buffer.cursor_position == len(tui.buffer.text)
    assert "Restored 2 queued messages to editor" in _plain(capsys.readouterr().out)
    tui.restore_queued({"steering": [], "followUp": []}, abort=False)
    assert "No queued messages to restore" in _plain(capsys.readouterr().out)
    tui.dequeue(abort=True)
    assert tui.ctl.sent == [("dequeue", True)]


def test_reprint_clears_the_scrollback_and_renders_tools_with_the_current_setting(tui, capsys):
    tui._print_bash("seq 30", {"output": "".join(f"n{i}\n" for i in range(1, 31)), "exitCode": 0}, False)
    tui.print_tool("bash", {"command": "make"}, {"content": [{"type": "text", "text": "built"}]}, False, took=2.04)
    tui.print_tool("write", {"path": "a.py", "content": "".join(f"x{i} = {i}\n" for i in range(1, 13))}, {"content": [{"type": "text", "text": "ok"}]}, False)
    first = _plain(capsys.readouterr().out)
    assert "n10\n" not in first and "n11" in first and "... 10 more lines (ctrl+o to expand)" in first
    assert "  Took 2.0s" in first
    assert "x10 = 10" in first and "x11" not in first and "... (2 more lines, 12 total, ctrl+o to expand)" in first
    tui.expand_tools = True
    tui.reprint()
    again = capsys.readouterr().out
    assert again.startswith("\x1b[H\x1b[2J\x1b[3J")  # home, clear screen, clear scrollback
    again = _plain(again)
    assert "n1\n" in again and "x12 = 12" in again and "ctrl+o" not in again
    assert again.count("$ seq 30") == 1 and "  Took 2.0s" in again


def _render(markdown: str, width: int = 60) -> str:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as capture:
        console.print(PiMarkdown(markdown))
    return capture.get()


def test_markdown_single_line_breaks_links_and_tables_render_as_pi():
    out = _render("a\nb\n\n[x](http://h/x) <me@h.org>\n\n| k | v |\n|---|---|\n| 1 | 2 |\n")
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[:2] == ["a", "b"]
    assert "x (http://h/x) me@h.org" in lines
    assert "│ 1 │ 2 │" in lines and "┌───┬───┐" in lines


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_markdown_of_any_text_renders_without_error(text):
    _render(text, width=40)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["|", "-", "[", "]", "(", ")", "<", ">", "\n", "a", " ", "http://x", "mailto:", "*", "`"]), max_size=60))
def test_markdown_of_hostile_link_and_table_fragments_renders_without_error(pieces):
    _render("".join(pieces), width=30)
