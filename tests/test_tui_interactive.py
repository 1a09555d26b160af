"""The interactive TUI as a person sees it: the real ``pi-actors`` in a tmux pane.

Each test starts ``pi-actors --model scripted/scripted-model`` in a detached tmux session
(a private tmux server per test) against the scripted LLM server, types with ``send-keys``
and reads the screen with ``capture-pane``. A screen has no event source, so waiting for
text is a short poll of capture-pane, bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import re
import shutil

import pytest
from _tmux import Pane

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall, ScriptUsage

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


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
    assert "(scripted) scripted-model" in screen and "$0.000" in screen and "%/128k (auto)" in screen
    assert "say hello" in (pane.env.home / "prompt-history").read_text()  # the editor's history is kept


async def test_thinking_is_shown_dimmed_and_ctrl_t_collapses_it(scripted, pane):
    for _ in range(2):
        scripted.script.append(Reply(thinking="Let me weigh the options.", text="The answer is 42."))
    await pane.start()
    await pane.type("first")
    await pane.keys("Enter")
    await pane.wait_for("The answer is 42.")
    await pane.wait_for_gone("esc to abort")  # printed above the live area, not still streaming
    # The coloured screen once it shows the thinking in one piece (a capture taken while the
    # reply is being re-drawn may not have it yet, on a loaded machine).
    colored = await pane.wait_until(lambda screen: "Let me weigh the options." in screen, escapes=True)
    # Italic in the theme's thinkingText colour (dark: the terminal's grey, SGR 90).
    before = colored[: colored.index("Let me weigh the options.")].rsplit("\n", 1)[-1]
    assert re.search(r"\x1b\[(?:[0-9;]*;)?3(?:;[0-9;]*)?m", before) and "90m" in before, repr(before)
    await pane.keys("C-t")
    await pane.wait_for("Thinking blocks: hidden")
    await pane.type("second")
    await pane.keys("Enter")
    screen = await pane.wait_for("› second", "Thinking...")
    assert screen.count("Let me weigh the options.") == 0  # the first reply is re-rendered too


async def test_a_tool_call_is_shown_with_its_command_and_live_output_and_an_edit_with_its_diff(scripted, env, pane):
    (env.work / "a.txt").write_text("hello world\n")
    command = "echo tool-said-$((40+2)); sleep 1; echo second-line; sleep 2"
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": command})]))
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="edit", arguments={"path": "a.txt", "oldText": "world", "newText": "there"})]))
    scripted.script.append(Reply(text="Both done."))
    await pane.start()
    await pane.type("use tools")
    await pane.keys("Enter")
    # Live output while the command still runs.
    await pane.wait_for(f"● $ {command}", "  tool-said-42", "esc to abort")
    screen = await pane.wait_for("Both done.")
    assert "tool-said-42" in screen and "second-line" in screen
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
    # Esc put the queued messages back into the editor: sent with the next prompt.
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
    await pane.wait_for("notes-for-the-model.txt", "(1/1)")  # the completion list
    await pane.keys("Tab")
    await pane.wait_for("@notes-for-the-model.txt")
    await pane.keys("Enter", "Enter")  # accept the completion, then send
    await pane.wait_for("I read your file.", "[attached notes-for-the-model.txt]")
    body = scripted.requests[-1]["body"]
    user = [m for m in body["messages"] if m["role"] == "user"]
    text = str(user)
    assert "from-the-shell" in text  # the !command's output reached the context
    assert '<file name="' in text and "the secret is 1234" in text


async def test_a_prompt_template_and_a_skill_expand_into_the_prompt(scripted, env, pane):
    (env.home / "prompts").mkdir()
    (env.home / "prompts" / "review.md").write_text("---\ndescription: Review code\n---\nPlease review $1 for $2.")
    (env.work / ".pi-actors" / "skills" / "greet").mkdir(parents=True)
    (env.work / ".pi-actors" / "skills" / "greet" / "SKILL.md").write_text("---\ndescription: Greets\n---\nAlways greet in French.")
    scripted.script.extend([Reply(text="Reviewed."), Reply(text="Bonjour.")])
    await pane.start()
    await pane.type("/rev")
    await pane.wait_for("Review code (user)")  # the completion menu lists the template
    await pane.keys("Escape")
    await pane.type('iew main.py "bugs and typos"')
    await pane.keys("Enter")
    await pane.wait_for("Reviewed.", "› Please review main.py for bugs and typos.")
    await pane.type("/skill:greet the user")
    await pane.keys("Enter")
    await pane.wait_for("Bonjour.")
    last_user = [m for m in scripted.requests[-1]["body"]["messages"] if m["role"] == "user"][-1]
    assert '<skill name="greet"' in str(last_user) and "Always greet in French." in str(last_user) and "the user" in str(last_user)


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
        await second.wait_for_gone("some draft")  # the first Ctrl-C cleared the editor
        await second.keys("C-c", "C-c")
        await second.wait_for(second.exit_marker)
    finally:
        await second.close()


async def test_a_dumb_terminal_gets_the_plain_line_loop(scripted, pane):
    scripted.script.append(Reply(text="Plain answer."))
    await pane.start(env_prefix="TERM=dumb ", ready="(/quit to exit)")
    await pane.type("hi")
    await pane.keys("Enter")
    screen = await pane.wait_for("Plain answer.")
    assert "────" not in screen  # no editor frame, no footer
    await pane.type("/quit")
    await pane.keys("Enter")
    await pane.wait_for(pane.exit_marker)


async def test_slash_tree_goes_back_to_an_earlier_question_and_puts_it_in_the_editor(scripted, pane):
    scripted.script.extend([Reply(text="First answer."), Reply(text="Second answer."), Reply(text="Another second answer.")])
    await pane.start(session=True)
    for question, answer in (("first question", "First answer."), ("second question", "Second answer.")):
        await pane.type(question)
        await pane.keys("Enter")
        await pane.wait_for_answer(answer)
    await pane.type("/tree")
    await pane.keys("Enter")
    await pane.wait_for("Session tree", "assistant: Second answer.  ← active")
    await pane.type("second q")  # filter, then pick the user message
    await pane.keys("Enter")
    await pane.wait_for("Summarize branch?", "No summary")  # pi asks; no summary
    await pane.keys("Enter")
    screen = await pane.wait_until(
        lambda s: "Navigated to selected point" in s and "› second question" in s.split("Navigated to selected point")[1]
    )
    assert "› second question" in screen.split("Navigated to selected point")[1]  # back in the editor
    await pane.keys("Enter")
    await pane.wait_for_answer("Another second answer.")
    await pane.type("/tree")
    await pane.keys("Enter")
    screen = await pane.wait_for("assistant: Another second answer.  ← active")
    assert "assistant: Second answer." in screen  # the old branch is still in the tree
    await pane.keys("Escape")  # closes the selector
    await pane.wait_for_gone("Session tree")
    await pane.keys("Escape", "Escape")  # double Esc on an empty editor opens the tree
    await pane.wait_for("Session tree")


async def test_slash_name_session_and_export_report_what_they_did(scripted, env, pane):
    scripted.script.append(Reply(text="Noted.", usage=ScriptUsage(input=50, output=7)))
    await pane.start(session=True)
    await pane.type("remember this")
    await pane.keys("Enter")
    await pane.wait_for_answer("Noted.")
    await pane.type("/name my project")
    await pane.keys("Enter")
    await pane.wait_for("Session name: my project", "work • my project")  # and in the footer
    await pane.type("/session")
    await pane.keys("Enter")
    await pane.wait_for("Messages: 1 user, 1 assistant", "Tokens: 50 in, 7 out")
    target = env.work / "out.html"
    await pane.type("/export out.html")
    await pane.keys("Enter")
    await pane.wait_for("Session exported to:")
    assert "remember this" in target.read_text()


async def test_slash_new_then_resume_reopens_the_earlier_session_with_its_transcript(scripted, pane):
    scripted.script.extend([Reply(text="Answer in the first session."), Reply(text="Answer in the second session.")])
    await pane.start(session=True)
    await pane.type("question one")
    await pane.keys("Enter")
    await pane.wait_for_answer("Answer in the first session.")
    await pane.type("/new")
    await pane.keys("Enter")
    await pane.wait_for("New session:")
    await pane.type("question two")
    await pane.keys("Enter")
    await pane.wait_for_answer("Answer in the second session.", "↑10 ")  # the footer counts only this session (10 each)
    await pane.type("/resume")
    await pane.keys("Enter")
    await pane.wait_for("Resume session", "question two", "question one")
    await pane.type("question one")
    await pane.keys("Enter")
    # (the notice is printed first, the transcript below it)
    screen = await pane.wait_until(lambda s: "Resumed:" in s and "Answer in the first session." in s.split("Resumed:")[1])
    assert "Answer in the first session." in screen.split("Resumed:")[1]  # the transcript is shown again


async def test_slash_fork_starts_a_new_session_from_an_earlier_question_and_compact_summarizes(scripted, pane):
    scripted.script.extend([Reply(text="Alpha."), Reply(text="Beta."), Reply(text="## Goal\nA summary.")])
    await pane.start(session=True)
    for question, answer in (("ask alpha", "Alpha."), ("ask beta", "Beta.")):
        await pane.type(question)
        await pane.keys("Enter")
        await pane.wait_for_answer(answer)
    await pane.type("/fork")
    await pane.keys("Enter")
    await pane.wait_for("Fork from message", "ask alpha")
    await pane.type("beta")
    await pane.keys("Enter")
    screen = await pane.wait_until(lambda s: "Forked to:" in s and all(t in s.split("Forked to:")[1] for t in ("Alpha.", "› ask beta")))
    after = screen.split("Forked to:")[1]
    assert "Alpha." in after and "› ask beta" in after  # history before it, and it is in the editor
    await pane.keys("C-c")
    await pane.type("/compact focus on alpha")
    await pane.keys("Enter")
    await pane.wait_for("Compacted context")
    assert "focus on alpha" in str(scripted.requests[-1]["body"])


async def test_hotkeys_thinking_copy_and_history_recall(scripted, pane):
    scripted.script.append(Reply(text="Copy me."))
    await pane.start()
    await pane.type("/copy")
    await pane.keys("Enter")
    await pane.wait_for("No agent messages to copy yet.")
    await pane.type("an earlier prompt")
    await pane.keys("Enter")
    await pane.wait_for_answer("Copy me.")
    await pane.type("/copy")
    await pane.keys("Enter")
    await pane.wait_for("Copied last agent message to clipboard")
    await pane.type("/hotkeys")
    await pane.keys("Enter")
    await pane.wait_for("Keyboard shortcuts", "Alt+Enter", "cycle thinking level")
    await pane.type("/thinking")
    await pane.keys("Enter")
    screen = await pane.wait_for("Thinking level", "→ off  ✓")
    assert "minimal" not in screen and "xhigh" not in screen  # only the levels the model has (pi)
    await pane.keys("Enter")
    await pane.wait_for("Thinking level: off")  # the scripted model does not reason: clamped to off
    await pane.keys("Up", "Up", "Up", "Up")
    await pane.wait_for("› an earlier prompt\n")


async def test_a_large_paste_shows_as_a_marker_and_is_sent_in_full(scripted, pane):
    scripted.script.append(Reply(text="Got the paste."))
    await pane.start()
    pasted = "\n".join(f"pasted line {i}" for i in range(1, 16))
    await pane.tmux("set-buffer", "--", pasted)
    await pane.tmux("paste-buffer", "-p", "-t", "0")
    await pane.wait_for("[paste #1 +15 lines]")
    await pane.keys("Enter")
    await pane.wait_for("Got the paste.")
    user = [m for m in scripted.requests[-1]["body"]["messages"] if m["role"] == "user"][-1]
    assert "pasted line 1" in str(user) and "pasted line 15" in str(user)


async def test_ctrl_g_edits_the_message_in_the_external_editor(scripted, env, pane):
    editor = env.work.parent / "fake-editor.sh"
    editor.write_text('#!/bin/sh\nprintf "written in the editor" > "$1"\n')
    editor.chmod(0o755)
    await pane.start(env_prefix=f"VISUAL={editor} ")
    await pane.type("draft")
    await pane.keys("C-g")
    await pane.wait_for("› written in the editor")


async def test_messages_given_on_the_command_line_run_one_after_another_on_start(scripted, pane):
    scripted.script += [Reply(text="First answer."), Reply(text="Second answer.")]
    await pane.start("first question", "second question")
    screen = await pane.wait_for("First answer.", "Second answer.")
    # In order, and all still on the screen: the live area never grows past the rows left and
    # scrolls the printed lines away (it did, from a stale cursor-position report).
    order = ["› first question", "First answer.", "› second question", "Second answer."]
    assert all(line in screen for line in order), screen
    assert [screen.index(line) for line in order] == sorted(screen.index(line) for line in order), screen
