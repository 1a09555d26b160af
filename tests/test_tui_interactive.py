"""The interactive TUI as a person sees it: the real ``pi-actors`` in a tmux pane.

Each test starts ``pi-actors --model scripted/scripted-model`` in a detached tmux session
(a private tmux server per test) against the scripted LLM server, types with ``send-keys``
and reads the screen with ``capture-pane``. A screen has no event source, so waiting for
text is a short poll of capture-pane, bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import shlex
import shutil
import uuid

import pytest
import trio

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall, ScriptUsage

from conftest import CLI

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Pane:
    def __init__(self, env) -> None:
        self.env = env
        self.socket = f"pi-actors-test-{uuid.uuid4().hex[:10]}"
        self.exit_marker = f"EXITED-{uuid.uuid4().hex[:6]}"

    async def tmux(self, *args: str) -> str:
        proc = await trio.run_process(
            ["tmux", "-L", self.socket, *args], capture_stdout=True, capture_stderr=True, check=False, env=self.env.env
        )
        return proc.stdout.decode("utf-8", "replace")

    async def start(self, *cli_args: str) -> None:
        command = " ".join(shlex.quote(a) for a in [CLI, "--model", "scripted/scripted-model", "--no-session", *cli_args])
        await self.tmux(
            "new-session", "-d", "-x", "100", "-y", "40", "-c", str(self.env.work),
            f"{command}; echo {self.exit_marker}; sleep 60",
        )
        await self.wait_for("scripted-model")

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", "0", *keys)

    async def type(self, text: str) -> None:
        await self.tmux("send-keys", "-t", "0", "-l", text)

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", "0")

    async def wait_for(self, *texts: str, timeout: float = 20) -> str:
        screen = ""
        try:
            with trio.fail_after(timeout):
                while True:
                    screen = await self.screen()
                    if all(t in screen for t in texts):
                        return screen
                    await trio.sleep(0.1)
        except trio.TooSlowError:
            raise AssertionError(f"{texts!r} not on screen:\n{screen}") from None

    async def close(self) -> None:
        await self.tmux("kill-server")


@pytest.fixture
async def pane(env):
    p = Pane(env)
    try:
        yield p
    finally:
        await p.close()


async def test_a_prompt_streams_its_answer_as_markdown_and_the_footer_shows_model_and_tokens(scripted, pane):
    scripted.script.append(
        Reply(text="Here is **bold** text and code:\n\n```python\nprint('hi')\n```\n", chunks=6, usage=ScriptUsage(input=1200, output=345))
    )
    await pane.start()
    await pane.type("say hello")
    await pane.keys("Enter")
    screen = await pane.wait_for("print('hi')", "↑1.2k", "↓345")
    assert "› say hello" in screen
    assert "Here is bold text" in screen and "**bold**" not in screen  # rendered, not raw Markdown
    assert "```" not in screen
    assert "(scripted) scripted-model" in screen and "$0.000" in screen and "%/128k" in screen


async def test_a_tool_call_is_shown_with_its_command_and_output_and_an_edit_with_its_diff(scripted, env, pane):
    (env.work / "a.txt").write_text("hello world\n")
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo tool-said-$((40+2))"})]))
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="edit", arguments={"path": "a.txt", "oldText": "world", "newText": "there"})]))
    scripted.script.append(Reply(text="Both done."))
    await pane.start()
    await pane.type("use tools")
    await pane.keys("Enter")
    screen = await pane.wait_for("Both done.")
    assert "$ echo tool-said-$((40+2))" in screen and "tool-said-42" in screen
    assert "edit a.txt" in screen
    assert "-1 hello world" in screen and "+1 hello there" in screen  # the edit's diff


async def test_enter_during_a_run_queues_a_steering_message_and_esc_aborts_the_run(scripted, pane):
    scripted.script.append(Reply(text="Working on it slowly", hang_after_start=True))
    scripted.script.append(Reply(text="Steered answer."))
    await pane.start()
    await pane.type("start a long job")
    await pane.keys("Enter")
    await pane.wait_for("Working on it slowly", "esc to abort")
    await pane.type("also do this")
    await pane.keys("Enter")
    await pane.type("and then that")
    await pane.keys("Escape", "Enter")  # Alt+Enter
    await pane.wait_for("Steering: also do this", "Follow-up: and then that")
    await pane.keys("Escape")
    screen = await pane.wait_for("Operation aborted")
    assert "Working on it slowly" in screen  # the partial answer stays in the transcript
    # The next run delivers the queued steering message.
    await pane.type("go on")
    await pane.keys("Enter")
    await pane.wait_for("› also do this")


async def test_slash_model_lists_the_models_and_switches_to_the_chosen_one(scripted, pane):
    await pane.start()
    await pane.type("/model")
    await pane.keys("Enter")
    screen = await pane.wait_for("Select model", "scripted/scripted-model")
    assert "scripted-anthropic/scripted-claude" in screen
    await pane.type("scripted-claude")
    await pane.keys("Enter")
    await pane.wait_for("Model: scripted-anthropic/scripted-claude", "(scripted-anthropic) scripted-claude")


async def test_a_shell_command_shows_its_output_and_at_completes_a_file_that_is_attached(scripted, env, pane):
    (env.work / "notes-for-the-model.txt").write_text("the secret is 1234\n")
    scripted.script.append(Reply(text="I read your file."))
    await pane.start()
    await pane.type("!echo from-the-shell")
    await pane.keys("Enter")
    await pane.wait_for("$ echo from-the-shell", "  from-the-shell")
    await pane.type("look at @notes-for")
    await pane.wait_for("notes-for-the-model.txt ")  # the completion menu
    await pane.keys("Tab")
    await pane.wait_for("@notes-for-the-model.txt")
    await pane.keys("Enter", "Enter")  # accept the completion, then send
    await pane.wait_for("I read your file.", "[attached notes-for-the-model.txt]")
    body = scripted.requests[-1]["body"]
    user = [m for m in body["messages"] if m["role"] == "user"]
    text = str(user)
    assert "from-the-shell" in text  # the !command's output reached the context
    assert '<file name="' in text and "the secret is 1234" in text


async def test_slash_quit_exits_and_ctrl_c_twice_exits(scripted, pane):
    await pane.start()
    await pane.type("/quit")
    await pane.keys("Enter")
    await pane.wait_for(pane.exit_marker)
    await pane.tmux("kill-server")
    second = Pane(pane.env)
    try:
        await second.start()
        await second.type("some draft")
        await second.keys("C-c")
        screen = await second.wait_for("›")
        await trio.sleep(1.2)
        assert "some draft" not in await second.screen()  # the first Ctrl-C cleared the editor
        await second.keys("C-c", "C-c")
        await second.wait_for(second.exit_marker)
    finally:
        await second.close()
    del screen
